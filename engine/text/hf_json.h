#ifndef LINSERVE_ENGINE_TEXT_HF_JSON_H_
#define LINSERVE_ENGINE_TEXT_HF_JSON_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace linserve {

// Reading a Hugging Face tokenizer.json: where a load error points, and a
// parse that bounds the nesting before nlohmann's recursive parser sees it (a
// file of a million '[' would otherwise exhaust the stack).

// Where in which file a value sits, for error messages: "tokenizer.json" and
// a JSON Pointer such as "/pre_tokenizer/pretokenizers/0/pattern/Regex".
struct HfJsonPlace {
  std::string file;
  std::string path;

  HfJsonPlace Child(std::string_view key) const;
  HfJsonPlace Child(size_t index) const;
};

// InvalidArgument "<file>: <path>: <reason>", the form of every load error.
absl::Status HfLoadError(const HfJsonPlace& place, absl::string_view reason);

// The BPE model's two big tables ("/model/vocab", "/model/merges"), read
// while parsing instead of being built as JSON: a 248,000-key object in
// nlohmann's std::map cost most of a large tokenizer's load.
struct HfModelTables {
  bool has_vocab = false;   // "/model/vocab" was an object, read into `vocab`
  bool has_merges = false;  // "/model/merges" was an array, read into `merges`
  std::vector<std::pair<std::string, int64_t>> vocab;        // in file order
  std::vector<std::pair<std::string, std::string>> merges;  // "a b" or ["a", "b"]
};

// Parses `text`, refusing nesting deeper than `max_depth` arrays/objects and
// malformed or truncated text (with the byte offset nlohmann reports). With
// `tables`, the model's vocab and merges go there, and the JSON keeps them
// as an empty object and array; a vocab id that is not a non-negative integer
// or a malformed merge is refused with its path.
absl::StatusOr<nlohmann::json> ParseHfJson(std::string_view text, std::string_view file,
                                           int max_depth, HfModelTables* tables = nullptr);

// Typed field access that names the place on failure. `Required*` fail when the
// key is absent; `Optional*` return `fallback` when it is absent or null.
absl::StatusOr<std::string> RequiredString(const nlohmann::json& object, std::string_view key,
                                           const HfJsonPlace& place);
absl::StatusOr<bool> OptionalBool(const nlohmann::json& object, std::string_view key,
                                  bool fallback, const HfJsonPlace& place);
absl::StatusOr<const nlohmann::json*> RequiredArray(const nlohmann::json& object,
                                                    std::string_view key,
                                                    const HfJsonPlace& place);
// The "type" of a component object (normalizer, pre-tokenizer...).
absl::StatusOr<std::string> ComponentType(const nlohmann::json& component,
                                          const HfJsonPlace& place);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_JSON_H_

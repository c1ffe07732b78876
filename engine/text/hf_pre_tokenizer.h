#ifndef LINSERVE_ENGINE_TEXT_HF_PRE_TOKENIZER_H_
#define LINSERVE_ENGINE_TEXT_HF_PRE_TOKENIZER_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/text/hf_json.h"
#include "engine/text/hf_regex.h"
#include "nlohmann/json.hpp"

namespace linserve {

// What a split does with the pieces a pattern matches (the library's
// SplitDelimiterBehavior).
enum class HfSplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// A tokenizer.json "pre_tokenizer": the text between added tokens is cut into
// pieces that BPE then encodes one by one. Supports ByteLevel, Split, Digits,
// Punctuation and Sequence (flattened into steps run in order, each on every
// piece the previous steps left). Immutable after Load.
class HfPreTokenizer {
 public:
  // `json` is the "pre_tokenizer" value (null for none).
  static absl::StatusOr<HfPreTokenizer> Load(const nlohmann::json& json, const HfJsonPlace& place,
                                             const HfRegexLimits& limits);

  // Calls `emit` with each non-empty piece of `text` after every step, in
  // order, depth first: no step's output is collected whole. The views live
  // only during the call. ResourceExhausted if a regex hits its limits.
  absl::Status ForEachPiece(std::string_view text,
                            absl::FunctionRef<void(std::string_view)> emit) const;

  // True when the last step is ByteLevel: the pieces come out in byte-level
  // characters.
  bool ends_byte_level() const;

 private:
  struct Step {
    enum class Kind { kSplit, kByteLevel, kDigits, kPunctuation } kind;
    std::optional<HfRegex> regex;  // Split; ByteLevel with use_regex
    HfSplitBehavior behavior = HfSplitBehavior::kIsolated;
    bool invert = false;            // Split
    bool add_prefix_space = false;  // ByteLevel
  };

  absl::Status AddSteps(const nlohmann::json& json, const HfJsonPlace& place,
                        const HfRegexLimits& limits);
  // Runs steps_[step_index...] on `piece`.
  absl::Status Run(size_t step_index, std::string_view piece,
                   absl::FunctionRef<void(std::string_view)> emit) const;

  std::vector<Step> steps_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_PRE_TOKENIZER_H_

#ifndef LINSERVE_ENGINE_TEXT_HF_PRE_TOKENIZER_H_
#define LINSERVE_ENGINE_TEXT_HF_PRE_TOKENIZER_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

  // Replaces `pieces` by the pieces after every step; empty pieces are
  // dropped. ResourceExhausted if a regex hits its limits.
  absl::Status Apply(std::vector<std::string>* pieces) const;

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
  absl::Status ApplyStep(const Step& step, std::string_view piece,
                         std::vector<std::string>* out) const;

  std::vector<Step> steps_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_PRE_TOKENIZER_H_

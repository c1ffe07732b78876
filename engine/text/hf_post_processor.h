#ifndef LINSERVE_ENGINE_TEXT_HF_POST_PROCESSOR_H_
#define LINSERVE_ENGINE_TEXT_HF_POST_PROCESSOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/text/hf_json.h"
#include "nlohmann/json.hpp"

namespace linserve {

// What a tokenizer.json "post_processor" adds around one sequence when special
// tokens are added: TemplateProcessing's "single" template (its special tokens
// before and after "$A"), ByteLevel (nothing; it only trims offsets), or a
// Sequence of those.
struct HfPostProcessor {
  std::vector<int64_t> prefix_ids;  // e.g. BOS
  std::vector<int64_t> suffix_ids;  // e.g. EOS

  static absl::StatusOr<HfPostProcessor> Load(const nlohmann::json& json,
                                              const HfJsonPlace& place);
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_POST_PROCESSOR_H_

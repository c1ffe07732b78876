#ifndef LINSERVE_ENGINE_TEXT_HF_NORMALIZER_H_
#define LINSERVE_ENGINE_TEXT_HF_NORMALIZER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/text/hf_json.h"
#include "engine/text/hf_unicode.h"
#include "nlohmann/json.hpp"

namespace linserve {

// A tokenizer.json "normalizer": none, NFC, NFKC, or a Sequence of those
// (flattened into `forms`, applied in order).
struct HfNormalizer {
  std::vector<NormalForm> forms;

  // `json` is the "normalizer" value (null for none). Any other type is refused,
  // naming it and its place.
  static absl::StatusOr<HfNormalizer> Load(const nlohmann::json& json, const HfJsonPlace& place);

  bool empty() const { return forms.empty(); }
  std::string Apply(std::string_view text) const;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_NORMALIZER_H_

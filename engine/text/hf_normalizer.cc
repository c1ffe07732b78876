#include "engine/text/hf_normalizer.h"

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace linserve {

namespace {

absl::Status AddForms(const nlohmann::json& json, const HfJsonPlace& place,
                      std::vector<NormalForm>* forms) {
  if (json.is_null()) return absl::OkStatus();
  LINSERVE_ASSIGN_OR_RETURN(const std::string type, ComponentType(json, place));
  if (type == "NFC") {
    forms->push_back(NormalForm::kNfc);
  } else if (type == "NFKC") {
    forms->push_back(NormalForm::kNfkc);
  } else if (type == "Sequence") {
    LINSERVE_ASSIGN_OR_RETURN(const nlohmann::json* list,
                              RequiredArray(json, "normalizers", place));
    const HfJsonPlace list_place = place.Child("normalizers");
    for (size_t i = 0; i < list->size(); ++i) {
      LINSERVE_RETURN_IF_ERROR(AddForms((*list)[i], list_place.Child(i), forms));
    }
  } else {
    return HfLoadError(place.Child("type"),
                       absl::StrCat("the normalizer \"", type,
                                    "\" is not supported (only NFC, NFKC and Sequence)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HfNormalizer> HfNormalizer::Load(const nlohmann::json& json,
                                                const HfJsonPlace& place) {
  HfNormalizer normalizer;
  LINSERVE_RETURN_IF_ERROR(AddForms(json, place, &normalizer.forms));
  return normalizer;
}

std::string HfNormalizer::Apply(std::string_view text) const {
  std::string out(text);
  for (NormalForm form : forms) out = Normalize(out, form);
  return out;
}

}  // namespace linserve

#include "engine/text/hf_post_processor.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace linserve {

namespace {

absl::Status AddTemplate(const nlohmann::json& json, const HfJsonPlace& place,
                         HfPostProcessor* out) {
  LINSERVE_ASSIGN_OR_RETURN(const nlohmann::json* single, RequiredArray(json, "single", place));
  const HfJsonPlace single_place = place.Child("single");
  const auto specials = json.find("special_tokens");
  bool after_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const nlohmann::json& piece = (*single)[i];
    const HfJsonPlace at = single_place.Child(i);
    if (!piece.is_object() || piece.size() != 1) {
      return HfLoadError(at, "must be {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    if (piece.contains("Sequence")) {
      after_sequence = true;
      continue;
    }
    if (!piece.contains("SpecialToken")) {
      return HfLoadError(at, absl::StrCat("unknown template piece \"", piece.begin().key(), "\""));
    }
    LINSERVE_ASSIGN_OR_RETURN(const std::string name,
                              RequiredString(piece["SpecialToken"], "id", at.Child("SpecialToken")));
    const HfJsonPlace special_place = place.Child("special_tokens").Child(name);
    if (specials == json.end() || !specials->is_object() || !specials->contains(name)) {
      return HfLoadError(special_place, "the template names a special token not listed here");
    }
    LINSERVE_ASSIGN_OR_RETURN(const nlohmann::json* ids,
                              RequiredArray((*specials)[name], "ids", special_place));
    for (const nlohmann::json& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0) {
        return HfLoadError(special_place.Child("ids"), "not a list of non-negative integers");
      }
      (after_sequence ? out->suffix_ids : out->prefix_ids).push_back(id.get<int64_t>());
    }
  }
  return absl::OkStatus();
}

absl::Status AddProcessor(const nlohmann::json& json, const HfJsonPlace& place,
                          HfPostProcessor* out) {
  if (json.is_null()) return absl::OkStatus();
  LINSERVE_ASSIGN_OR_RETURN(const std::string type, ComponentType(json, place));
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "TemplateProcessing") return AddTemplate(json, place, out);
  if (type == "Sequence") {
    LINSERVE_ASSIGN_OR_RETURN(const nlohmann::json* list,
                              RequiredArray(json, "processors", place));
    const HfJsonPlace list_place = place.Child("processors");
    for (size_t i = 0; i < list->size(); ++i) {
      LINSERVE_RETURN_IF_ERROR(AddProcessor((*list)[i], list_place.Child(i), out));
    }
    return absl::OkStatus();
  }
  return HfLoadError(place.Child("type"),
                     absl::StrCat("the post-processor \"", type,
                                  "\" is not supported (only TemplateProcessing, ByteLevel "
                                  "and Sequence)"));
}

}  // namespace

absl::StatusOr<HfPostProcessor> HfPostProcessor::Load(const nlohmann::json& json,
                                                      const HfJsonPlace& place) {
  HfPostProcessor processor;
  LINSERVE_RETURN_IF_ERROR(AddProcessor(json, place, &processor));
  return processor;
}

}  // namespace linserve

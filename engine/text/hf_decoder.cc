#include "engine/text/hf_decoder.h"

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/text/hf_byte_level.h"

namespace linserve {

absl::Status HfDecoder::Check(const nlohmann::json& json, const HfJsonPlace& place) {
  if (json.is_null()) {
    // The library then joins tokens with spaces, which no byte-level file wants.
    return HfLoadError(place, "no decoder (only ByteLevel and Sequence are supported)");
  }
  LINSERVE_ASSIGN_OR_RETURN(const std::string type, ComponentType(json, place));
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence") {
    LINSERVE_ASSIGN_OR_RETURN(const nlohmann::json* list, RequiredArray(json, "decoders", place));
    const HfJsonPlace list_place = place.Child("decoders");
    for (size_t i = 0; i < list->size(); ++i) {
      LINSERVE_ASSIGN_OR_RETURN(const std::string inner,
                                ComponentType((*list)[i], list_place.Child(i)));
      if (inner != "ByteLevel") {
        return HfLoadError(list_place.Child(i).Child("type"),
                           absl::StrCat("the decoder \"", inner,
                                        "\" is not supported (only ByteLevel and Sequence)"));
      }
    }
    return absl::OkStatus();
  }
  return HfLoadError(place.Child("type"),
                     absl::StrCat("the decoder \"", type,
                                  "\" is not supported (only ByteLevel and Sequence)"));
}

std::string HfDecoder::TokenBytes(std::string_view token) {
  std::string bytes;
  if (!DecodeByteLevel(token, &bytes)) bytes.assign(token);
  return bytes;
}

}  // namespace linserve

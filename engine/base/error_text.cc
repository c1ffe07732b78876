#include "engine/base/error_text.h"

namespace linserve {

std::string QuotedExcerpt(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return absl::StrCat("'", text, "'");
  return absl::StrCat("'", text.substr(0, max_bytes), "...'");
}

}  // namespace linserve

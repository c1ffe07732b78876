#ifndef LINSERVE_ENGINE_BASE_ERROR_TEXT_H_
#define LINSERVE_ENGINE_BASE_ERROR_TEXT_H_

// Words for the errors that name what a file or a client sent. No LibTorch.

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace linserve {

// Enough of a name to find it; a hostile file's megabyte-long string would
// bury the message.
inline constexpr size_t kMaxQuotedBytes = 80;

// 'text' in single quotes, its first `max_bytes` bytes and "..." where it is
// longer: "'name'", "'aaaa...'".
std::string QuotedExcerpt(absl::string_view text, size_t max_bytes = kMaxQuotedBytes);

// InvalidArgument with the pieces' StrCat as its message.
template <typename... Pieces>
absl::Status InvalidArgument(const Pieces&... pieces) {
  return absl::InvalidArgumentError(absl::StrCat(pieces...));
}

}  // namespace linserve

#endif  // LINSERVE_ENGINE_BASE_ERROR_TEXT_H_

#ifndef LINSERVE_ENGINE_SHA256_H_
#define LINSERVE_ENGINE_SHA256_H_

#include <string>
#include <string_view>

#include "absl/types/span.h"

namespace linserve {

// SHA-256 (OpenSSL) of the concatenation of `parts`, as 64 lowercase hex
// digits. Thread-safe.
std::string Sha256Hex(absl::Span<const std::string_view> parts);

// The same digest as 32 raw bytes.
std::string Sha256Digest(absl::Span<const std::string_view> parts);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_SHA256_H_

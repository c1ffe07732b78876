#ifndef LINSERVE_ENGINE_SHA256_H_
#define LINSERVE_ENGINE_SHA256_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/types/span.h"

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace linserve {

// SHA-256 (OpenSSL) of the concatenation of `parts`, as 64 lowercase hex
// digits. Thread-safe.
std::string Sha256Hex(absl::Span<const std::string_view> parts);

// The same digest as 32 raw bytes.
std::string Sha256Digest(absl::Span<const std::string_view> parts);

// SHA-256 of bytes that arrive in pieces (OpenSSL's streaming interface), so
// a file received in chunks is checksummed while the rest is on its way.
// Not thread-safe; movable.
class Sha256 {
 public:
  Sha256();
  void Update(std::string_view bytes);
  // The digest of everything updated so far, as 32 raw bytes. Once: the
  // object is spent afterwards.
  std::string Digest();

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> context_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_SHA256_H_

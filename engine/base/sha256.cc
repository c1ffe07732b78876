#include "engine/base/sha256.h"

#include <openssl/evp.h>

#include <memory>
#include <new>

#include "absl/strings/escaping.h"

namespace linserve {

std::string Sha256Digest(absl::Span<const std::string_view> parts) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                   &EVP_MD_CTX_free);
  // OpenSSL fails here only when out of memory.
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) {
    throw std::bad_alloc();
  }
  for (std::string_view part : parts) {
    if (EVP_DigestUpdate(context.get(), part.data(), part.size()) != 1) throw std::bad_alloc();
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  if (EVP_DigestFinal_ex(context.get(), digest, &digest_size) != 1) throw std::bad_alloc();
  return std::string(reinterpret_cast<const char*>(digest), digest_size);
}

Sha256::Sha256() : context_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
  // OpenSSL fails here only when out of memory.
  if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1) {
    throw std::bad_alloc();
  }
}

void Sha256::Update(std::string_view bytes) {
  if (EVP_DigestUpdate(context_.get(), bytes.data(), bytes.size()) != 1) throw std::bad_alloc();
}

std::string Sha256::Digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  if (EVP_DigestFinal_ex(context_.get(), digest, &digest_size) != 1) throw std::bad_alloc();
  return std::string(reinterpret_cast<const char*>(digest), digest_size);
}

std::string Sha256Hex(absl::Span<const std::string_view> parts) {
  return absl::BytesToHexString(Sha256Digest(parts));
}

}  // namespace linserve

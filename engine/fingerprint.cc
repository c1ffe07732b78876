#include "engine/fingerprint.h"

#include <openssl/evp.h>

#include <memory>

#include "absl/strings/escaping.h"

namespace linserve {

std::string ModelFingerprint(const ModelConfig& config, const TensorMap& weights) {
  const std::string canonical_config = ModelConfigToJson(config).dump();
  const std::string weight_bytes = SerializeSafetensors(weights);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                   &EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  // OpenSSL fails here only when out of memory.
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(context.get(), canonical_config.data(), canonical_config.size()) != 1 ||
      EVP_DigestUpdate(context.get(), weight_bytes.data(), weight_bytes.size()) != 1 ||
      EVP_DigestFinal_ex(context.get(), digest, &digest_size) != 1) {
    throw std::bad_alloc();
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), digest_size));
}

}  // namespace linserve

#include "engine/model/fingerprint.h"

#include <openssl/evp.h>

#include <memory>

#include <torch/types.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/sha256.h"

namespace linserve {

std::string ModelFingerprint(const ModelConfig& config, const TensorMap& weights) {
  const std::string canonical_config = ModelConfigToJson(config).dump();
  const std::string weight_bytes = SerializeSafetensors(weights);
  return Sha256Hex({canonical_config, weight_bytes});
}

std::string FloatWeightsFingerprint(const nlohmann::json& config, const TensorMap& weights) {
  // Streamed, one tensor in float32 at a time: a published model's weights
  // are gigabytes as float32.
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  TORCH_CHECK(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1, "SHA-256 init");
  auto update = [&](const void* data, size_t size) {
    TORCH_CHECK(EVP_DigestUpdate(ctx.get(), data, size) == 1, "SHA-256 update");
  };
  const std::string canonical = config.dump();  // keys sorted, no spaces
  update(canonical.data(), canonical.size());
  for (const auto& [name, tensor] : weights) {
    // Name and shape, then the little-endian float32 values.
    const std::string header = absl::StrCat(name, "[", absl::StrJoin(tensor.sizes(), ","), "]");
    update(header.data(), header.size() + 1);  // with its terminating NUL
    const torch::Tensor values = tensor.to(torch::kCPU, torch::kFloat32).contiguous();
    update(values.data_ptr(), values.numel() * sizeof(float));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  TORCH_CHECK(EVP_DigestFinal_ex(ctx.get(), digest, &size) == 1, "SHA-256 final");
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

}  // namespace linserve

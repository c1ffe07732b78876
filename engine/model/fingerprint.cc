#include "engine/model/fingerprint.h"

#include "engine/base/sha256.h"

namespace linserve {

std::string ModelFingerprint(const ModelConfig& config, const TensorMap& weights) {
  const std::string canonical_config = ModelConfigToJson(config).dump();
  const std::string weight_bytes = SerializeSafetensors(weights);
  return Sha256Hex({canonical_config, weight_bytes});
}

}  // namespace linserve

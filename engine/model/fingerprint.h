#ifndef LINSERVE_ENGINE_FINGERPRINT_H_
#define LINSERVE_ENGINE_FINGERPRINT_H_

#include <string>

#include "engine/base/model_config.h"
#include "engine/formats/safetensors.h"

namespace linserve {

// The model fingerprint: SHA-256, as 64 lowercase hex
// digits, of config.json's canonical form (keys sorted, no whitespace)
// followed by the weights as the codec serializes them (name order, so names,
// dtypes and shapes count as well as the bytes). Every saved state carries it,
// so that a state is never applied to a model it does not belong to.
// Thread-safe.
std::string ModelFingerprint(const ModelConfig& config, const TensorMap& weights);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_FINGERPRINT_H_

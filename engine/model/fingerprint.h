#ifndef LINSERVE_ENGINE_FINGERPRINT_H_
#define LINSERVE_ENGINE_FINGERPRINT_H_

#include <string>

#include "engine/base/model_config.h"
#include "engine/formats/safetensors.h"
#include "nlohmann/json.hpp"

namespace linserve {

// The model fingerprint: SHA-256, as 64 lowercase hex
// digits, of config.json's canonical form (keys sorted, no whitespace)
// followed by the weights as the codec serializes them (name order, so names,
// dtypes and shapes count as well as the bytes). Every saved state carries it,
// so that a state is never applied to a model it does not belong to.
// Thread-safe.
std::string ModelFingerprint(const ModelConfig& config, const TensorMap& weights);

// The fingerprint of the pretrained families (RWKV-7, Qwen3.5): SHA-256 over
// `config`'s canonical form and the weights as float32 in name order (each
// name and shape, then the values), streamed one tensor at a time, so that
// every file of the same weights (float32 or bfloat16, any naming the loader
// maps to the canonical one) and every compute dtype give one fingerprint.
std::string FloatWeightsFingerprint(const nlohmann::json& config, const TensorMap& weights);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_FINGERPRINT_H_

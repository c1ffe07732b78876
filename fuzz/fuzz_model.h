#ifndef LINSERVE_FUZZ_FUZZ_MODEL_H_
#define LINSERVE_FUZZ_FUZZ_MODEL_H_

// The model the state-file fuzzer and the seed-corpus tool share: tiny (two
// layers, d_model 32), the default model's kind (linear_elu with token
// shift), random weights from a fixed seed, so that its fingerprint, and with
// it the committed seed corpus, is the same on every run.

#include <memory>

#include "engine/language_model.h"

namespace linserve {

inline std::unique_ptr<LanguageModel> MakeFuzzModel() {
  ModelConfig config;
  config.d_model = 32;
  config.n_layers = 2;
  config.n_heads = 2;
  config.head_dim = 16;
  config.mlp_hidden = 64;
  config.attention.kind = AttentionKind::kLinearElu;
  config.attention.token_shift = true;
  config.attention.chunk_size = 16;
  return LanguageModel::Create(config, /*seed=*/7, torch::kCPU);
}

}  // namespace linserve

#endif  // LINSERVE_FUZZ_FUZZ_MODEL_H_

#ifndef LINSERVE_TESTS_TINY_MODEL_H_
#define LINSERVE_TESTS_TINY_MODEL_H_

// The smallest model of the default kind (linear_elu with token shift), for
// tests and fuzz targets that need a real model but not a trained one: it
// builds in milliseconds and its state file is a few KB.

#include "engine/base/model_config.h"

namespace linserve {

inline ModelConfig TinyModelConfig() {
  ModelConfig config;
  config.d_model = 32;
  config.n_layers = 2;
  config.n_heads = 2;
  config.head_dim = 16;
  config.mlp_hidden = 64;
  config.attention.kind = AttentionKind::kLinearElu;
  config.attention.token_shift = true;
  config.attention.chunk_size = 16;
  return config;
}

}  // namespace linserve

#endif  // LINSERVE_TESTS_TINY_MODEL_H_

#ifndef LINSERVE_FUZZ_FUZZ_QWEN35_SHAPE_H_
#define LINSERVE_FUZZ_FUZZ_QWEN35_SHAPE_H_

// The Qwen3.5 shape of the quantized-model fuzz target and its seeds: the
// tiny shape cut to two layers (one Gated DeltaNet, one attention) of half
// the heads, H 32, I 64 and V 256 (value heads still grouped, 2 over 1; GQA
// 2 over 1), so that a seed is a few tens of KB. The config is the directory's, not
// the file's, so the target and the seeds must agree on it.

#include "engine/qwen35/qwen35_config.h"

namespace linserve {

inline Qwen35Config FuzzQwen35Shape() {
  Qwen35Config config = Qwen35ShapeByName("tiny").value();
  config.num_hidden_layers = 2;
  config.layer_types = {Qwen35LayerKind::kLinearAttention, Qwen35LayerKind::kFullAttention};
  config.hidden_size = 32;
  config.intermediate_size = 64;
  config.vocab_size = 256;
  config.num_attention_heads = 2;
  config.num_key_value_heads = 1;
  config.head_dim = 16;
  config.linear_num_key_heads = 1;
  config.linear_num_value_heads = 2;
  config.eos_token_ids = {255};
  return config;
}

}  // namespace linserve

#endif  // LINSERVE_FUZZ_FUZZ_QWEN35_SHAPE_H_

#ifndef LINSERVE_TESTS_ENGINE_RWKV7_SMALL_RWKV7_SHAPE_H_
#define LINSERVE_TESTS_ENGINE_RWKV7_SMALL_RWKV7_SHAPE_H_

// The small RWKV-7 shapes the tests build random models of: two layers of
// heads of 64, every low-rank size `lora`.

#include <cstdint>

#include "engine/rwkv7/rwkv7_config.h"

namespace linserve {

inline Rwkv7Config SmallRwkv7Shape(int64_t d_model, int64_t ffn_size, int64_t vocab_size,
                                   int64_t lora = 16) {
  Rwkv7Config shape;
  shape.n_layers = 2;
  shape.d_model = d_model;
  shape.n_heads = d_model / 64;
  shape.head_size = 64;
  shape.w_lora = shape.a_lora = shape.v_lora = shape.g_lora = lora;
  shape.ffn_size = ffn_size;
  shape.vocab_size = vocab_size;
  return shape;
}

}  // namespace linserve

#endif  // LINSERVE_TESTS_ENGINE_RWKV7_SMALL_RWKV7_SHAPE_H_

#ifndef LINSERVE_ENGINE_RWKV7_CONFIG_H_
#define LINSERVE_ENGINE_RWKV7_CONFIG_H_

// RWKV-7 ("Goose") checkpoints: the shape of a model, inferred from its
// tensors, and the one canonical layout every RWKV-7 form in the engine reads.
//
// Canonical layout (BlinkDL's names and matrix orientations; C width, H heads
// of N, D* low-rank sizes, F FFN size, V vocabulary):
//   emb.weight (V, C), head.weight (V, C), ln_out.weight|bias (C)
//   blocks.0.ln0.weight|bias (C) (absent when the checkpoint has no pre-norm)
//   blocks.i.ln1|ln2.weight|bias (C)
//   blocks.i.att.x_r x_w x_k x_v x_a x_g (C), k_k k_a (C), r_k (H, N)
//   blocks.i.att.receptance|key|value|output.weight (C, C)   applied as W x
//   blocks.i.att.w0 (C), w1 (C, Dw), w2 (Dw, C); a0 a1 a2 (Da); g1 g2 (Dg)
//   blocks.i.att.v0 v1 v2 (Dv), blocks 1.. only        applied as x w1 w2
//   blocks.i.att.ln_x.weight|bias (C)
//   blocks.i.ffn.x_k (C), key.weight (F, C), value.weight (C, F)
// Vectors are (C) whether the file stored them as (C) or (1, 1, C).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/formats/safetensors.h"
#include "nlohmann/json.hpp"

namespace linserve {

struct Rwkv7Config {
  int64_t n_layers = 0;
  int64_t d_model = 0;     // C
  int64_t n_heads = 0;     // H, the rows of r_k
  int64_t head_size = 0;   // N = C / H
  int64_t w_lora = 0;      // Dw, decay
  int64_t a_lora = 0;      // Da, in-context learning rate
  int64_t v_lora = 0;      // Dv, value residual (0 with a single layer)
  int64_t g_lora = 0;      // Dg, output gate
  int64_t ffn_size = 0;    // F
  int64_t vocab_size = 0;  // V
  bool pre_norm = true;    // blocks.0.ln0 present (fla-hub files may omit it)

  bool operator==(const Rwkv7Config& other) const;
};

// {"n_layers": ..., ...}: every field above, keys as named there.
nlohmann::json Rwkv7ConfigToJson(const Rwkv7Config& config);

// The published 0.1B shape: 12 x 768, 12 heads of 64, V 65,536.
Rwkv7Config Rwkv7Config01B();

// The canonical tensor names of a model of `config`'s shape, with their shapes.
std::map<std::string, std::vector<int64_t>> Rwkv7TensorShapes(const Rwkv7Config& config);

struct Rwkv7Checkpoint {
  Rwkv7Config config;
  TensorMap weights;  // canonical names and shapes, dtypes as stored
};

// Infers the shape from a checkpoint's tensors (BlinkDL's names or the
// fla-hub renames) and brings them into the canonical layout. Unused
// blocks.0.att.v0/v1/v2 are dropped. Errors (InvalidArgument) name the tensor
// as the file names it: a missing or unexpected tensor, a shape with what
// was expected, a dtype other than float32, bfloat16 or float16. Tensors are
// not copied unless they must be transposed.
absl::StatusOr<Rwkv7Checkpoint> ReadRwkv7Checkpoint(const TensorMap& tensors);

// Random float32 weights in the canonical layout, scaled so that activations
// stay of order one through any depth and the decays and rates spread over
// their ranges (tests and benchmarks). Deterministic in `seed`.
TensorMap RandomRwkv7Weights(const Rwkv7Config& config, uint64_t seed);

// The same values written into existing tensors, one at a time, each rounded
// to its tensor's dtype: a model's parameters (by canonical name) filled in
// place, without a float32 copy of the whole model beside them. Throws
// c10::Error on a missing or extra name or a wrong shape.
void FillRandomRwkv7Weights(const Rwkv7Config& config, uint64_t seed, const TensorMap& into);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_RWKV7_CONFIG_H_

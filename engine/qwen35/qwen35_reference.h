#ifndef LINSERVE_ENGINE_QWEN35_REFERENCE_H_
#define LINSERVE_ENGINE_QWEN35_REFERENCE_H_

// Qwen3.5 (Gated DeltaNet hybrids) token by token in float64, written from
// ../shared/qwen35/SPEC.md section 3 as plainly as the spec's numpy skeleton:
// one token, one head, one matrix row at a time, sharing no code with the
// fast forms, so that a mistake there shows as a disagreement here. Slow:
// tests and checks only. The same job as engine/rwkv7/rwkv7_reference.h.

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/formats/safetensors.h"
#include "engine/qwen35/qwen35_config.h"

namespace linserve {

// Deliberate deviations, each one of the pitfalls other implementations hit
// (SPEC.md section 6): the tests show the fast model agrees with the default
// and disagrees with each.
struct Qwen35ReferenceVariant {
  // P1: (1 + w) in the zero-centred norms; false: w.
  bool norm_plus_one = true;
  // P4: q_proj rows [q_h | gate_h] per head; false: [all q | all gates].
  bool gate_interleaved = true;
  // P3: value head h reads key head h / (Hv/Hk) (grouped); false: h % Hk (tiled).
  bool value_heads_grouped = true;
  // P6: true rounds the GDN state S to bfloat16 after every token.
  bool state_bfloat16 = false;
  // P5: NEOX RoPE on the first rotary_dim dims only; false: on the whole head.
  bool rope_first_quarter = true;
};

// One session's state in float64, Hugging Face layouts. Fresh when `layers`
// is empty; otherwise one entry per layer, the fields of the layer's kind
// filled and the others empty.
struct Qwen35ReferenceState {
  struct Layer {
    // linear_attention: the last K-1 raw in_proj_qkv rows, oldest first,
    // zeros before the first token, (K-1, conv_dim).
    std::vector<double> conv;
    // linear_attention: S per value head, row by key index, column by value
    // index, (Hv, d_k, d_v).
    std::vector<double> S;
    // full_attention: the keys after q/k norm and RoPE and the values, one
    // row per token seen, (T, nKV, D) each.
    std::vector<double> k, v;
  };
  std::vector<Layer> layers;
  int64_t position = 0;  // tokens seen: the next token's RoPE position
};

// A model's weights read once (every tensor of qwen35_config.h's canonical
// layout, any float dtype), to run as many calls as a test needs.
class Qwen35Reference {
 public:
  // Throws std::invalid_argument naming a missing or misshapen tensor, or a
  // config the reference cannot run (heads that do not divide, an odd
  // rotary dimension). Matrices in float64 or float32 on the CPU are
  // shared, not copied (others are read into float32, which holds bfloat16
  // and float16 values exactly): change none in place while the reference
  // lives.
  Qwen35Reference(const Qwen35Config& config, const TensorMap& weights);
  ~Qwen35Reference();

  // Runs `tokens` one at a time from `state` (fresh when empty), appending
  // the logits after every token: T rows of V values.
  std::vector<std::vector<double>> Forward(const std::vector<int64_t>& tokens,
                                           Qwen35ReferenceState& state,
                                           const Qwen35ReferenceVariant& variant = {}) const;

  // The token mixers alone, on one token's normalised input `xn` (H values),
  // returning what the residual adds (H values): for the tests of the pieces.
  // `state` is this layer's entry (fresh when its fields are empty); the
  // layer must be of the mixer's kind; `position` is the token's RoPE
  // position (the number of tokens before it).
  std::vector<double> LinearAttention(int64_t layer, const std::vector<double>& xn,
                                      Qwen35ReferenceState::Layer& state,
                                      const Qwen35ReferenceVariant& variant = {}) const;
  std::vector<double> FullAttention(int64_t layer, const std::vector<double>& xn, int64_t position,
                                    Qwen35ReferenceState::Layer& state,
                                    const Qwen35ReferenceVariant& variant = {}) const;

  const Qwen35Config& config() const;

 private:
  struct Weights;
  std::unique_ptr<const Weights> weights_;
};

// One call: reads the weights, then Forward. For many calls on one model,
// build a Qwen35Reference once.
std::vector<std::vector<double>> Qwen35ReferenceForward(const Qwen35Config& config,
                                                        const TensorMap& weights,
                                                        const std::vector<int64_t>& tokens,
                                                        Qwen35ReferenceState& state,
                                                        const Qwen35ReferenceVariant& variant = {});

// The element-wise pieces, for their own tests.
// Zero-centred RMSNorm: x / sqrt(mean(x^2) + eps) * (1 + w), or * w when
// `plus_one` is false (the gated norm's scale, and pitfall P1).
std::vector<double> Qwen35ReferenceRmsNorm(const std::vector<double>& x,
                                           const std::vector<double>& w, double eps,
                                           bool plus_one = true);
// NEOX (rotate_half) RoPE of one head in place on its first `rotary_dim`
// values, at `position`, with inverse frequencies theta^(-2j/rotary_dim).
void Qwen35ReferenceRope(std::vector<double>& head, int64_t position, int64_t rotary_dim,
                         double theta);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_QWEN35_REFERENCE_H_

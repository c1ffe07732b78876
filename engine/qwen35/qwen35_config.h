#ifndef LINSERVE_ENGINE_QWEN35_CONFIG_H_
#define LINSERVE_ENGINE_QWEN35_CONFIG_H_

// Qwen3.5's dense text models (Gated DeltaNet hybrids): the shape of a model
// as its Hugging Face config.json gives it, and the canonical tensor layout
// every Qwen3.5 form in the engine reads (docs/qwen35.md; the math is
// ../shared/qwen35/SPEC.md's, section 3).
//
// Canonical layout: the checkpoint's own names with the prefix
// "model.language_model." (or "model.") taken off, matrices (out, in) as
// stored. H hidden, I intermediate, V vocabulary; GDN: Hk key heads and Hv
// value heads of d, key_dim = Hk d, value_dim = Hv d, conv_dim = 2 key_dim +
// value_dim; attention: nH query heads and nKV key/value heads of D.
//   embed_tokens.weight (V, H), norm.weight (H), lm_head.weight (V, H) when untied
//   layers.i.input_layernorm.weight, layers.i.post_attention_layernorm.weight (H)
//   layers.i.mlp.gate_proj.weight (I, H), up_proj.weight (I, H), down_proj.weight (H, I)
//  linear_attention layers:
//   layers.i.linear_attn.in_proj_qkv.weight (conv_dim, H)   rows [q | k | v]
//   layers.i.linear_attn.in_proj_z.weight (value_dim, H)
//   layers.i.linear_attn.in_proj_b.weight, in_proj_a.weight (Hv, H)
//   layers.i.linear_attn.conv1d.weight (conv_dim, 1, K)
//   layers.i.linear_attn.dt_bias, A_log (Hv)
//   layers.i.linear_attn.norm.weight (d)                     not zero-centred
//   layers.i.linear_attn.out_proj.weight (H, value_dim)
//  full_attention layers:
//   layers.i.self_attn.q_proj.weight (2 nH D, H)   query and gate interleaved per head
//   layers.i.self_attn.k_proj.weight, v_proj.weight (nKV D, H)
//   layers.i.self_attn.o_proj.weight (H, nH D)
//   layers.i.self_attn.q_norm.weight, k_norm.weight (D)
// Every other RMSNorm weight is zero-centred: the norm multiplies by (1 + w).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace linserve {

// The tokenizer's layout: the regular vocabulary, then the added tokens
// ("<|endoftext|>", "<|im_start|>", "<|im_end|>", ... in Qwen3.5's order),
// then padding rows of the embedding. The real models' added tokens start at
// 248044 (248046 <|im_end|>); the tiny shape's at 448 (450 <|im_end|>).
inline constexpr int64_t kQwen35EndOfTextId = 248044;
inline constexpr int64_t kQwen35TinyEndOfTextId = 448;

enum class Qwen35LayerKind { kLinearAttention, kFullAttention };

struct Qwen35Config {
  int64_t hidden_size = 0;            // H
  int64_t intermediate_size = 0;      // I
  int64_t vocab_size = 0;             // V (the embedding's rows, padded)
  int64_t num_hidden_layers = 0;
  std::vector<Qwen35LayerKind> layer_types;  // one per layer
  // Full attention.
  int64_t num_attention_heads = 0;    // nH
  int64_t num_key_value_heads = 0;    // nKV
  int64_t head_dim = 0;               // D
  double rope_theta = 1e7;
  double partial_rotary_factor = 0.25;  // rotary dims = head_dim * this (64 of 256)
  // Gated DeltaNet.
  int64_t linear_num_key_heads = 0;   // Hk
  int64_t linear_num_value_heads = 0; // Hv, a multiple of Hk (grouped: value head h reads key head h / (Hv / Hk))
  int64_t linear_key_head_dim = 0;    // d of q and k
  int64_t linear_value_head_dim = 0;  // d of v
  int64_t linear_conv_kernel_dim = 4; // K
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
  int64_t max_position_embeddings = 262144;
  // Token ids: config.json's eos_token_id (one or a list), and
  // generation_config.json's when the directory has one (both are kept).
  std::vector<int64_t> eos_token_ids;

  int64_t key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  int64_t rotary_dim() const;  // head_dim * partial_rotary_factor, even
  int64_t full_attention_layers() const;

  bool operator==(const Qwen35Config& other) const;
};

// "linear_attention" / "full_attention".
const char* Qwen35LayerKindName(Qwen35LayerKind kind);

// The text configuration of a config.json: the multimodal wrapper
// ("model_type": "qwen3_5", fields under "text_config") or a flat
// "qwen3_5_text" one. Reads rope_parameters (rope_theta,
// partial_rotary_factor; the mrope fields reduce to 1-D RoPE for text) and
// layer_types (or full_attention_interval when it is absent). Every field
// is checked (positive sizes, heads that divide, a known layer type) and an
// error names it: InvalidArgument "config.json: text_config.head_dim ...".
// Fields with a transformers default may be absent (linear_conv_kernel_dim 4,
// rms_norm_eps 1e-6, max_position_embeddings 262144, rope_theta 1e7,
// partial_rotary_factor 0.25, tie_word_embeddings false; the wrapper's own
// tie_word_embeddings wins over text_config's). What this implementation does
// not compute is refused by name: another hidden_act, attention_bias,
// attn_output_gate false, mlp_only_layers, experts, a rope_type or
// rope_scaling other than "default". eos_token_ids gathers text_config's and
// the wrapper's eos_token_id, in that order, without repeats.
absl::StatusOr<Qwen35Config> Qwen35ConfigFromJson(const nlohmann::json& json);

// True when config.json names a Qwen3.5 model: model_type "qwen3_5" or
// "qwen3_5_text", or an architectures entry starting with "Qwen3_5For"
// (not the mixture-of-experts family, "Qwen3_5MoeFor...").
bool IsQwen35Config(const nlohmann::json& json);

// The configuration as GetModelInfo reports it (flat, text fields only).
nlohmann::json Qwen35ConfigToJson(const Qwen35Config& config);

// Shapes: "tiny" (tests: 4 layers, 3 linear + 1 full, H 64, I 128, Hk 2 and
// Hv 4 so value heads are grouped, d 16, nH 4, nKV 2, D 32, rotary 8, V 512,
// tied), "0.8b", "2b", "4b" (SPEC.md section 1, V 248,320, tied). Layer i is
// full attention when (i + 1) % 4 == 0.
absl::StatusOr<Qwen35Config> Qwen35ShapeByName(const std::string& name);

// The canonical tensor names of a model of `config`'s shape, with their shapes.
std::map<std::string, std::vector<int64_t>> Qwen35TensorShapes(const Qwen35Config& config);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_QWEN35_CONFIG_H_

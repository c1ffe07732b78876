#ifndef LINSERVE_ENGINE_MODEL_CONFIG_H_
#define LINSERVE_ENGINE_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace linserve {

// The attention kinds; engine/transformer/*_kernel.cc each open with their formulas.
enum class AttentionKind {
  kSoftmax,        // KV-cache baseline; state grows with the context.
  kLinearElu,      // phi = elu + 1 (Transformers are RNNs).
  kLinearSoftmax,  // Efficient Attention: softmax over q features, e^k.
  kLinearCosine,   // 1 + cos similarity, phi(x) = [1, x / |x|].
  kVq,             // Transformer-VQ: quantised keys, window + codebook memory.
  kCompressed,     // Softmax-pooled memory slots.
};

// Softmax temperature for the softmax-family kinds.
enum class AttentionScale {
  kDefault,           // s = 1 / sqrt(dk)
  kEntropyInvariant,  // s = log_512(n_i) / sqrt(dk), n_i = attended positions
};

const char* AttentionKindName(AttentionKind kind);
absl::StatusOr<AttentionKind> ParseAttentionKind(const std::string& name);
bool IsLinearKind(AttentionKind kind);         // linear_elu/softmax/cosine
bool IsSoftmaxFamilyKind(AttentionKind kind);  // softmax, vq, compressed
bool HasConstantState(AttentionKind kind);     // all but softmax

struct AttentionConfig {
  AttentionKind kind = AttentionKind::kLinearElu;
  bool rope = false;            // linear kinds and softmax
  double rope_theta = 10000.0;  // rotary base
  AttentionScale scale = AttentionScale::kDefault;  // softmax-family kinds
  int64_t chunk_size = 64;      // L of the chunked prefill
  int64_t codebook_size = 64;   // vq: codes per head
  int64_t window = 64;          // vq: exact-softmax window W
  int64_t slots = 16;           // compressed: memory slots per head
  // Every kind: q, k, v from a learned per-channel mix of this position's
  // input and the previous one's (engine/transformer/token_shift.h); adds d_model floats
  // per layer to the state.
  bool token_shift = false;
};

// A model's architecture (docs/DESIGN.md, "The model"), read from its config.json.
struct ModelConfig {
  int64_t vocab_size = 258;  // 256 bytes + BOS + EOS
  int64_t d_model = 256;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t head_dim = 64;     // dk = dv
  int64_t mlp_hidden = 512;
  double norm_eps = 1e-5;
  int64_t bos_id = 256;
  int64_t eos_id = 257;
  // Whether a text starts with BOS: true only for a model trained that way.
  // The server, trainer and evaluator all obey it, so a conversation is
  // served exactly as the model was trained and scored.
  bool add_bos = false;
  AttentionConfig attention;
  // Free-form training provenance (corpus hash, steps, seed, losses); kept
  // verbatim so a save/load round trip does not lose it.
  nlohmann::json training = nlohmann::json::object();

  // Checks every field against its bound; the error names the field.
  absl::Status Validate() const;
};

absl::StatusOr<ModelConfig> ModelConfigFromJson(const nlohmann::json& json);
nlohmann::json ModelConfigToJson(const ModelConfig& config);
absl::StatusOr<ModelConfig> ReadModelConfig(const std::string& path);
absl::Status WriteModelConfig(const ModelConfig& config, const std::string& path);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_MODEL_CONFIG_H_

#include "engine/qwen35/qwen35_reference.h"

#include <c10/util/BFloat16.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace linserve {
namespace {

using Vec = std::vector<double>;

// Hugging Face's l2norm of q and k: x / sqrt(sum(x^2) + 1e-6), eps inside
// the sum, and 1e-6 whatever rms_norm_eps is.
constexpr double kL2NormEps = 1e-6;

[[noreturn]] void Refuse(const std::string& what) {
  throw std::invalid_argument(absl::StrCat("qwen35 reference: ", what));
}

// A matrix (out, in) as stored. Its values exactly: float32 for bfloat16,
// float16 and float32 weights (each of their values is a float32), float64
// for float64 ones. Products accumulate in float64, so either way a product
// is the float64 one of the stored values, and a 0.8B model takes 3 GB
// rather than 6.
class Matrix {
 public:
  Matrix() = default;
  explicit Matrix(const torch::Tensor& t)
      : values_(t.to(torch::kCPU,
                     t.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32)
                    .contiguous()),
        rows_(t.size(0)),
        cols_(t.size(1)) {
    if (values_.scalar_type() == torch::kFloat64) {
      f64_ = values_.data_ptr<double>();
    } else {
      f32_ = values_.data_ptr<float>();
    }
  }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

  // Row `i` times x.
  double Dot(int64_t i, const Vec& x) const {
    double sum = 0;
    if (f64_ != nullptr) {
      const double* row = f64_ + i * cols_;
      for (int64_t j = 0; j < cols_; ++j) sum += row[j] * x[j];
    } else {
      const float* row = f32_ + i * cols_;
      for (int64_t j = 0; j < cols_; ++j) sum += static_cast<double>(row[j]) * x[j];
    }
    return sum;
  }
  Vec Row(int64_t i) const {
    Vec row(cols_);
    for (int64_t j = 0; j < cols_; ++j) {
      row[j] = f64_ != nullptr ? f64_[i * cols_ + j] : static_cast<double>(f32_[i * cols_ + j]);
    }
    return row;
  }

 private:
  torch::Tensor values_;  // float32 or float64, contiguous
  const float* f32_ = nullptr;
  const double* f64_ = nullptr;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
};

// W x for W (out, in): y = x @ W.T.
Vec Linear(const Matrix& w, const Vec& x) {
  Vec y(w.rows());
  for (int64_t i = 0; i < w.rows(); ++i) y[i] = w.Dot(i, x);
  return y;
}

Vec Slice(const Vec& x, int64_t begin, int64_t size) {
  return Vec(x.begin() + begin, x.begin() + begin + size);
}

double Sigmoid(double u) { return 1.0 / (1.0 + std::exp(-u)); }
double Silu(double u) { return u * Sigmoid(u); }
// log(1 + e^u) without overflow.
double Softplus(double u) { return std::max(u, 0.0) + std::log1p(std::exp(-std::abs(u))); }

Vec L2Normalize(const Vec& x) {
  double sum = 0;
  for (double e : x) sum += e * e;
  const double scale = 1.0 / std::sqrt(sum + kL2NormEps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale;
  return y;
}

// The gated delta rule for one value head and one token (SPEC.md 3b.7), on
// S (d_k, d_v), row by key index; q and k already normalised, q scaled.
// Decay first, then the delta rule, then the output from the updated S.
Vec DeltaRuleStep(double* S, const Vec& q, const Vec& k, const Vec& v, double g, double beta) {
  const int64_t dk = static_cast<int64_t>(k.size()), dv = static_cast<int64_t>(v.size());
  const double decay = std::exp(g);
  for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
  Vec delta(dv, 0.0);  // (v - S^T k) beta, with the decayed S
  for (int64_t j = 0; j < dv; ++j) {
    double kv_mem = 0;
    for (int64_t i = 0; i < dk; ++i) kv_mem += S[i * dv + j] * k[i];
    delta[j] = (v[j] - kv_mem) * beta;
  }
  for (int64_t i = 0; i < dk; ++i) {
    for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += k[i] * delta[j];
  }
  Vec o(dv, 0.0);  // S^T q, with the updated S
  for (int64_t j = 0; j < dv; ++j) {
    for (int64_t i = 0; i < dk; ++i) o[j] += S[i * dv + j] * q[i];
  }
  return o;
}

double RoundToBfloat16(double x) {
  return static_cast<float>(c10::BFloat16(static_cast<float>(x)));
}

// Reads tensors by canonical name, refusing a missing or misshapen one.
class Reader {
 public:
  explicit Reader(const TensorMap& weights) : weights_(weights) {}

  torch::Tensor Get(const std::string& name, const std::vector<int64_t>& shape) const {
    const auto it = weights_.find(name);
    if (it == weights_.end()) Refuse(absl::StrCat("missing tensor ", name));
    const torch::Tensor& t = it->second;
    if (t.sizes().vec() != shape) {
      Refuse(absl::StrCat(name, " has shape [", absl::StrJoin(t.sizes().vec(), ", "),
                          "], expected [", absl::StrJoin(shape, ", "), "]"));
    }
    if (!t.is_floating_point()) Refuse(absl::StrCat(name, " is not a floating-point tensor"));
    return t;
  }
  Matrix ReadMatrix(const std::string& name, int64_t rows, int64_t cols) const {
    return Matrix(Get(name, {rows, cols}));
  }
  Vec ReadVector(const std::string& name, const std::vector<int64_t>& shape) const {
    const torch::Tensor t = Get(name, shape).to(torch::kCPU, torch::kFloat64).contiguous();
    return Vec(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  }

 private:
  const TensorMap& weights_;
};

// linear_attn.* of one layer.
struct GatedDeltaNetWeights {
  Matrix in_proj_qkv;  // (conv_dim, H), rows [q | k | v]
  Matrix in_proj_z;    // (value_dim, H)
  Matrix in_proj_b;    // (Hv, H)
  Matrix in_proj_a;    // (Hv, H)
  Vec conv1d;          // (conv_dim, 1, K)
  Vec dt_bias;         // (Hv)
  Vec A_log;           // (Hv)
  Vec norm;            // (d_v), used as w, not 1 + w
  Matrix out_proj;     // (H, value_dim)
};

// self_attn.* of one layer.
struct AttentionWeights {
  Matrix q_proj;  // (2 nH D, H), query and gate
  Matrix k_proj;  // (nKV D, H)
  Matrix v_proj;  // (nKV D, H)
  Matrix o_proj;  // (H, nH D)
  Vec q_norm;     // (D), zero-centred
  Vec k_norm;     // (D), zero-centred
};

struct LayerWeights {
  Vec input_layernorm;               // (H), zero-centred
  Vec post_attention_layernorm;      // (H), zero-centred
  GatedDeltaNetWeights linear_attn;  // linear_attention layers
  AttentionWeights self_attn;        // full_attention layers
  Matrix gate_proj;                  // (I, H)
  Matrix up_proj;                    // (I, H)
  Matrix down_proj;                  // (H, I)
};

}  // namespace

struct Qwen35Reference::Weights {
  Qwen35Config config;
  int64_t rotary_dim = 0;  // int(head_dim * partial_rotary_factor), as Hugging Face computes it
  Matrix embed_tokens;     // (V, H)
  Vec norm;                // (H), zero-centred
  Matrix lm_head;          // (V, H): embed_tokens when tied
  std::vector<LayerWeights> layers;
};

Qwen35Reference::Qwen35Reference(const Qwen35Config& config, const TensorMap& tensors) {
  auto w = std::make_unique<Weights>();
  w->config = config;
  const Qwen35Config& c = w->config;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  if (H <= 0 || I <= 0 || V <= 0 || c.num_hidden_layers <= 0) Refuse("sizes must be positive");
  if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers) {
    Refuse(absl::StrCat(c.layer_types.size(), " layer_types for ", c.num_hidden_layers, " layers"));
  }
  const bool any_linear =
      std::count(c.layer_types.begin(), c.layer_types.end(), Qwen35LayerKind::kLinearAttention) > 0;
  const bool any_full =
      std::count(c.layer_types.begin(), c.layer_types.end(), Qwen35LayerKind::kFullAttention) > 0;
  if (any_linear &&
      (c.linear_num_key_heads <= 0 || c.linear_num_value_heads <= 0 ||
       c.linear_num_value_heads % c.linear_num_key_heads != 0 || c.linear_key_head_dim <= 0 ||
       c.linear_value_head_dim <= 0 || c.linear_conv_kernel_dim <= 0)) {
    Refuse("linear attention heads: Hv must be a positive multiple of Hk, dims and K positive");
  }
  if (any_full) {
    if (c.num_attention_heads <= 0 || c.num_key_value_heads <= 0 ||
        c.num_attention_heads % c.num_key_value_heads != 0 || c.head_dim <= 0) {
      Refuse("attention heads: nH must be a positive multiple of nKV, head_dim positive");
    }
    w->rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
    if (w->rotary_dim <= 0 || w->rotary_dim % 2 != 0 || w->rotary_dim > c.head_dim) {
      Refuse(absl::StrCat("rotary dimension ", w->rotary_dim, " is not even and within head_dim"));
    }
  }

  const Reader r(tensors);
  w->embed_tokens = r.ReadMatrix("embed_tokens.weight", V, H);
  w->norm = r.ReadVector("norm.weight", {H});
  w->lm_head = c.tie_word_embeddings ? w->embed_tokens : r.ReadMatrix("lm_head.weight", V, H);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = absl::StrCat("layers.", i, ".");
    LayerWeights l;
    l.input_layernorm = r.ReadVector(p + "input_layernorm.weight", {H});
    l.post_attention_layernorm = r.ReadVector(p + "post_attention_layernorm.weight", {H});
    l.gate_proj = r.ReadMatrix(p + "mlp.gate_proj.weight", I, H);
    l.up_proj = r.ReadMatrix(p + "mlp.up_proj.weight", I, H);
    l.down_proj = r.ReadMatrix(p + "mlp.down_proj.weight", H, I);
    if (c.layer_types[i] == Qwen35LayerKind::kLinearAttention) {
      const int64_t Hv = c.linear_num_value_heads;
      GatedDeltaNetWeights& g = l.linear_attn;
      const std::string q = p + "linear_attn.";
      g.in_proj_qkv = r.ReadMatrix(q + "in_proj_qkv.weight", c.conv_dim(), H);
      g.in_proj_z = r.ReadMatrix(q + "in_proj_z.weight", c.value_dim(), H);
      g.in_proj_b = r.ReadMatrix(q + "in_proj_b.weight", Hv, H);
      g.in_proj_a = r.ReadMatrix(q + "in_proj_a.weight", Hv, H);
      g.conv1d = r.ReadVector(q + "conv1d.weight", {c.conv_dim(), 1, c.linear_conv_kernel_dim});
      g.dt_bias = r.ReadVector(q + "dt_bias", {Hv});
      g.A_log = r.ReadVector(q + "A_log", {Hv});
      g.norm = r.ReadVector(q + "norm.weight", {c.linear_value_head_dim});
      g.out_proj = r.ReadMatrix(q + "out_proj.weight", H, c.value_dim());
    } else {
      const int64_t nH = c.num_attention_heads, nKV = c.num_key_value_heads, D = c.head_dim;
      AttentionWeights& a = l.self_attn;
      const std::string q = p + "self_attn.";
      a.q_proj = r.ReadMatrix(q + "q_proj.weight", 2 * nH * D, H);
      a.k_proj = r.ReadMatrix(q + "k_proj.weight", nKV * D, H);
      a.v_proj = r.ReadMatrix(q + "v_proj.weight", nKV * D, H);
      a.o_proj = r.ReadMatrix(q + "o_proj.weight", H, nH * D);
      a.q_norm = r.ReadVector(q + "q_norm.weight", {D});
      a.k_norm = r.ReadVector(q + "k_norm.weight", {D});
    }
    w->layers.push_back(std::move(l));
  }
  weights_ = std::move(w);
}

Qwen35Reference::~Qwen35Reference() = default;

const Qwen35Config& Qwen35Reference::config() const { return weights_->config; }

Vec Qwen35Reference::LinearAttention(int64_t layer, const Vec& xn,
                                     Qwen35ReferenceState::Layer& state,
                                     const Qwen35ReferenceVariant& variant) const {
  const Qwen35Config& c = weights_->config;
  if (c.layer_types.at(layer) != Qwen35LayerKind::kLinearAttention) {
    Refuse(absl::StrCat("layer ", layer, " is not a linear_attention layer"));
  }
  const GatedDeltaNetWeights& w = weights_->layers[layer].linear_attn;
  const int64_t Hk = c.linear_num_key_heads, Hv = c.linear_num_value_heads;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  const int64_t K = c.linear_conv_kernel_dim, conv_dim = c.conv_dim(), key_dim = c.key_dim();
  if (state.conv.empty()) state.conv.assign((K - 1) * conv_dim, 0.0);
  if (state.S.empty()) state.S.assign(Hv * dk * dv, 0.0);

  // 1. Four projections.
  const Vec qkv = Linear(w.in_proj_qkv, xn);  // (conv_dim): [q | k | v], raw
  const Vec z = Linear(w.in_proj_z, xn);      // (Hv, d_v)
  const Vec b = Linear(w.in_proj_b, xn);      // (Hv)
  const Vec a = Linear(w.in_proj_a, xn);      // (Hv)

  // 2. Causal depthwise conv over the K-1 raw rows kept and this one (the
  // last tap on this token), then SiLU; the state drops its oldest row and
  // keeps this raw one.
  Vec mixed(conv_dim);  // (conv_dim)
  for (int64_t ch = 0; ch < conv_dim; ++ch) {
    double sum = 0;
    for (int64_t j = 0; j < K - 1; ++j) sum += w.conv1d[ch * K + j] * state.conv[j * conv_dim + ch];
    sum += w.conv1d[ch * K + K - 1] * qkv[ch];
    mixed[ch] = Silu(sum);
  }
  if (K > 1) {
    state.conv.erase(state.conv.begin(), state.conv.begin() + conv_dim);
    state.conv.insert(state.conv.end(), qkv.begin(), qkv.end());
  }

  // 3, 5. Split [q | k | v] head-major; q and k L2-normalised per key head,
  // q scaled by 1/sqrt(d_k).
  std::vector<Vec> q(Hk), k(Hk);  // (Hk, d_k) each
  for (int64_t kh = 0; kh < Hk; ++kh) {
    q[kh] = L2Normalize(Slice(mixed, kh * dk, dk));
    for (double& e : q[kh]) e /= std::sqrt(static_cast<double>(dk));
    k[kh] = L2Normalize(Slice(mixed, key_dim + kh * dk, dk));
  }

  const int64_t group = Hv / Hk;  // value heads per key head
  Vec out(Hv * dv);               // (Hv, d_v)
  for (int64_t h = 0; h < Hv; ++h) {
    // 6. Value heads grouped over key heads (h / group), or tiled (P3).
    const int64_t kh = variant.value_heads_grouped ? h / group : h % Hk;
    const Vec v = Slice(mixed, 2 * key_dim + h * dv, dv);
    // 4. beta and the log-decay g <= 0.
    const double beta = Sigmoid(b[h]);
    const double g = -std::exp(w.A_log[h]) * Softplus(a[h] + w.dt_bias[h]);
    // 7. The recurrence.
    double* S = state.S.data() + h * dk * dv;  // (d_k, d_v)
    const Vec o = DeltaRuleStep(S, q[kh], k[kh], v, g, beta);
    if (variant.state_bfloat16) {
      for (int64_t i = 0; i < dk * dv; ++i) S[i] = RoundToBfloat16(S[i]);
    }
    // 8. Gated RMSNorm per head: w, not 1 + w; then SiLU(z).
    const Vec on = Qwen35ReferenceRmsNorm(o, w.norm, c.rms_norm_eps, /*plus_one=*/false);
    for (int64_t j = 0; j < dv; ++j) out[h * dv + j] = on[j] * Silu(z[h * dv + j]);
  }
  return Linear(w.out_proj, out);
}

Vec Qwen35Reference::FullAttention(int64_t layer, const Vec& xn, int64_t position,
                                   Qwen35ReferenceState::Layer& state,
                                   const Qwen35ReferenceVariant& variant) const {
  const Qwen35Config& c = weights_->config;
  if (c.layer_types.at(layer) != Qwen35LayerKind::kFullAttention) {
    Refuse(absl::StrCat("layer ", layer, " is not a full_attention layer"));
  }
  const AttentionWeights& w = weights_->layers[layer].self_attn;
  const int64_t nH = c.num_attention_heads, nKV = c.num_key_value_heads, D = c.head_dim;
  const int64_t rotary_dim = variant.rope_first_quarter ? weights_->rotary_dim : D;
  const double eps = c.rms_norm_eps;

  const Vec qg = Linear(w.q_proj, xn);    // (nH, 2 D): [q_h | gate_h] per head
  const Vec keys = Linear(w.k_proj, xn);  // (nKV, D)
  const Vec vals = Linear(w.v_proj, xn);  // (nKV, D)

  // Keys: k_norm, then RoPE at this position; into the cache with the values.
  for (int64_t j = 0; j < nKV; ++j) {
    Vec k = Qwen35ReferenceRmsNorm(Slice(keys, j * D, D), w.k_norm, eps, variant.norm_plus_one);
    Qwen35ReferenceRope(k, position, rotary_dim, c.rope_theta);
    state.k.insert(state.k.end(), k.begin(), k.end());
    state.v.insert(state.v.end(), vals.begin() + j * D, vals.begin() + (j + 1) * D);
  }
  const int64_t T = static_cast<int64_t>(state.k.size()) / (nKV * D);  // tokens cached

  const int64_t group = nH / nKV;  // query heads per kv head, consecutive
  Vec out(nH * D, 0.0);            // (nH, D)
  for (int64_t h = 0; h < nH; ++h) {
    // Query and gate interleaved per head, or split [all q | all gates] (P4).
    const int64_t q_begin = variant.gate_interleaved ? h * 2 * D : h * D;
    const int64_t gate_begin = variant.gate_interleaved ? h * 2 * D + D : nH * D + h * D;
    Vec q = Qwen35ReferenceRmsNorm(Slice(qg, q_begin, D), w.q_norm, eps, variant.norm_plus_one);
    Qwen35ReferenceRope(q, position, rotary_dim, c.rope_theta);
    const int64_t j = h / group;  // this head's kv head
    // Causal softmax over every cached token, scale 1/sqrt(D).
    Vec p(T);
    double max_score = -INFINITY;
    for (int64_t t = 0; t < T; ++t) {
      double dot = 0;
      for (int64_t i = 0; i < D; ++i) dot += q[i] * state.k[(t * nKV + j) * D + i];
      p[t] = dot / std::sqrt(static_cast<double>(D));
      max_score = std::max(max_score, p[t]);
    }
    double total = 0;
    for (double& e : p) total += (e = std::exp(e - max_score));
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < D; ++i)
        out[h * D + i] += p[t] / total * state.v[(t * nKV + j) * D + i];
    }
    // The sigmoid output gate, before o_proj.
    for (int64_t i = 0; i < D; ++i) out[h * D + i] *= Sigmoid(qg[gate_begin + i]);
  }
  return Linear(w.o_proj, out);
}

std::vector<Vec> Qwen35Reference::Forward(const std::vector<int64_t>& tokens,
                                          Qwen35ReferenceState& state,
                                          const Qwen35ReferenceVariant& variant) const {
  const Weights& w = *weights_;
  const Qwen35Config& c = w.config;
  const int64_t H = c.hidden_size;
  if (state.layers.empty()) {
    state.layers.resize(c.num_hidden_layers);
    state.position = 0;
  } else if (static_cast<int64_t>(state.layers.size()) != c.num_hidden_layers) {
    Refuse(absl::StrCat("a state of ", state.layers.size(), " layers for ", c.num_hidden_layers));
  }
  auto norm = [&](const Vec& x, const Vec& weight) {
    return Qwen35ReferenceRmsNorm(x, weight, c.rms_norm_eps, variant.norm_plus_one);
  };
  std::vector<Vec> logits;
  for (int64_t token : tokens) {
    if (token < 0 || token >= c.vocab_size) Refuse(absl::StrCat("token ", token, " out of range"));
    Vec x = w.embed_tokens.Row(token);  // (H), no scaling
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const LayerWeights& l = w.layers[i];
      const Vec xn = norm(x, l.input_layernorm);
      const Vec mixed = c.layer_types[i] == Qwen35LayerKind::kLinearAttention
                            ? LinearAttention(i, xn, state.layers[i], variant)
                            : FullAttention(i, xn, state.position, state.layers[i], variant);
      for (int64_t e = 0; e < H; ++e) x[e] += mixed[e];
      // SwiGLU MLP: down(silu(gate(x)) * up(x)).
      const Vec hn = norm(x, l.post_attention_layernorm);
      Vec act = Linear(l.gate_proj, hn);
      const Vec up = Linear(l.up_proj, hn);
      for (size_t e = 0; e < act.size(); ++e) act[e] = Silu(act[e]) * up[e];
      const Vec mlp = Linear(l.down_proj, act);
      for (int64_t e = 0; e < H; ++e) x[e] += mlp[e];
    }
    logits.push_back(Linear(w.lm_head, norm(x, w.norm)));
    ++state.position;
  }
  return logits;
}

std::vector<Vec> Qwen35ReferenceForward(const Qwen35Config& config, const TensorMap& weights,
                                        const std::vector<int64_t>& tokens,
                                        Qwen35ReferenceState& state,
                                        const Qwen35ReferenceVariant& variant) {
  return Qwen35Reference(config, weights).Forward(tokens, state, variant);
}

Vec Qwen35ReferenceRmsNorm(const Vec& x, const Vec& w, double eps, bool plus_one) {
  double mean_square = 0;
  for (double e : x) mean_square += e * e;
  mean_square /= static_cast<double>(x.size());
  const double scale = 1.0 / std::sqrt(mean_square + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * (plus_one ? 1.0 + w[i] : w[i]);
  return y;
}

void Qwen35ReferenceRope(Vec& head, int64_t position, int64_t rotary_dim, double theta) {
  const int64_t half = rotary_dim / 2;
  for (int64_t j = 0; j < half; ++j) {
    const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(j) / rotary_dim);
    const double angle = static_cast<double>(position) * inv_freq;
    const double cos = std::cos(angle), sin = std::sin(angle);
    // x * cos + rotate_half(x) * sin, rotate_half(u) = [-u2 | u1].
    const double x1 = head[j], x2 = head[j + half];
    head[j] = x1 * cos - x2 * sin;
    head[j + half] = x2 * cos + x1 * sin;
  }
}

}  // namespace linserve

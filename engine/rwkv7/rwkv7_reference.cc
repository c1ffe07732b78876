#include "engine/rwkv7/rwkv7_reference.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <torch/types.h>

#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

using Vec = std::vector<double>;

// One weight as float64, row-major.
struct Param {
  int64_t rows = 1;
  int64_t cols = 0;
  Vec data;
  double operator[](int64_t i) const { return data[i]; }
};

class Params {
 public:
  explicit Params(const TensorMap& weights) {
    for (const auto& [name, tensor] : weights) {
      torch::Tensor t = tensor.to(torch::kFloat64).contiguous();
      Param p;
      p.cols = t.size(-1);
      p.rows = t.numel() / std::max<int64_t>(p.cols, 1);
      p.data.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
      params_.emplace(name, std::move(p));
    }
  }
  const Param& operator()(const std::string& name) const { return params_.at(name); }

 private:
  std::map<std::string, Param> params_;
};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// W x for W (out, in), the `*.weight` matrices.
Vec Linear(const Param& w, const Vec& x) {
  Vec y(w.rows, 0.0);
  for (int64_t i = 0; i < w.rows; ++i) {
    for (int64_t j = 0; j < w.cols; ++j) y[i] += w[i * w.cols + j] * x[j];
  }
  return y;
}

// x M for M (in, out), the low-rank matrices.
Vec Times(const Vec& x, const Param& m) {
  Vec y(m.cols, 0.0);
  for (int64_t i = 0; i < m.rows; ++i) {
    for (int64_t j = 0; j < m.cols; ++j) y[j] += x[i] * m[i * m.cols + j];
  }
  return y;
}

// Normalises x[begin, end) over itself: LayerNorm for the whole vector,
// GroupNorm for one head's slice.
void Normalize(Vec& x, int64_t begin, int64_t end, const Param& weight, const Param& bias,
               double eps) {
  double mean = 0, var = 0;
  for (int64_t i = begin; i < end; ++i) mean += x[i];
  mean /= static_cast<double>(end - begin);
  for (int64_t i = begin; i < end; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(end - begin);
  for (int64_t i = begin; i < end; ++i) {
    x[i] = (x[i] - mean) / std::sqrt(var + eps) * weight[i] + bias[i];
  }
}

Vec LayerNorm(Vec x, const Params& p, const std::string& name) {
  Normalize(x, 0, static_cast<int64_t>(x.size()), p(name + ".weight"), p(name + ".bias"), 1e-5);
  return x;
}

struct LayerState {
  Vec att_prev, ffn_prev;  // the previous token's LayerNorm output, per mixing
  std::vector<Vec> S;      // per head, N x N, S[i * N + j]: row i by value, column j by key
};

// Time mixing of one token: the README's recurrence, step by step.
Vec TimeMix(const Params& p, const std::string& b, const Rwkv7Config& c, int64_t layer,
            const Vec& x, Vec& v_first, LayerState& s) {
  const int64_t C = c.d_model, N = c.head_size;
  auto mix = [&](const char* name) {
    const Param& mu = p(b + name);
    Vec m(C);
    for (int64_t i = 0; i < C; ++i) m[i] = x[i] + mu[i] * (s.att_prev[i] - x[i]);
    return m;
  };
  const Vec xr = mix("x_r"), xw = mix("x_w"), xk = mix("x_k"), xv = mix("x_v"), xa = mix("x_a"),
            xg = mix("x_g");
  const Vec r = Linear(p(b + "receptance.weight"), xr);
  Vec k = Linear(p(b + "key.weight"), xk);
  Vec v = Linear(p(b + "value.weight"), xv);
  Vec w_hidden = Times(xw, p(b + "w1"));
  for (double& e : w_hidden) e = std::tanh(e);
  const Vec w_lora = Times(w_hidden, p(b + "w2"));
  const Vec a_lora = Times(Times(xa, p(b + "a1")), p(b + "a2"));
  Vec g_hidden = Times(xg, p(b + "g1"));
  for (double& e : g_hidden) e = Sigmoid(e);
  const Vec g = Times(g_hidden, p(b + "g2"));
  const Param &w0 = p(b + "w0"), &a0 = p(b + "a0"), &k_k = p(b + "k_k"), &k_a = p(b + "k_a");
  Vec w(C), a(C), kk(C);
  for (int64_t i = 0; i < C; ++i) {
    w[i] = std::exp(-std::exp(-0.5) * Sigmoid(w0[i] + w_lora[i]));
    a[i] = Sigmoid(a0[i] + a_lora[i]);
  }
  if (layer == 0) {
    v_first = v;
  } else {
    const Vec v_lora = Times(Times(xv, p(b + "v1")), p(b + "v2"));
    const Param& v0 = p(b + "v0");
    for (int64_t i = 0; i < C; ++i) v[i] += (v_first[i] - v[i]) * Sigmoid(v0[i] + v_lora[i]);
  }
  for (int64_t i = 0; i < C; ++i) {
    kk[i] = k[i] * k_k[i];
    k[i] = k[i] * (1 + (a[i] - 1) * k_a[i]);
  }
  const Param& r_k = p(b + "r_k");
  Vec y(C, 0.0);
  for (int64_t h = 0; h < c.n_heads; ++h) {
    const int64_t o = h * N;  // this head's channels are o .. o + N - 1
    double norm = 0;
    for (int64_t j = 0; j < N; ++j) norm += kk[o + j] * kk[o + j];
    norm = std::max(std::sqrt(norm), 1e-12);
    for (int64_t j = 0; j < N; ++j) kk[o + j] /= norm;
    Vec& S = s.S[h];
    Vec S_kk(N, 0.0);  // S kk with the previous S
    for (int64_t i = 0; i < N; ++i) {
      for (int64_t j = 0; j < N; ++j) S_kk[i] += S[i * N + j] * kk[o + j];
    }
    for (int64_t i = 0; i < N; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        S[i * N + j] = S[i * N + j] * w[o + j] - S_kk[i] * kk[o + j] * a[o + j] +
                       v[o + i] * k[o + j];
      }
    }
    for (int64_t i = 0; i < N; ++i) {
      for (int64_t j = 0; j < N; ++j) y[o + i] += S[i * N + j] * r[o + j];
    }
    Normalize(y, o, o + N, p(b + "ln_x.weight"), p(b + "ln_x.bias"), 64e-5);
    double bonus = 0;
    for (int64_t j = 0; j < N; ++j) bonus += r[o + j] * k[o + j] * r_k[o + j];
    for (int64_t i = 0; i < N; ++i) y[o + i] += bonus * v[o + i];
  }
  for (int64_t i = 0; i < C; ++i) y[i] *= g[i];
  s.att_prev = x;
  return Linear(p(b + "output.weight"), y);
}

Vec ChannelMix(const Params& p, const std::string& b, const Vec& x, LayerState& s) {
  const Param& mu = p(b + "x_k");
  Vec xk(x.size());
  for (size_t i = 0; i < x.size(); ++i) xk[i] = x[i] + mu[i] * (s.ffn_prev[i] - x[i]);
  Vec k = Linear(p(b + "key.weight"), xk);
  for (double& e : k) e = std::max(e, 0.0) * std::max(e, 0.0);
  s.ffn_prev = x;
  return Linear(p(b + "value.weight"), k);
}

}  // namespace

std::vector<std::vector<double>> Rwkv7ReferenceLogits(const Rwkv7Checkpoint& checkpoint,
                                                      absl::Span<const int64_t> tokens) {
  const Rwkv7Config& c = checkpoint.config;
  return Rwkv7ReferenceLogits(
      checkpoint, tokens,
      std::vector<std::vector<double>>(c.n_layers,
                                       std::vector<double>(c.n_heads * c.head_size * c.head_size)));
}

std::vector<std::vector<double>> Rwkv7ReferenceLogits(
    const Rwkv7Checkpoint& checkpoint, absl::Span<const int64_t> tokens,
    const std::vector<std::vector<double>>& initial_wkv) {
  const Rwkv7Config& c = checkpoint.config;
  const Params p(checkpoint.weights);
  std::vector<LayerState> state(c.n_layers);
  const int64_t matrix = c.head_size * c.head_size;
  for (int64_t layer = 0; layer < c.n_layers; ++layer) {
    LayerState& s = state[layer];
    s.att_prev.assign(c.d_model, 0.0);
    s.ffn_prev.assign(c.d_model, 0.0);
    const std::vector<double>& wkv = initial_wkv.at(layer);
    for (int64_t h = 0; h < c.n_heads; ++h) {
      s.S.emplace_back(wkv.begin() + h * matrix, wkv.begin() + (h + 1) * matrix);
    }
  }
  std::vector<std::vector<double>> logits;
  for (int64_t token : tokens) {
    const Param& emb = p("emb.weight");
    Vec x(emb.data.begin() + token * c.d_model, emb.data.begin() + (token + 1) * c.d_model);
    if (c.pre_norm) x = LayerNorm(x, p, "blocks.0.ln0");
    Vec v_first;
    for (int64_t layer = 0; layer < c.n_layers; ++layer) {
      const std::string b = absl::StrCat("blocks.", layer, ".");
      const Vec att = TimeMix(p, b + "att.", c, layer, LayerNorm(x, p, b + "ln1"), v_first,
                              state[layer]);
      for (int64_t i = 0; i < c.d_model; ++i) x[i] += att[i];
      const Vec ffn = ChannelMix(p, b + "ffn.", LayerNorm(x, p, b + "ln2"), state[layer]);
      for (int64_t i = 0; i < c.d_model; ++i) x[i] += ffn[i];
    }
    logits.push_back(Linear(p("head.weight"), LayerNorm(x, p, "ln_out")));
  }
  return logits;
}

}  // namespace linserve

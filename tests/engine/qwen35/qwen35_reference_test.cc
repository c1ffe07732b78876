// Qwen3.5's float64 reference (engine/qwen35/qwen35_reference.h) on a tiny
// random model: its pieces against their closed forms, pieces = whole, and
// each deliberate deviation (SPEC.md section 6's pitfalls) changing the
// logits, so that the fast model's pitfall tests can bite.

#include "engine/qwen35/qwen35_reference.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/formats/safetensors.h"
#include "engine/qwen35/qwen35_config.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

using Vec = std::vector<double>;
constexpr auto kLinear = Qwen35LayerKind::kLinearAttention;
constexpr auto kFull = Qwen35LayerKind::kFullAttention;

// The tiny shape, built by hand: 4 layers (three GDN, one attention), H 64,
// value heads grouped over key heads (Hk 2, Hv 4), GQA (nH 4, nKV 2), D 32
// (8 rotary dims), d 16, V 512.
Qwen35Config TinyConfig() {
  Qwen35Config c;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.vocab_size = 512;
  c.num_hidden_layers = 4;
  c.layer_types = {kLinear, kLinear, kLinear, kFull};
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 32;
  c.rope_theta = 1e7;
  c.partial_rotary_factor = 0.25;
  c.linear_num_key_heads = 2;
  c.linear_num_value_heads = 4;
  c.linear_key_head_dim = 16;
  c.linear_value_head_dim = 16;
  c.linear_conv_kernel_dim = 4;
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = true;
  return c;
}

// Random weights of `c`'s shape in `dtype`, scaled as a trained model's
// roughly are: matrices 1/sqrt(in), zero-centred norms near 0, the gated
// norm near 1, A_log as Hugging Face initialises it.
TensorMap RandomWeights(const Qwen35Config& c, uint64_t seed,
                        torch::ScalarType dtype = torch::kFloat64) {
  torch::manual_seed(seed);
  const auto f64 = torch::kFloat64;
  auto randn = [&](std::vector<int64_t> shape, double scale) {
    return (torch::randn(shape, f64) * scale).to(dtype);  // one float64 tensor at a time
  };
  auto matrix = [&](int64_t rows, int64_t cols) {
    return randn({rows, cols}, 1.0 / std::sqrt(static_cast<double>(cols)));
  };
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  TensorMap w;
  w["embed_tokens.weight"] = randn({c.vocab_size, H}, 1.0);
  w["norm.weight"] = randn({H}, 0.1);
  if (!c.tie_word_embeddings) w["lm_head.weight"] = matrix(c.vocab_size, H);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = absl::StrCat("layers.", i, ".");
    w[p + "input_layernorm.weight"] = randn({H}, 0.1);
    w[p + "post_attention_layernorm.weight"] = randn({H}, 0.1);
    w[p + "mlp.gate_proj.weight"] = matrix(I, H);
    w[p + "mlp.up_proj.weight"] = matrix(I, H);
    w[p + "mlp.down_proj.weight"] = matrix(H, I);
    if (c.layer_types[i] == kLinear) {
      const int64_t Hv = c.linear_num_value_heads;
      w[p + "linear_attn.in_proj_qkv.weight"] = matrix(c.conv_dim(), H);
      w[p + "linear_attn.in_proj_z.weight"] = matrix(c.value_dim(), H);
      w[p + "linear_attn.in_proj_b.weight"] = matrix(Hv, H);
      w[p + "linear_attn.in_proj_a.weight"] = matrix(Hv, H);
      w[p + "linear_attn.conv1d.weight"] = randn({c.conv_dim(), 1, c.linear_conv_kernel_dim}, 0.5);
      w[p + "linear_attn.dt_bias"] = randn({Hv}, 0.5) + 1.0;
      w[p + "linear_attn.A_log"] = torch::empty({Hv}, f64).uniform_(0.01, 16).log();
      w[p + "linear_attn.norm.weight"] = randn({c.linear_value_head_dim}, 0.1) + 1.0;
      w[p + "linear_attn.out_proj.weight"] = matrix(H, c.value_dim());
    } else {
      const int64_t nH = c.num_attention_heads, nKV = c.num_key_value_heads, D = c.head_dim;
      w[p + "self_attn.q_proj.weight"] = matrix(2 * nH * D, H);
      w[p + "self_attn.k_proj.weight"] = matrix(nKV * D, H);
      w[p + "self_attn.v_proj.weight"] = matrix(nKV * D, H);
      w[p + "self_attn.o_proj.weight"] = matrix(H, nH * D);
      w[p + "self_attn.q_norm.weight"] = randn({D}, 0.1);
      w[p + "self_attn.k_norm.weight"] = randn({D}, 0.1);
    }
  }
  for (auto& [name, t] : w) t = t.to(dtype);
  return w;
}

std::vector<int64_t> RandomTokens(int64_t n, int64_t vocab, uint64_t seed) {
  torch::manual_seed(seed);
  const torch::Tensor t = torch::randint(vocab, {n}, torch::kInt64);
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n);
}

torch::Tensor T(const Vec& v) { return torch::tensor(v, torch::kFloat64); }
Vec V(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kFloat64).contiguous();
  return Vec(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}
double MaxAbsDiff(const Vec& a, const Vec& b) { return (T(a) - T(b)).abs().max().item<double>(); }
double MaxAbsDiff(const std::vector<Vec>& a, const std::vector<Vec>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, MaxAbsDiff(a[i], b[i]));
  return m;
}

class Qwen35ReferenceTest : public ::testing::Test {
 protected:
  Qwen35ReferenceTest()
      : config_(TinyConfig()), weights_(RandomWeights(config_, 1)), model_(config_, weights_) {}
  torch::Tensor W(const std::string& name) const { return weights_.at(name); }

  Qwen35Config config_;
  TensorMap weights_;
  Qwen35Reference model_;
};

TEST(Qwen35ReferencePieces, RmsNormIsItsDefinition) {
  // mean square of {3, 4} is 12.5.
  const double rms = std::sqrt(12.5 + 1e-6);
  const Vec y = Qwen35ReferenceRmsNorm({3, 4}, {0.5, -0.5}, 1e-6);
  EXPECT_DOUBLE_EQ(y[0], 3 / rms * 1.5);
  EXPECT_DOUBLE_EQ(y[1], 4 / rms * 0.5);
  const Vec plain = Qwen35ReferenceRmsNorm({3, 4}, {0.5, -0.5}, 1e-6, /*plus_one=*/false);
  EXPECT_DOUBLE_EQ(plain[0], 3 / rms * 0.5);
  EXPECT_DOUBLE_EQ(plain[1], 4 / rms * -0.5);
  // eps inside the root: a zero vector stays zero, a tiny one is not blown up.
  EXPECT_EQ(Qwen35ReferenceRmsNorm({0, 0}, {0, 0}, 1e-6), (Vec{0, 0}));
  EXPECT_LT(std::abs(Qwen35ReferenceRmsNorm({1e-9, 0}, {0, 0}, 1e-6)[0]), 1e-5);
}

TEST(Qwen35ReferencePieces, RopeAtPositionZeroIsTheIdentity) {
  const Vec x = V(torch::randn({32}, torch::kFloat64));
  Vec y = x;
  Qwen35ReferenceRope(y, 0, 8, 1e7);
  EXPECT_EQ(y, x);
}

TEST(Qwen35ReferencePieces, RopeRotatesPairsHalfApartAndPreservesNorms) {
  const Vec x = V(torch::randn({32}, torch::kFloat64));
  Vec y = x;
  Qwen35ReferenceRope(y, 17, 8, 1e7);
  // Dims past the rotary ones pass through; each pair (j, j + 4) keeps its length.
  for (int i = 8; i < 32; ++i) EXPECT_EQ(y[i], x[i]) << i;
  for (int j = 0; j < 4; ++j) {
    EXPECT_NEAR(std::hypot(y[j], y[j + 4]), std::hypot(x[j], x[j + 4]), 1e-12) << j;
  }
  // The first pair turns by position * theta^0 = 17 radians, NEOX style.
  EXPECT_NEAR(y[0], x[0] * std::cos(17.0) - x[4] * std::sin(17.0), 1e-12);
  EXPECT_NEAR(y[4], x[4] * std::cos(17.0) + x[0] * std::sin(17.0), 1e-12);
  // The last pair by 17 * theta^(-2*3/8).
  const double angle = 17.0 * std::pow(1e7, -6.0 / 8.0);
  EXPECT_NEAR(y[3], x[3] * std::cos(angle) - x[7] * std::sin(angle), 1e-12);
}

// One GDN step from the zero state in closed form: the conv sees only its
// last tap, and with S = 0, S = beta k^T v and o = beta (q.k) v.
TEST_F(Qwen35ReferenceTest, GdnStepFromZeroStateIsItsClosedForm) {
  const Qwen35Config& c = config_;
  const int64_t Hk = 2, Hv = 4, d = 16, K = 4, key_dim = Hk * d;
  const torch::Tensor xn = torch::randn({c.hidden_size}, torch::kFloat64);
  const std::string p = "layers.0.linear_attn.";
  const torch::Tensor qkv = W(p + "in_proj_qkv.weight").mv(xn);
  const torch::Tensor mixed =
      torch::silu(W(p + "conv1d.weight").select(1, 0).select(1, K - 1) * qkv);
  const torch::Tensor q = mixed.slice(0, 0, key_dim).view({Hk, d});
  const torch::Tensor k = mixed.slice(0, key_dim, 2 * key_dim).view({Hk, d});
  const torch::Tensor v = mixed.slice(0, 2 * key_dim).view({Hv, d});
  auto l2 = [](const torch::Tensor& x) { return x / (x * x).sum(-1, true).add(1e-6).sqrt(); };
  const torch::Tensor qn = l2(q) / std::sqrt(static_cast<double>(d)), kn = l2(k);
  const torch::Tensor beta = torch::sigmoid(W(p + "in_proj_b.weight").mv(xn));
  const torch::Tensor z = W(p + "in_proj_z.weight").mv(xn).view({Hv, d});
  std::vector<torch::Tensor> heads, states;
  for (int64_t h = 0; h < Hv; ++h) {
    const int64_t kh = h / (Hv / Hk);
    const torch::Tensor o = beta[h] * qn[kh].dot(kn[kh]) * v[h];
    states.push_back(beta[h] * torch::outer(kn[kh], v[h]));
    const torch::Tensor on = o / (o * o).mean().add(c.rms_norm_eps).sqrt();
    heads.push_back(on * W(p + "norm.weight") * torch::silu(z[h]));
  }
  const torch::Tensor expected = W(p + "out_proj.weight").mv(torch::cat(heads));

  Qwen35ReferenceState::Layer state;
  const Vec got = model_.LinearAttention(0, V(xn), state);
  EXPECT_LT(MaxAbsDiff(got, V(expected)), 1e-12);
  EXPECT_LT(MaxAbsDiff(state.S, V(torch::stack(states))), 1e-14);
  // The conv state: two zero rows, then this token's raw projection.
  const Vec want_conv = V(torch::cat({torch::zeros({2 * c.conv_dim()}, torch::kFloat64), qkv}));
  EXPECT_LT(MaxAbsDiff(state.conv, want_conv), 1e-14);
}

// From a non-zero state: decay first, the delta rule on the decayed S, the
// output read from the updated S (SPEC.md 3b.7), in matrix form.
TEST_F(Qwen35ReferenceTest, GdnStepFromAStateDecaysFirst) {
  const Qwen35Config& c = config_;
  const int64_t Hk = 2, Hv = 4, d = 16, K = 4, key_dim = Hk * d;
  const torch::Tensor xn = torch::randn({c.hidden_size}, torch::kFloat64);
  const torch::Tensor S0 = torch::randn({Hv, d, d}, torch::kFloat64);
  const torch::Tensor conv0 = torch::randn({K - 1, c.conv_dim()}, torch::kFloat64);
  const std::string p = "layers.1.linear_attn.";
  const torch::Tensor qkv = W(p + "in_proj_qkv.weight").mv(xn);
  const torch::Tensor taps = W(p + "conv1d.weight").select(1, 0);      // (conv_dim, K)
  const torch::Tensor window = torch::cat({conv0, qkv.unsqueeze(0)});  // (K, conv_dim)
  const torch::Tensor mixed = torch::silu((taps.t() * window).sum(0));
  auto l2 = [](const torch::Tensor& x) { return x / (x * x).sum(-1, true).add(1e-6).sqrt(); };
  const torch::Tensor qn = l2(mixed.slice(0, 0, key_dim).view({Hk, d})) / 4.0;
  const torch::Tensor kn = l2(mixed.slice(0, key_dim, 2 * key_dim).view({Hk, d}));
  const torch::Tensor v = mixed.slice(0, 2 * key_dim).view({Hv, d});
  const torch::Tensor beta = torch::sigmoid(W(p + "in_proj_b.weight").mv(xn));
  const torch::Tensor g =
      -W(p + "A_log").exp() * torch::softplus(W(p + "in_proj_a.weight").mv(xn) + W(p + "dt_bias"));
  const torch::Tensor z = W(p + "in_proj_z.weight").mv(xn).view({Hv, d});
  std::vector<torch::Tensor> heads, states;
  for (int64_t h = 0; h < Hv; ++h) {
    const torch::Tensor k = kn[h / 2], q = qn[h / 2];
    const torch::Tensor decayed = S0[h] * g[h].exp();
    const torch::Tensor S = decayed + torch::outer(k, (v[h] - decayed.t().mv(k)) * beta[h]);
    states.push_back(S);
    const torch::Tensor o = S.t().mv(q);
    heads.push_back(o / (o * o).mean().add(1e-6).sqrt() * W(p + "norm.weight") * torch::silu(z[h]));
  }
  const torch::Tensor expected = W(p + "out_proj.weight").mv(torch::cat(heads));

  Qwen35ReferenceState::Layer state;
  state.S = V(S0);
  state.conv = V(conv0);
  const Vec got = model_.LinearAttention(1, V(xn), state);
  EXPECT_LT(MaxAbsDiff(got, V(expected)), 1e-12);
  EXPECT_LT(MaxAbsDiff(state.S, V(torch::stack(states))), 1e-12);
  EXPECT_LT(MaxAbsDiff(state.conv, V(window.slice(0, 1).flatten())), 1e-14);
}

// Attention over one token: the softmax has one entry, so each query head
// returns its kv head's v, gated by sigmoid of its interleaved gate rows.
TEST_F(Qwen35ReferenceTest, AttentionOverOneTokenReturnsV) {
  const Qwen35Config& c = config_;
  const int64_t nH = 4, D = 32;
  const torch::Tensor xn = torch::randn({c.hidden_size}, torch::kFloat64);
  const std::string p = "layers.3.self_attn.";
  const torch::Tensor qg = W(p + "q_proj.weight").mv(xn).view({nH, 2 * D});
  const torch::Tensor v = W(p + "v_proj.weight").mv(xn).view({2, D});
  std::vector<torch::Tensor> heads;
  for (int64_t h = 0; h < nH; ++h) {
    heads.push_back(v[h / 2] * torch::sigmoid(qg[h].slice(0, D)));
  }
  const torch::Tensor expected = W(p + "o_proj.weight").mv(torch::cat(heads));
  for (int64_t position : {0, 5}) {
    Qwen35ReferenceState::Layer state;
    const Vec got = model_.FullAttention(3, V(xn), position, state);
    EXPECT_LT(MaxAbsDiff(got, V(expected)), 1e-12) << position;
    EXPECT_LT(MaxAbsDiff(state.v, V(v.flatten())), 1e-14) << position;
    if (position == 0) {  // RoPE at 0 is the identity: the cache holds k after its norm.
      const torch::Tensor k = W(p + "k_proj.weight").mv(xn).view({2, D});
      const torch::Tensor kn =
          k / (k * k).mean(-1, true).add(1e-6).sqrt() * (1 + W(p + "k_norm.weight"));
      EXPECT_LT(MaxAbsDiff(state.k, V(kn.flatten())), 1e-14);
    }
  }
}

// Two tokens over two: the second query attends to both keys with the
// softmax of their scaled dot products (checked on the cache it leaves).
TEST_F(Qwen35ReferenceTest, AttentionOverTwoTokensIsTheSoftmaxOfTheCache) {
  const int64_t nH = 4, D = 32;
  const std::string p = "layers.3.self_attn.";
  const torch::Tensor x0 = torch::randn({64}, torch::kFloat64),
                      x1 = torch::randn({64}, torch::kFloat64);
  Qwen35ReferenceState::Layer state;
  model_.FullAttention(3, V(x0), 0, state);
  const Vec got = model_.FullAttention(3, V(x1), 1, state);
  const torch::Tensor keys = T(state.k).view({2, 2, D}), values = T(state.v).view({2, 2, D});
  const torch::Tensor qg = W(p + "q_proj.weight").mv(x1).view({nH, 2 * D});
  std::vector<torch::Tensor> heads;
  for (int64_t h = 0; h < nH; ++h) {
    const torch::Tensor q = qg[h].slice(0, 0, D);
    Vec qr = V(q / (q * q).mean().add(1e-6).sqrt() * (1 + W(p + "q_norm.weight")));
    Qwen35ReferenceRope(qr, 1, 8, 1e7);
    const torch::Tensor scores = keys.select(1, h / 2).mv(T(qr)) / std::sqrt(32.0);
    const torch::Tensor out = torch::softmax(scores, 0).matmul(values.select(1, h / 2));
    heads.push_back(out * torch::sigmoid(qg[h].slice(0, D)));
  }
  EXPECT_LT(MaxAbsDiff(got, V(W(p + "o_proj.weight").mv(torch::cat(heads)))), 1e-12);
}

// Pieces = whole: any cut of a prompt, fed from the carried state, gives
// exactly the logits of one call.
TEST_F(Qwen35ReferenceTest, PiecesEqualWhole) {
  const std::vector<int64_t> tokens = RandomTokens(64, config_.vocab_size, 7);
  Qwen35ReferenceState whole_state;
  const std::vector<Vec> whole = model_.Forward(tokens, whole_state);
  ASSERT_EQ(whole.size(), 64u);
  ASSERT_EQ(whole[0].size(), 512u);
  for (int64_t cut : {1, 3, 4, 17, 63}) {
    Qwen35ReferenceState state;
    std::vector<Vec> pieces =
        model_.Forward(std::vector<int64_t>(tokens.begin(), tokens.begin() + cut), state);
    const std::vector<Vec> rest =
        model_.Forward(std::vector<int64_t>(tokens.begin() + cut, tokens.end()), state);
    pieces.insert(pieces.end(), rest.begin(), rest.end());
    EXPECT_EQ(pieces, whole) << "cut at " << cut;
    EXPECT_EQ(state.position, 64);
    EXPECT_EQ(state.layers[0].S, whole_state.layers[0].S) << "cut at " << cut;
    EXPECT_EQ(state.layers[3].k, whole_state.layers[3].k) << "cut at " << cut;
  }
  // The one-call function reads the weights itself and agrees.
  Qwen35ReferenceState state;
  EXPECT_EQ(Qwen35ReferenceForward(config_, weights_, tokens, state), whole);
}

// The state's shapes are Hugging Face's.
TEST_F(Qwen35ReferenceTest, StateHasTheDocumentedShapes) {
  Qwen35ReferenceState state;
  model_.Forward({1, 2, 3, 4, 5}, state);
  ASSERT_EQ(state.layers.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(state.layers[i].conv.size(), 3u * config_.conv_dim());
    EXPECT_EQ(state.layers[i].S.size(), 4u * 16 * 16);
    EXPECT_TRUE(state.layers[i].k.empty());
  }
  EXPECT_EQ(state.layers[3].k.size(), 5u * 2 * 32);
  EXPECT_EQ(state.layers[3].v.size(), 5u * 2 * 32);
  EXPECT_TRUE(state.layers[3].S.empty());
}

// Each deliberate deviation changes the logits over a 64-token prompt by at
// least 1e-3 of the largest logit, ten times the float32 model's tolerance
// (1e-4 relative), so a fast model that made the same mistake would fail
// its comparison.
TEST_F(Qwen35ReferenceTest, EachVariantChangesTheLogits) {
  const std::vector<int64_t> tokens = RandomTokens(64, config_.vocab_size, 11);
  Qwen35ReferenceState state;
  const std::vector<Vec> base = model_.Forward(tokens, state);
  std::vector<std::pair<const char*, Qwen35ReferenceVariant>> cases(5);
  cases[0].first = "norm w, not 1 + w";
  cases[0].second.norm_plus_one = false;
  cases[1].first = "q_proj split, not interleaved";
  cases[1].second.gate_interleaved = false;
  cases[2].first = "value heads tiled, not grouped";
  cases[2].second.value_heads_grouped = false;
  cases[3].first = "GDN state in bfloat16";
  cases[3].second.state_bfloat16 = true;
  cases[4].first = "RoPE over the whole head";
  cases[4].second.rope_first_quarter = false;
  for (const auto& [name, variant] : cases) {
    Qwen35ReferenceState s;
    const std::vector<Vec> logits = model_.Forward(tokens, s, variant);
    double relative = 0;  // max over tokens of max |change| / max |logit|
    for (size_t t = 0; t < base.size(); ++t) {
      relative = std::max(relative,
                          MaxAbsDiff(logits[t], base[t]) / T(base[t]).abs().max().item<double>());
    }
    std::printf("  %-32s max |logit change| %.3g, relative %.3g\n", name, MaxAbsDiff(logits, base),
                relative);
    EXPECT_GT(relative, 1e-3) << name;
  }
}

// A deviation that only shows after the first token shows nowhere before:
// RoPE and the state's precision do not touch token 0's logits.
TEST_F(Qwen35ReferenceTest, PositionalVariantsAgreeOnTheFirstToken) {
  const std::vector<int64_t> tokens = {5};
  Qwen35ReferenceState a, b, c;
  Qwen35ReferenceVariant whole_head, bf16;
  whole_head.rope_first_quarter = false;
  bf16.state_bfloat16 = true;
  const Vec base = model_.Forward(tokens, a)[0];
  EXPECT_EQ(model_.Forward(tokens, b, whole_head)[0], base);
  // bfloat16 rounding happens after the output is read, so token 0 is exact too.
  EXPECT_EQ(model_.Forward(tokens, c, bf16)[0], base);
}

// Any float dtype: a bfloat16 model gives the float64 logits of the same
// values (each read exactly, products in float64).
TEST_F(Qwen35ReferenceTest, ReadsAnyFloatDtypeExactly) {
  TensorMap bf16, f64_of_bf16, f16;
  for (const auto& [name, t] : weights_) {
    bf16[name] = t.to(torch::kBFloat16);
    f64_of_bf16[name] = bf16[name].to(torch::kFloat64);
    f16[name] = t.to(torch::kFloat16);
  }
  const std::vector<int64_t> tokens = RandomTokens(8, config_.vocab_size, 3);
  Qwen35ReferenceState a, b, c;
  const std::vector<Vec> from_bf16 = Qwen35ReferenceForward(config_, bf16, tokens, a);
  EXPECT_EQ(from_bf16, Qwen35ReferenceForward(config_, f64_of_bf16, tokens, b));
  const std::vector<Vec> from_f16 = Qwen35ReferenceForward(config_, f16, tokens, c);
  EXPECT_GT(MaxAbsDiff(from_f16, from_bf16), 0.0);
}

TEST_F(Qwen35ReferenceTest, UntiedHeadReadsLmHead) {
  Qwen35Config untied = config_;
  untied.tie_word_embeddings = false;
  TensorMap w = weights_;
  w["lm_head.weight"] = weights_.at("embed_tokens.weight").clone();
  const std::vector<int64_t> tokens = {1, 2, 3};
  Qwen35ReferenceState a, b, c;
  const std::vector<Vec> tied = model_.Forward(tokens, a);
  EXPECT_EQ(Qwen35ReferenceForward(untied, w, tokens, b), tied);
  w["lm_head.weight"] = weights_.at("embed_tokens.weight") * 2;
  const std::vector<Vec> doubled = Qwen35ReferenceForward(untied, w, tokens, c);
  EXPECT_NEAR(doubled[2][7], 2 * tied[2][7], 1e-9);
}

TEST_F(Qwen35ReferenceTest, RefusesAMissingOrMisshapenTensorByName) {
  TensorMap missing = weights_;
  missing.erase("layers.2.linear_attn.A_log");
  try {
    Qwen35Reference model(config_, missing);
    ADD_FAILURE() << "accepted a model without A_log";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("layers.2.linear_attn.A_log"), std::string::npos)
        << e.what();
  }
  TensorMap misshapen = weights_;
  misshapen["layers.3.self_attn.q_proj.weight"] = torch::zeros({128, 64}, torch::kFloat64);
  EXPECT_THROW({ Qwen35Reference model(config_, misshapen); }, std::invalid_argument);
  Qwen35ReferenceState state;
  EXPECT_THROW(model_.Forward({512}, state), std::invalid_argument);
}

// A pure-GDN configuration runs the same code path (no attention layer).
TEST(Qwen35ReferencePureGdn, RunsAndCarriesPositions) {
  Qwen35Config c = TinyConfig();
  c.layer_types = {kLinear, kLinear, kLinear, kLinear};
  const TensorMap w = RandomWeights(c, 5);
  const Qwen35Reference model(c, w);
  Qwen35ReferenceState state;
  const std::vector<Vec> logits = model.Forward({1, 2, 3}, state);
  EXPECT_EQ(logits.size(), 3u);
  EXPECT_EQ(state.position, 3);
  for (double e : logits[2]) ASSERT_TRUE(std::isfinite(e));
}

// The tiny model's 64 tokens run in well under a second (a loose bound on a
// shared machine; the time is printed).
TEST_F(Qwen35ReferenceTest, TinyModelIsQuick) {
  const std::vector<int64_t> tokens = RandomTokens(64, config_.vocab_size, 13);
  const auto start = std::chrono::steady_clock::now();
  Qwen35ReferenceState state;
  Qwen35ReferenceForward(config_, weights_, tokens, state);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  64 tokens of the tiny model: %.3f s\n", seconds);
  EXPECT_LT(seconds, 5.0);
}

// The 0.8B shape's time per token (SPEC.md section 1: H 1024, 24 layers,
// V 248,320), bfloat16 random weights. Slow and about 5 GB: run by hand with
// --gtest_also_run_disabled_tests.
TEST(Qwen35ReferenceTiming, DISABLED_ZeroPointEightBShape) {
  Qwen35Config c;
  c.hidden_size = 1024;
  c.intermediate_size = 3584;
  c.vocab_size = 248320;
  c.num_hidden_layers = 24;
  for (int i = 0; i < 24; ++i) c.layer_types.push_back((i + 1) % 4 == 0 ? kFull : kLinear);
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 256;
  c.linear_num_key_heads = 16;
  c.linear_num_value_heads = 16;
  c.linear_key_head_dim = 128;
  c.linear_value_head_dim = 128;
  const TensorMap w = RandomWeights(c, 1, torch::kBFloat16);
  auto start = std::chrono::steady_clock::now();
  const Qwen35Reference model(c, w);
  auto seconds = [&] {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - start).count();
    start = now;
    return s;
  };
  std::printf("  read the weights: %.2f s\n", seconds());
  Qwen35ReferenceState state;
  for (int64_t token : {1, 2, 3}) {
    const std::vector<Vec> logits = model.Forward({token}, state);
    std::printf("  token %lld: %.2f s\n", static_cast<long long>(token), seconds());
    for (double e : logits[0]) ASSERT_TRUE(std::isfinite(e));
  }
}

}  // namespace
}  // namespace linserve

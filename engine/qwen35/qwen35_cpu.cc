#include "engine/qwen35/qwen35_cpu.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include <torch/types.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/engine_threads.h"

namespace linserve {
namespace {

// One session's Gated DeltaNet through T tokens (see GatedDeltaNetCpu).
struct GdnSession {
  const float* qkv;     // (T, C)
  const float* z;       // (T, Hv dv)
  const float* b;       // (T, Hv)
  const float* a;       // (T, Hv)
  float* conv_state;    // (K-1, C)
  float* S;             // (Hv, dv, dk)
  float* out;           // (T, Hv dv)
};

struct GdnWeights {
  const float* conv;     // (C, K)
  const float* A_log;    // (Hv)
  const float* dt_bias;  // (Hv)
  const float* norm;     // (dv)
};

#define QWEN35_TARGET
#define QWEN35_FAMILY plain
#define QWEN35_WIDE 0
#include "engine/qwen35/qwen35_cpu_kernel.inc"
#undef QWEN35_TARGET
#undef QWEN35_FAMILY
#undef QWEN35_WIDE

#define QWEN35_TARGET __attribute__((target("avx512f,avx512dq,avx2,fma")))
#define QWEN35_FAMILY avx512
#define QWEN35_WIDE 1
#include "engine/qwen35/qwen35_cpu_kernel.inc"
#undef QWEN35_TARGET
#undef QWEN35_FAMILY
#undef QWEN35_WIDE

bool Wide() { return ActiveCpuHasAvx512(); }

const float* Data(const torch::Tensor& t) { return t.data_ptr<float>(); }

// float32 to bfloat16, rounded to nearest even (the values are finite).
uint16_t ToBfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// Writes a float32 row into a cache of float32 or bfloat16.
void Store(const float* row, int64_t n, float* cache) { std::memcpy(cache, row, n * sizeof(float)); }
void Store(const float* row, int64_t n, uint16_t* cache) {
  for (int64_t j = 0; j < n; ++j) cache[j] = ToBfloat16(row[j]);
}

void CheckFloat(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
              "Qwen3.5 CPU pass: '", name, "' must be a contiguous float32 CPU tensor, got ",
              t.scalar_type(), " ", t.sizes());
}

// cos and sin of position `position`'s angles for the first `rotary` dims:
// angle j = position theta^(-2j / rotary), j < rotary / 2, in float64.
void RopeAngles(int64_t position, const GatedAttentionDims& d, float* cosines, float* sines) {
  const int64_t half = d.rotary_dim / 2;
  for (int64_t j = 0; j < half; ++j) {
    const double inv_freq = std::pow(d.rope_theta, -2.0 * static_cast<double>(j) /
                                                       static_cast<double>(d.rotary_dim));
    const double angle = static_cast<double>(position) * inv_freq;
    cosines[j] = static_cast<float>(std::cos(angle));
    sines[j] = static_cast<float>(std::sin(angle));
  }
}

}  // namespace

torch::Tensor Qwen35RmsNormCpu(const torch::Tensor& x, const torch::Tensor& w, double eps,
                               bool zero_centred) {
  CheckFloat(x, "x");
  CheckFloat(w, "w");
  const int64_t n = x.size(-1), rows = x.numel() / n;
  torch::Tensor y = torch::empty_like(x);
  (Wide() ? avx512::RmsNormRows : plain::RmsNormRows)(Data(x), Data(w), y.data_ptr<float>(), rows,
                                                      n, static_cast<float>(eps), zero_centred);
  return y;
}

torch::Tensor SiluGateCpu(const torch::Tensor& gate, const torch::Tensor& up) {
  CheckFloat(gate, "gate");
  CheckFloat(up, "up");
  TORCH_CHECK(gate.sizes() == up.sizes(), "SiluGateCpu: gate ", gate.sizes(), ", up ",
              up.sizes());
  torch::Tensor y = torch::empty_like(gate);
  (Wide() ? avx512::SiluGateRows : plain::SiluGateRows)(Data(gate), Data(up),
                                                        y.data_ptr<float>(), gate.numel());
  return y;
}

torch::Tensor GatedDeltaNetCpu(const torch::Tensor& qkv, const torch::Tensor& z,
                               const torch::Tensor& beta_logit, const torch::Tensor& a,
                               const torch::Tensor& conv_weight, const torch::Tensor& A_log,
                               const torch::Tensor& dt_bias, const torch::Tensor& norm_weight,
                               torch::Tensor& conv_state, torch::Tensor& S, int64_t T,
                               const GatedDeltaNetDims& d) {
  for (const auto& [t, name] : {std::pair{&qkv, "qkv"}, {&z, "z"}, {&beta_logit, "b"}, {&a, "a"},
                                {&conv_weight, "conv_weight"}, {&A_log, "A_log"},
                                {&dt_bias, "dt_bias"}, {&norm_weight, "norm_weight"},
                                {&conv_state, "conv_state"}, {&S, "S"}}) {
    CheckFloat(*t, name);
  }
  const int64_t B = S.size(0), Hv = d.value_heads, dv = d.value_dim, dk = d.key_dim;
  const int64_t C = 2 * d.key_heads * dk + Hv * dv;
  TORCH_CHECK(Hv % d.key_heads == 0, "GatedDeltaNetCpu: ", Hv, " value heads over ",
              d.key_heads, " key heads");
  TORCH_CHECK(qkv.numel() == B * T * C && z.numel() == B * T * Hv * dv &&
                  beta_logit.numel() == B * T * Hv && a.numel() == B * T * Hv &&
                  conv_state.numel() == B * (d.kernel - 1) * C &&
                  S.numel() == B * Hv * dv * dk && conv_weight.numel() == C * d.kernel,
              "GatedDeltaNetCpu: shapes do not fit B ", B, ", T ", T);
  torch::Tensor out = torch::empty({B * T, Hv * dv}, torch::kFloat32);
  const GdnWeights weights{Data(conv_weight), Data(A_log), Data(dt_bias),
                                   Data(norm_weight)};
  // Sessions split over the engine's pool; one session alone splits its
  // value heads instead (GdnRun: a call inside a span runs inline).
  ParallelFor(B, 1, [&](int64_t b, int64_t) {
    // Not zeroed: GdnRun writes each row before it reads it.
    const std::unique_ptr<float[]> scratch(new float[avx512::GdnScratchRows(T) * (C + 2 * Hv)]);
    const GdnSession session{
        Data(qkv) + b * T * C,
        Data(z) + b * T * Hv * dv,
        Data(beta_logit) + b * T * Hv,
        Data(a) + b * T * Hv,
        conv_state.data_ptr<float>() + b * (d.kernel - 1) * C,
        S.data_ptr<float>() + b * Hv * dv * dk,
        out.data_ptr<float>() + b * T * Hv * dv};
    if (Wide()) {
      avx512::GdnRun(session, weights, T, d, scratch.get());
    } else {
      plain::GdnRun(session, weights, T, d, scratch.get());
    }
  });
  return out;
}

namespace {

// Tokens whose queries read the cache together in a prefill: each key and
// value row is read once per block instead of once per token.
constexpr int64_t kQueryBlock = 16;

// The first float of `buffer` on a 64-byte boundary (it holds kLineFloats
// more than it is asked to).
constexpr int64_t kLineFloats = 16;
float* LineAligned(std::vector<float>& buffer) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(buffer.data());
  return reinterpret_cast<float*>((address + 63) & ~uintptr_t{63});
}

// GatedAttentionCpu over a cache of `Cache` (float, or uint16_t holding
// bfloat16 bits) in blocks.
template <typename Cache>
void AttendCached(const torch::Tensor& qg, const torch::Tensor& k, const torch::Tensor& v,
                  const torch::Tensor& q_norm, const torch::Tensor& k_norm,
                  const std::vector<TensorBlocks*>& keys, const std::vector<TensorBlocks*>& values,
                  int64_t block_tokens, const std::vector<int64_t>& positions, int64_t T,
                  const GatedAttentionDims& d, torch::Tensor& out) {
  const int64_t B = static_cast<int64_t>(positions.size());
  const int64_t nH = d.heads, nKV = d.kv_heads, D = d.head_dim, group = nH / nKV;
  const bool wide = Wide();
  auto norm_row = wide ? avx512::RmsNormRow : plain::RmsNormRow;
  auto rope = wide ? avx512::Rope : plain::Rope;
  auto attend = wide ? avx512::AttendQueries<Cache> : plain::AttendQueries<Cache>;
  const float eps = static_cast<float>(d.eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int64_t block = std::min(kQueryBlock, T) * group;  // queries per call
  int64_t longest = 0;
  for (int64_t p : positions) longest = std::max(longest, p + T);
  // Where (session, KV head, position)'s key and value rows lie.
  auto key_row = [&](int64_t b, int64_t h, int64_t position) {
    return static_cast<Cache*>((*keys[b])[position / block_tokens].data_ptr()) +
           (h * block_tokens + position % block_tokens) * D;
  };
  auto value_row = [&](int64_t b, int64_t h, int64_t position) {
    return static_cast<Cache*>((*values[b])[position / block_tokens].data_ptr()) +
           (h * block_tokens + position % block_tokens) * D;
  };
  // The new keys and values first, every session's, so that each query sees
  // its own token.
  {
    std::vector<float> cosines(d.rotary_dim / 2), sines(d.rotary_dim / 2), row(D);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < T; ++t) {
        const int64_t r = b * T + t, position = positions[b] + t;
        RopeAngles(position, d, cosines.data(), sines.data());
        for (int64_t h = 0; h < nKV; ++h) {
          norm_row(Data(k) + (r * nKV + h) * D, Data(k_norm), row.data(), D, eps, true);
          rope(row.data(), cosines.data(), sines.data(), d.rotary_dim);
          Store(row.data(), D, key_row(b, h, position));
          Store(Data(v) + (r * nKV + h) * D, D, value_row(b, h, position));
        }
      }
    }
  }
  // Then the queries, tokens in blocks of kQueryBlock: each block's queries
  // of one GQA group read each cached key and value row once. The (session,
  // block, KV head) units are independent and each is computed the same way
  // on any thread: they split over the engine's pool.
  const int64_t blocks = (T + kQueryBlock - 1) / kQueryBlock;
  ParallelFor(B * blocks * nKV, 1, [&](int64_t unit, int64_t) {
    const int64_t b = unit / (blocks * nKV), kv = unit % nKV;
    const int64_t first = unit / nKV % blocks * kQueryBlock;
    const int64_t tokens = std::min(kQueryBlock, T - first);
    std::vector<float> cosines(d.rotary_dim / 2), sines(d.rotary_dim / 2), scores(block * longest);
    // On cache lines' boundaries: each 64-byte load of a row that straddled
    // two lines cost two (the attention of a decode step at context 4,096
    // took 1.2x as long with these in plain vectors).
    std::vector<float> query_buffer(block * D + kLineFloats),
        attended_buffer(block * D + kLineFloats), row_buffer(avx512::kAttendRows * D + kLineFloats);
    float* const queries = LineAligned(query_buffer);
    float* const attended = LineAligned(attended_buffer);
    float* const row = LineAligned(row_buffer);
    std::vector<int64_t> seen(block);
    const int64_t n_blocks = static_cast<int64_t>(keys[b]->size());
    std::vector<const Cache*> key_blocks(n_blocks), value_blocks(n_blocks);
    for (int64_t i = 0; i < n_blocks; ++i) {
      key_blocks[i] = key_row(b, kv, i * block_tokens);
      value_blocks[i] = value_row(b, kv, i * block_tokens);
    }
    for (int64_t i = 0; i < tokens; ++i) {
      const int64_t r = b * T + first + i, position = positions[b] + first + i;
      RopeAngles(position, d, cosines.data(), sines.data());
      for (int64_t g = 0; g < group; ++g) {
        const int64_t q = i * group + g;
        const float* head = Data(qg) + (r * nH + kv * group + g) * 2 * D;  // query, gate
        norm_row(head, Data(q_norm), queries + q * D, D, eps, true);
        rope(queries + q * D, cosines.data(), sines.data(), d.rotary_dim);
        seen[q] = position + 1;
      }
    }
    attend(queries, tokens * group, seen.data(), key_blocks.data(), value_blocks.data(),
           block_tokens, D, scale, scores.data(), attended, row);  // kAttendRows rows
    for (int64_t i = 0; i < tokens; ++i) {
      const int64_t r = b * T + first + i;
      for (int64_t g = 0; g < group; ++g) {
        const int64_t h = kv * group + g, q = i * group + g;
        const float* gate = Data(qg) + (r * nH + h) * 2 * D + D;
        float* o = out.data_ptr<float>() + (r * nH + h) * D;
        for (int64_t j = 0; j < D; ++j) {
          o[j] = attended[q * D + j] * (1.0f / (1.0f + std::exp(-gate[j])));
        }
      }
    }
  });
}

}  // namespace

torch::Tensor GatedAttentionCpu(const torch::Tensor& qg, const torch::Tensor& k,
                                const torch::Tensor& v, const torch::Tensor& q_norm,
                                const torch::Tensor& k_norm,
                                const std::vector<TensorBlocks*>& keys,
                                const std::vector<TensorBlocks*>& values, int64_t block_tokens,
                                const std::vector<int64_t>& positions, int64_t T,
                                const GatedAttentionDims& d) {
  for (const auto& [t, name] : {std::pair{&qg, "qg"}, {&k, "k"}, {&v, "v"},
                                {&q_norm, "q_norm"}, {&k_norm, "k_norm"}}) {
    CheckFloat(*t, name);
  }
  const int64_t B = static_cast<int64_t>(positions.size());
  const int64_t nH = d.heads, nKV = d.kv_heads, D = d.head_dim;
  TORCH_CHECK(nH % nKV == 0 && qg.numel() == B * T * nH * 2 * D && k.numel() == B * T * nKV * D &&
                  v.numel() == B * T * nKV * D && static_cast<int64_t>(keys.size()) == B &&
                  static_cast<int64_t>(values.size()) == B && block_tokens > 0,
              "GatedAttentionCpu: shapes do not fit B ", B, ", T ", T);
  std::optional<torch::ScalarType> dtype;
  for (int64_t b = 0; b < B; ++b) {
    TORCH_CHECK(static_cast<int64_t>(keys[b]->size()) * block_tokens >= positions[b] + T &&
                    values[b]->size() == keys[b]->size(),
                "GatedAttentionCpu: session ", b, "'s cache has ", keys[b]->size(),
                " blocks of ", block_tokens, " positions for position ", positions[b] + T);
    // The first block and those the new tokens go into: the blocks between
    // were checked by the step that wrote them, so a decode step checks a
    // few blocks per session rather than the whole cache.
    const int64_t first_new = positions[b] / block_tokens;
    for (const TensorBlocks* side : {keys[b], values[b]}) {
      for (int64_t j = 0; j < static_cast<int64_t>(side->size()); ++j) {
        if (j != 0 && j < first_new) continue;
        const torch::Tensor& block = (*side)[j];
        if (!dtype) dtype = block.scalar_type();
        TORCH_CHECK(block.is_cpu() && block.is_contiguous() && block.scalar_type() == *dtype &&
                        (*dtype == torch::kFloat32 || *dtype == torch::kBFloat16) &&
                        block.dim() == 3 && block.size(0) == nKV &&
                        block.size(1) == block_tokens && block.size(2) == D,
                    "GatedAttentionCpu: a cache block must be contiguous (", nKV, ", ",
                    block_tokens, ", ", D, ") float32 or bfloat16 on the CPU, one dtype");
      }
    }
  }
  torch::Tensor out = torch::empty({B * T, nH * D}, torch::kFloat32);
  if (!dtype || *dtype == torch::kFloat32) {
    AttendCached<float>(qg, k, v, q_norm, k_norm, keys, values, block_tokens, positions, T, d,
                        out);
  } else {
    AttendCached<uint16_t>(qg, k, v, q_norm, k_norm, keys, values, block_tokens, positions, T,
                           d, out);
  }
  return out;
}

torch::Tensor GatedAttentionCpu(const torch::Tensor& qg, const torch::Tensor& k,
                                const torch::Tensor& v, const torch::Tensor& q_norm,
                                const torch::Tensor& k_norm, torch::Tensor& keys,
                                torch::Tensor& values, const std::vector<int64_t>& positions,
                                int64_t T, const GatedAttentionDims& d) {
  TORCH_CHECK(keys.dim() == 4 && keys.is_contiguous() && values.sizes() == keys.sizes() &&
                  values.is_contiguous(),
              "GatedAttentionCpu: the cache must be contiguous (B, nKV, capacity, D)");
  // Each session's cache is one block of `capacity` positions (views: the
  // writes land in `keys` and `values`).
  const int64_t B = keys.size(0);
  std::vector<TensorBlocks> key_blocks(B), value_blocks(B);
  std::vector<TensorBlocks*> key_list, value_list;
  for (int64_t b = 0; b < B; ++b) {
    key_blocks[b] = {keys.select(0, b)};
    value_blocks[b] = {values.select(0, b)};
    key_list.push_back(&key_blocks[b]);
    value_list.push_back(&value_blocks[b]);
  }
  return GatedAttentionCpu(qg, k, v, q_norm, k_norm, key_list, value_list, keys.size(2),
                           positions, T, d);
}

}  // namespace linserve

#include "engine/rwkv7/rwkv7_wkv_cpu.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include <torch/types.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/engine_threads.h"

namespace linserve {
namespace {

// Partial sums per dot product: independent lanes the compiler can keep in
// vector registers (a single float accumulator would serialise the loop,
// since float addition may not be reordered without -ffast-math).
constexpr int64_t kLanes = 8;

// The pointers of one head: inputs (N) and its state S (N x N), updated in
// place row by row (row i of the new S needs only row i of the old).
struct Head {
  const float *r, *w, *k, *v, *kk, *b;
  float* S;
  float* y;
};

void HeadPlain(const Head& h, int64_t N) {
  const int64_t whole = N / kLanes * kLanes;
  for (int64_t i = 0; i < N; ++i) {
    float* row = h.S + i * N;
    // (S kk)_i
    float lanes[kLanes] = {};
    for (int64_t j = 0; j < whole; j += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] += row[j + l] * h.kk[j + l];
    }
    float s_kk = 0;
    for (int64_t l = 0; l < kLanes; ++l) s_kk += lanes[l];
    for (int64_t j = whole; j < N; ++j) s_kk += row[j] * h.kk[j];
    // The new row, and y_i = (new row) . r
    float acc[kLanes] = {};
    for (int64_t j = 0; j < whole; j += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) {
        const float x = row[j + l] * h.w[j + l] + h.v[i] * h.k[j + l] - s_kk * h.b[j + l];
        row[j + l] = x;
        acc[l] += x * h.r[j + l];
      }
    }
    float y_i = 0;
    for (int64_t l = 0; l < kLanes; ++l) y_i += acc[l];
    for (int64_t j = whole; j < N; ++j) {
      const float x = row[j] * h.w[j] + h.v[i] * h.k[j] - s_kk * h.b[j];
      row[j] = x;
      y_i += x * h.r[j];
    }
    h.y[i] = y_i;
  }
}

// The same with 16-lane AVX-512 registers, for N a multiple of 16 (N = 64 in
// the published models). The baseline x86-64 build gives the plain loop 4
// lanes; this ran a batch-32 step of the 0.1B shape's state about 2.5 times
// as fast.
__attribute__((target("avx512f"))) void HeadAvx512(const Head& h, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    float* row = h.S + i * N;
    __m512 dot = _mm512_setzero_ps();
    for (int64_t j = 0; j < N; j += 16) {
      dot = _mm512_fmadd_ps(_mm512_loadu_ps(row + j), _mm512_loadu_ps(h.kk + j), dot);
    }
    const __m512 s_kk = _mm512_set1_ps(_mm512_reduce_add_ps(dot));
    const __m512 v_i = _mm512_set1_ps(h.v[i]);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < N; j += 16) {
      __m512 x = _mm512_mul_ps(_mm512_loadu_ps(row + j), _mm512_loadu_ps(h.w + j));
      x = _mm512_fmadd_ps(v_i, _mm512_loadu_ps(h.k + j), x);
      x = _mm512_fnmadd_ps(s_kk, _mm512_loadu_ps(h.b + j), x);
      _mm512_storeu_ps(row + j, x);
      acc = _mm512_fmadd_ps(x, _mm512_loadu_ps(h.r + j), acc);
    }
    h.y[i] = _mm512_reduce_add_ps(acc);
  }
}

// Rows of WkvOutputCpu per span of the engine's pool: a row of 768 channels
// is about a microsecond.
constexpr int64_t kOutputRowsPerSpan = 8;

// Head-tokens per span: one head's step is about a microsecond at N = 64.
constexpr int64_t kHeadStepsPerSpan = 4;

// T tokens of B * H heads, each head's tokens in order: inputs (T, heads, N)
// contiguous, y the same shape; S (heads, N, N) updated in place through all
// of them. Heads are independent: they split over the engine's pool, each
// head's steps the same whichever thread runs them.
void RunTokens(const torch::Tensor& r, const torch::Tensor& w, const torch::Tensor& k,
               const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
               torch::Tensor& S, torch::Tensor& y, int64_t T) {
  const int64_t N = S.size(-1), heads = S.numel() / (N * N);  // heads: B * H
  // The AVX-512 loop sums in another order than the plain one: each gives
  // its own bits (docs/DESIGN.md, "What is bit-identical").
  const bool wide = ActiveCpuHasAvx512() && N % 16 == 0;
  const float *r_p = r.data_ptr<float>(), *w_p = w.data_ptr<float>(), *k_p = k.data_ptr<float>();
  const float *v_p = v.data_ptr<float>(), *kk_p = kk.data_ptr<float>(), *a_p = a.data_ptr<float>();
  float *S_p = S.data_ptr<float>(), *y_p = y.data_ptr<float>();
  const int64_t heads_per_span = std::max<int64_t>(1, kHeadStepsPerSpan / T);
  ParallelFor(heads, heads_per_span, [&](int64_t first, int64_t end) {
    // b = kk a, one head at a time: the same products as a whole-tensor
    // multiply, without its dispatch and allocation at every step.
    std::vector<float> b(N);
    for (int64_t h = first; h < end; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        const int64_t at = (t * heads + h) * N;
        const float *kk_h = kk_p + at, *a_h = a_p + at;
        for (int64_t n = 0; n < N; ++n) b[n] = kk_h[n] * a_h[n];
        const Head head{r_p + at, w_p + at, k_p + at, v_p + at, kk_h, b.data(), S_p + h * N * N,
                        y_p + at};
        if (wide) {
          HeadAvx512(head, N);
        } else {
          HeadPlain(head, N);
        }
      }
    }
  });
}

void CheckCpuFloat(std::initializer_list<const torch::Tensor*> tensors, const char* function) {
  for (const torch::Tensor* t : tensors) {
    TORCH_CHECK(t->is_cpu() && t->scalar_type() == torch::kFloat32, function,
                ": float32 CPU tensors only");
  }
}

}  // namespace

torch::Tensor WkvStepCpu(const torch::Tensor& r, const torch::Tensor& w, const torch::Tensor& k,
                         const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                         torch::Tensor& S) {
  const int64_t N = S.size(-1), heads = S.numel() / (N * N);
  CheckCpuFloat({&r, &w, &k, &v, &kk, &a, &S}, "WkvStepCpu");
  TORCH_CHECK(r.numel() == heads * N && S.size(-2) == N, "WkvStepCpu: shapes ", r.sizes(), " and ",
              S.sizes());
  if (!S.is_contiguous()) S = S.contiguous();
  torch::Tensor y = torch::empty_like(r, at::MemoryFormat::Contiguous);
  RunTokens(r.contiguous(), w.contiguous(), k.contiguous(), v.contiguous(), kk.contiguous(),
            a.contiguous(), S, y, 1);
  return y;
}

torch::Tensor WkvStepsCpu(const torch::Tensor& r, const torch::Tensor& w, const torch::Tensor& k,
                          const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                          torch::Tensor& S) {
  const int64_t N = S.size(-1), heads = S.numel() / (N * N), T = r.size(0);
  CheckCpuFloat({&r, &w, &k, &v, &kk, &a, &S}, "WkvStepsCpu");
  TORCH_CHECK(r.numel() == T * heads * N && S.size(-2) == N, "WkvStepsCpu: shapes ", r.sizes(),
              " and ", S.sizes());
  if (!S.is_contiguous()) S = S.contiguous();
  torch::Tensor y = torch::empty_like(r, at::MemoryFormat::Contiguous);
  RunTokens(r.contiguous(), w.contiguous(), k.contiguous(), v.contiguous(), kk.contiguous(),
            a.contiguous(), S, y, T);
  return y;
}

torch::Tensor WkvOutputCpu(const torch::Tensor& y, const torch::Tensor& r, const torch::Tensor& k,
                           const torch::Tensor& v, const torch::Tensor& r_k,
                           const torch::Tensor& g, const torch::Tensor& weight,
                           const torch::Tensor& bias, double eps) {
  const int64_t B = y.size(0), H = y.size(1), N = y.size(2), C = H * N;
  for (const torch::Tensor* t : std::initializer_list<const torch::Tensor*>{
           &y, &r, &k, &v, &r_k, &g, &weight, &bias}) {
    TORCH_CHECK(t->is_cpu() && t->scalar_type() == torch::kFloat32,
                "WkvOutputCpu: float32 CPU tensors only");
    TORCH_CHECK(t->numel() == B * C || t->numel() == C, "WkvOutputCpu: a tensor of shape ",
                t->sizes(), " for ", B, " x ", C);
  }
  const torch::Tensor y_c = y.contiguous(), r_c = r.contiguous(), k_c = k.contiguous();
  const torch::Tensor v_c = v.contiguous(), rk_c = r_k.contiguous(), g_c = g.contiguous();
  const torch::Tensor w_c = weight.contiguous(), b_c = bias.contiguous();
  torch::Tensor out = torch::empty({B, C}, torch::kFloat32);
  const float *y_p = y_c.data_ptr<float>(), *r_p = r_c.data_ptr<float>();
  const float *k_p = k_c.data_ptr<float>(), *v_p = v_c.data_ptr<float>();
  const float *rk_p = rk_c.data_ptr<float>(), *g_p = g_c.data_ptr<float>();
  const float *w_p = w_c.data_ptr<float>(), *b_p = b_c.data_ptr<float>();
  float* out_p = out.data_ptr<float>();
  // Rows split over the engine's pool, each row's sums in one order.
  ParallelFor(B, kOutputRowsPerSpan, [&](int64_t first, int64_t end) {
    for (int64_t row = first; row < end; ++row) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t at = row * C + h * N, channel = h * N;
        float sum = 0, bonus = 0;
        for (int64_t n = 0; n < N; ++n) {
          sum += y_p[at + n];
          bonus += r_p[at + n] * k_p[at + n] * rk_p[channel + n];
        }
        const float mean = sum / N;
        float squares = 0;
        for (int64_t n = 0; n < N; ++n) squares += (y_p[at + n] - mean) * (y_p[at + n] - mean);
        const float scale = 1.0f / std::sqrt(squares / N + static_cast<float>(eps));
        for (int64_t n = 0; n < N; ++n) {
          const float normed = (y_p[at + n] - mean) * scale * w_p[channel + n] + b_p[channel + n];
          out_p[at + n] = (normed + bonus * v_p[at + n]) * g_p[at + n];
        }
      }
    }
  });
  return out;
}

}  // namespace linserve

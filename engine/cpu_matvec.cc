#include "engine/cpu_matvec.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace linserve {
namespace {

// Rows per task of the parallel loop: 1,024 rows of 768 float32 are 3 MB,
// enough that a task's start costs nothing beside its reads.
constexpr int64_t kRowsPerTask = 1024;

// The few-rows kernels hold 32 inputs in two 16-lane registers.
static_assert(kMaxFewRows == 32, "EightRowsByInputs and OneRowByInputs assume 32 inputs");

// The kernels are compiled for AVX-512F alone (the rest of the build targets
// the baseline x86-64) and only called after HasCpuMatVec checked the CPU.

// 16 weights as float32 lanes. A bfloat16 is the top half of a float32's
// bits, so it widens by a shift.
__attribute__((target("avx512f"))) inline __m512 Load16(const float* p) {
  return _mm512_loadu_ps(p);
}
__attribute__((target("avx512f"))) inline __m512 Load16(const uint16_t* p) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
inline float ToFloat(float value) { return value; }
inline float ToFloat(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// y[i] = W[i] . x for rows [begin, end) of W (rows of n float32 or bfloat16
// weights): 64 columns a step into four independent accumulators, then the
// tail.
template <typename Weight>
__attribute__((target("avx512f"))) void Rows(const Weight* w, int64_t begin, int64_t end,
                                             int64_t n, const float* x, float* y) {
  for (int64_t i = begin; i < end; ++i) {
    const Weight* row = w + i * n;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 64 <= n; j += 64) {
      a0 = _mm512_fmadd_ps(Load16(row + j), _mm512_loadu_ps(x + j), a0);
      a1 = _mm512_fmadd_ps(Load16(row + j + 16), _mm512_loadu_ps(x + j + 16), a1);
      a2 = _mm512_fmadd_ps(Load16(row + j + 32), _mm512_loadu_ps(x + j + 32), a2);
      a3 = _mm512_fmadd_ps(Load16(row + j + 48), _mm512_loadu_ps(x + j + 48), a3);
    }
    float sum =
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    for (; j < n; ++j) sum += ToFloat(row[j]) * x[j];
    y[i] = sum;
  }
}

// Eight weight rows `w` (8, n) times xt (n, 32) into yt (8, 32): two
// 16-lane accumulators per weight row hold its products with the 32 inputs.
__attribute__((target("avx512f"))) void EightRowsByInputs(const float* w, int64_t n,
                                                          const float* xt, float* yt) {
  __m512 acc[8][2];
  for (int r = 0; r < 8; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const float* rows[8];
  for (int r = 0; r < 8; ++r) rows[r] = w + r * n;
  for (int64_t i = 0; i < n; ++i) {
    const __m512 x0 = _mm512_loadu_ps(xt + i * 32), x1 = _mm512_loadu_ps(xt + i * 32 + 16);
    for (int r = 0; r < 8; ++r) {
      const __m512 value = _mm512_set1_ps(rows[r][i]);
      acc[r][0] = _mm512_fmadd_ps(value, x0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(value, x1, acc[r][1]);
    }
  }
  for (int r = 0; r < 8; ++r) {
    _mm512_storeu_ps(yt + r * 32, acc[r][0]);
    _mm512_storeu_ps(yt + r * 32 + 16, acc[r][1]);
  }
}

// The same for one weight row `row` (n) into yt (32).
__attribute__((target("avx512f"))) void OneRowByInputs(const float* row, int64_t n,
                                                       const float* xt, float* yt) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    const __m512 value = _mm512_set1_ps(row[i]);
    a0 = _mm512_fmadd_ps(value, _mm512_loadu_ps(xt + i * 32), a0);
    a1 = _mm512_fmadd_ps(value, _mm512_loadu_ps(xt + i * 32 + 16), a1);
  }
  _mm512_storeu_ps(yt, a0);
  _mm512_storeu_ps(yt + 16, a1);
}

}  // namespace

bool HasCpuMatVec(torch::ScalarType weight_dtype) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 && (weight_dtype == torch::kFloat32 || weight_dtype == torch::kBFloat16);
}

torch::Tensor CpuMatVec(const torch::Tensor& weight, const torch::Tensor& x) {
  TORCH_CHECK(weight.dim() == 2 && weight.is_cpu() && weight.is_contiguous() &&
                  HasCpuMatVec(weight.scalar_type()),
              "CpuMatVec: a contiguous float32 or bfloat16 CPU matrix on an AVX-512 CPU");
  const int64_t out = weight.size(0), n = weight.size(1);
  const torch::Tensor in = x.to(torch::kFloat32).contiguous();
  TORCH_CHECK(in.numel() == n, "CpuMatVec: x has ", in.numel(), " values for ", n, " columns");
  torch::Tensor y = torch::empty({out}, torch::kFloat32);
  const float* x_p = in.data_ptr<float>();
  float* y_p = y.data_ptr<float>();
  if (weight.scalar_type() == torch::kFloat32) {
    const float* w = weight.data_ptr<float>();
    at::parallel_for(0, out, kRowsPerTask,
                     [&](int64_t begin, int64_t end) { Rows(w, begin, end, n, x_p, y_p); });
  } else {
    const auto* w = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
    at::parallel_for(0, out, kRowsPerTask,
                     [&](int64_t begin, int64_t end) { Rows(w, begin, end, n, x_p, y_p); });
  }
  return y;
}

torch::Tensor CpuFewRowsProduct(const torch::Tensor& weight, const torch::Tensor& x) {
  TORCH_CHECK(weight.dim() == 2 && weight.is_cpu() && weight.is_contiguous() &&
                  weight.scalar_type() == torch::kFloat32 && HasCpuMatVec(torch::kFloat32),
              "CpuFewRowsProduct: a contiguous float32 CPU matrix on an AVX-512 CPU");
  const int64_t out = weight.size(0), n = weight.size(1), rows = x.size(0);
  TORCH_CHECK(x.dim() == 2 && x.size(1) == n && rows >= 1 && rows <= kMaxFewRows,
              "CpuFewRowsProduct: x ", x.sizes(), " for ", n, " columns and at most ",
              kMaxFewRows, " rows");
  // The inputs transposed and zero-padded to 32 columns: row i holds every
  // input's value i, two 64-byte lines.
  torch::Tensor xt = torch::zeros({n, kMaxFewRows}, torch::kFloat32);
  xt.narrow(1, 0, rows).copy_(x.t());
  torch::Tensor yt = torch::empty({out, kMaxFewRows}, torch::kFloat32);
  const float* xt_p = xt.data_ptr<float>();
  float* yt_p = yt.data_ptr<float>();
  const int64_t blocks = out / 8;
  const float* w = weight.data_ptr<float>();
  at::parallel_for(0, blocks, kRowsPerTask / 8, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      EightRowsByInputs(w + b * 8 * n, n, xt_p, yt_p + b * 8 * kMaxFewRows);
    }
  });
  for (int64_t j = blocks * 8; j < out; ++j) {
    OneRowByInputs(w + j * n, n, xt_p, yt_p + j * kMaxFewRows);
  }
  return yt.narrow(1, 0, rows).t().contiguous();
}

}  // namespace linserve

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

// The kernels are compiled for AVX-512F alone (the rest of the build targets
// the baseline x86-64) and only called after HasCpuMatVec checked the CPU.

__attribute__((target("avx512f"))) void RowsFloat(const float* w, int64_t begin, int64_t end,
                                                  int64_t n, const float* x, float* y) {
  for (int64_t i = begin; i < end; ++i) {
    const float* row = w + i * n;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 64 <= n; j += 64) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(row + j), _mm512_loadu_ps(x + j), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(row + j + 16), _mm512_loadu_ps(x + j + 16), a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(row + j + 32), _mm512_loadu_ps(x + j + 32), a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(row + j + 48), _mm512_loadu_ps(x + j + 48), a3);
    }
    float sum =
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    for (; j < n; ++j) sum += row[j] * x[j];
    y[i] = sum;
  }
}

// 16 bfloat16 values widened to float32: a bfloat16 is the top half of a
// float32's bits.
__attribute__((target("avx512f"))) inline __m512 LoadBf16(const uint16_t* p) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

__attribute__((target("avx512f"))) void RowsBf16(const uint16_t* w, int64_t begin, int64_t end,
                                                 int64_t n, const float* x, float* y) {
  for (int64_t i = begin; i < end; ++i) {
    const uint16_t* row = w + i * n;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 64 <= n; j += 64) {
      a0 = _mm512_fmadd_ps(LoadBf16(row + j), _mm512_loadu_ps(x + j), a0);
      a1 = _mm512_fmadd_ps(LoadBf16(row + j + 16), _mm512_loadu_ps(x + j + 16), a1);
      a2 = _mm512_fmadd_ps(LoadBf16(row + j + 32), _mm512_loadu_ps(x + j + 32), a2);
      a3 = _mm512_fmadd_ps(LoadBf16(row + j + 48), _mm512_loadu_ps(x + j + 48), a3);
    }
    float sum =
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    for (; j < n; ++j) {
      const uint32_t bits = static_cast<uint32_t>(row[j]) << 16;
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      sum += value * x[j];
    }
    y[i] = sum;
  }
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
                     [&](int64_t begin, int64_t end) { RowsFloat(w, begin, end, n, x_p, y_p); });
  } else {
    const auto* w = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
    at::parallel_for(0, out, kRowsPerTask,
                     [&](int64_t begin, int64_t end) { RowsBf16(w, begin, end, n, x_p, y_p); });
  }
  return y;
}

}  // namespace linserve

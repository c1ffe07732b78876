// engine/fixed_order_kernel.h for AVX2 + FMA: each 16-lane sum is two 8-lane
// registers (lanes 0-7 and 8-15), so the multiply-adds and the tree are the
// AVX-512 family's, bit for bit. Tiles of 2 rows x 2 outputs (8 sum
// registers of the 16). Compiled with -mavx2 -mfma (engine/CMakeLists.txt).

#include <immintrin.h>

#include <cstdint>

#include "engine/fixed_order_kernel.h"

namespace linserve {
namespace {

struct Avx2 {
  struct V {
    __m256 low;   // lanes 0-7
    __m256 high;  // lanes 8-15
  };
  static constexpr int kRows = 2;
  static constexpr int kCols = 2;
  static V Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static V Load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static __m256 Widen(const uint16_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static V Load(const uint16_t* p) { return {Widen(p), Widen(p + 8)}; }
  static V MulAdd(V x, V w, V acc) {
    return {_mm256_fmadd_ps(x.low, w.low, acc.low), _mm256_fmadd_ps(x.high, w.high, acc.high)};
  }
  static void Reduce(const V* acc, int n, float* out) {
    for (int i = 0; i < n; ++i) {
      const __m256 l1 = _mm256_add_ps(acc[i].low, acc[i].high);                  // j + (j+8)
      const __m128 l2 = _mm_add_ps(_mm256_castps256_ps128(l1), _mm256_extractf128_ps(l1, 1));
      const __m128 l3 = _mm_add_ps(l2, _mm_movehl_ps(l2, l2));                   // j + (j+2)
      const __m128 l4 = _mm_add_ss(l3, _mm_shuffle_ps(l3, l3, 1));               // 0 + 1
      out[i] = _mm_cvtss_f32(l4);
    }
  }
};

#include "engine/fixed_order_kernel.inc"

}  // namespace

void FixedOrderProductAvx2(const FixedOrderArgs& args, int64_t out_begin, int64_t out_end) {
  RunAny<Avx2>(args, out_begin, out_end);
}

}  // namespace linserve

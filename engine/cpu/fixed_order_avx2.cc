// engine/cpu/fixed_order_kernel.h for AVX2 + FMA: each panel's 16 sums are two
// 8-lane registers, each lane the same chain of fused multiply-adds as in
// the AVX-512 family, so the bits are the same. Tiles of 2 rows x 2 panels
// (8 sum registers, 4 weight registers and a broadcast input in 13 of the
// 16). Compiled with -mavx2 -mfma (engine/CMakeLists.txt).

#include <immintrin.h>

#include <cstdint>

#include "engine/cpu/fixed_order_kernel.h"

namespace linserve {
namespace {

struct Avx2 {
  struct V {
    __m256 low;   // outputs 0-7 of the panel
    __m256 high;  // outputs 8-15
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
  static V Broadcast(float x) {
    const __m256 v = _mm256_set1_ps(x);
    return {v, v};
  }
  static V MulAdd(V x, V w, V acc) {
    return {_mm256_fmadd_ps(x.low, w.low, acc.low), _mm256_fmadd_ps(x.high, w.high, acc.high)};
  }
  static void Store(float* p, V v) {
    _mm256_storeu_ps(p, v.low);
    _mm256_storeu_ps(p + 8, v.high);
  }
};

#include "engine/cpu/fixed_order_kernel.inc"

}  // namespace

void FixedOrderProductAvx2(const FixedOrderArgs& args, int64_t panel_begin, int64_t panel_end) {
  RunAny<Avx2>(args, panel_begin, panel_end);
}

}  // namespace linserve

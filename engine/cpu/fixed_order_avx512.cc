// engine/cpu/fixed_order_kernel.h for AVX-512F: one 16-lane register per panel's
// sums, tiles of 6 rows x 4 panels (24 sums, 4 weight lines and a broadcast
// input in 29 of the 32 registers; on the 0.1B RWKV-7 shape's products 6 x 4
// ran 1,024 rows at 165 to 225 GFLOP/s, 4 x 6 at 125 to 205). Compiled with
// -mavx512f (engine/CMakeLists.txt).

#include <immintrin.h>

#include <cstdint>

#include "engine/cpu/fixed_order_kernel.h"

namespace linserve {
namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int kRows = 6;
  static constexpr int kCols = 4;
  static V Zero() { return _mm512_setzero_ps(); }
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  // A bfloat16 is the top half of a float32's bits.
  static V Load(const uint16_t* p) {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static V Broadcast(float x) { return _mm512_set1_ps(x); }
  static V MulAdd(V x, V w, V acc) { return _mm512_fmadd_ps(x, w, acc); }
  static void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
};

#include "engine/cpu/fixed_order_kernel.inc"

}  // namespace

void FixedOrderProductAvx512(const FixedOrderArgs& args, int64_t panel_begin, int64_t panel_end) {
  RunAny<Avx512>(args, panel_begin, panel_end);
}

}  // namespace linserve

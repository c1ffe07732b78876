// engine/fixed_order_kernel.h for AVX-512F: one 16-lane register per sum,
// tiles of 4 rows x 4 outputs (16 sums, 4 inputs and a weight line in 21 of
// the 32 registers). Compiled with -mavx512f alone (engine/CMakeLists.txt).

#include <immintrin.h>

#include <cstdint>

#include "engine/fixed_order_kernel.h"

namespace linserve {
namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int kRows = 4;
  static constexpr int kCols = 4;
  static V Zero() { return _mm512_setzero_ps(); }
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  // A bfloat16 is the top half of a float32's bits.
  static V Load(const uint16_t* p) {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static V MulAdd(V x, V w, V acc) { return _mm512_fmadd_ps(x, w, acc); }

  // The tree of every sum at once: each level adds the lane pairs of two
  // registers' sums and packs both results into one register, so 16 sums
  // take 15 additions (and 30 permutes) rather than 16 trees of 4.
  static V Level(V a, V b, __m512i low, __m512i high) {
    return _mm512_add_ps(_mm512_permutex2var_ps(a, low, b), _mm512_permutex2var_ps(a, high, b));
  }
  static void Reduce(const V* acc, int n, float* out) {
    V s[16];
    for (int i = 0; i < 16; ++i) s[i] = i < n ? acc[i] : _mm512_setzero_ps();
    // Lanes j and j+8 of sums 2i and 2i+1 -> [2i: 8 | 2i+1: 8].
    const __m512i low1 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i high1 = _mm512_add_epi32(low1, _mm512_set1_epi32(8));
    V l1[8];
    for (int i = 0; i < 8; ++i) l1[i] = Level(s[2 * i], s[2 * i + 1], low1, high1);
    // Lanes j and j+4 of each 8 -> four sums of 4 per register.
    const __m512i low2 = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const __m512i high2 = _mm512_add_epi32(low2, _mm512_set1_epi32(4));
    V l2[4];
    for (int i = 0; i < 4; ++i) l2[i] = Level(l1[2 * i], l1[2 * i + 1], low2, high2);
    // Lanes j and j+2 of each 4 -> eight sums of 2 per register.
    const __m512i low3 = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29);
    const __m512i high3 = _mm512_add_epi32(low3, _mm512_set1_epi32(2));
    const V l3a = Level(l2[0], l2[1], low3, high3), l3b = Level(l2[2], l2[3], low3, high3);
    // Lanes 0 and 1 of each 2 -> the 16 sums in order.
    const __m512i low4 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i high4 = _mm512_add_epi32(low4, _mm512_set1_epi32(1));
    float all[16];
    _mm512_storeu_ps(all, Level(l3a, l3b, low4, high4));
    for (int i = 0; i < n; ++i) out[i] = all[i];
  }
};

#include "engine/fixed_order_kernel.inc"

}  // namespace

void FixedOrderProductAvx512(const FixedOrderArgs& args, int64_t out_begin, int64_t out_end) {
  RunAny<Avx512>(args, out_begin, out_end);
}

}  // namespace linserve

// engine/cpu/quantized_kernel.h in plain C++ for any CPU, with the same bits
// as the VNNI loop: the integer sums are exact whatever their order, and the
// float step per group is one fused multiply-add (FusedMultiplyAdd, the
// rounding of std::fma and of the VNNI loop's vfmadd, without libm's slow
// fmaf). Compiled with -ffp-contract=off, so that no build fuses the s * xs
// product into it or anything else into anything (engine/cpu/CMakeLists.txt).
// Tiles of up to 4 rows x 1 panel: each block of codes is widened to floats
// once per tile.

#include <cstdint>
#include <cstring>

#include "engine/cpu/quantized_kernel.h"

namespace linserve {
namespace {

constexpr int64_t kPanel = 16;
constexpr int kRows = 4;
constexpr int64_t kMaxGroup = 64;

// Four floats that the compiler keeps in one SIMD register on any target
// that has one (SSE2 on every x86-64), a GCC and Clang extension.
typedef float Float4 __attribute__((vector_size(16)));

// One (panel, group) block's codes as floats: codes[v][l] holds lane l's
// codes of inputs 4v..4v+3. Line j of an int8 block is v = j; line j of an
// int4 block holds v = 2j in its low nibbles and v = 2j + 1 in its high ones.
struct WidenedBlock {
  Float4 codes[kMaxGroup / 4][kPanel];
};

Float4 FourCodes(const uint8_t* c, int shift, int mask) {
  return Float4{
      static_cast<float>((c[0] >> shift) & mask), static_cast<float>((c[1] >> shift) & mask),
      static_cast<float>((c[2] >> shift) & mask), static_cast<float>((c[3] >> shift) & mask)};
}

template <bool kInt4>
void Widen(const uint8_t* block, int64_t group, WidenedBlock* out) {
  for (int64_t j = 0; j < (kInt4 ? group / 8 : group / 4); ++j) {
    const uint8_t* line = block + j * 64;
    for (int64_t l = 0; l < kPanel; ++l) {
      if (kInt4) {
        out->codes[2 * j][l] = FourCodes(line + l * 4, 0, 0x0F);
        out->codes[2 * j + 1][l] = FourCodes(line + l * 4, 4, 0x0F);
      } else {
        out->codes[j][l] = FourCodes(line + l * 4, 0, 0xFF);
      }
    }
  }
}

// R rows of one panel: `block0` is the panel's first (panel, group) block,
// `scales` its first 16 scales, `xq`/`xs`/`xsum` the tile's first row.
template <int R, bool kInt4>
void Tile(const QuantizedShape& shape, const uint8_t* block0, const uint16_t* scales,
          const int8_t* xq, const float* xs, const int32_t* xsum, float* y, int64_t y_stride,
          int64_t outputs, bool relu_squared) {
  const int64_t groups = shape.groups(), group = shape.group, padded_in = shape.padded_in();
  const int64_t block_bytes = kInt4 ? group * kPanel / 2 : group * kPanel;
  const int64_t quads = group / 4;
  const int32_t zero = shape.zero_point();
  float sums[R][kPanel] = {};
  WidenedBlock widened;
  for (int64_t g = 0; g < groups; ++g) {
    Widen<kInt4>(block0 + g * block_bytes, group, &widened);
    float scale[kPanel];
    for (int64_t l = 0; l < kPanel; ++l) scale[l] = HalfToFloat(scales[g * kPanel + l]);
    for (int r = 0; r < R; ++r) {
      const int8_t* x = xq + r * padded_in + g * group;
      // Products and partial sums of a group are integers below 2^24 in
      // magnitude (at most 255 x 127 x 64), so floats hold them exactly in
      // any order: float multiply-adds give the exact integer sums the
      // header names. Half the lanes at a time: 8 sums in registers.
      int32_t isum[kPanel];
      for (int64_t half = 0; half < kPanel; half += 8) {
        Float4 acc[8] = {};
        for (int64_t v = 0; v < quads; ++v) {
          const Float4 inputs = {static_cast<float>(x[4 * v]), static_cast<float>(x[4 * v + 1]),
                                 static_cast<float>(x[4 * v + 2]),
                                 static_cast<float>(x[4 * v + 3])};
          for (int64_t l = 0; l < 8; ++l) acc[l] += widened.codes[v][half + l] * inputs;
        }
        for (int64_t l = 0; l < 8; ++l) {
          isum[half + l] = static_cast<int32_t>(acc[l][0] + acc[l][1] + acc[l][2] + acc[l][3]);
        }
      }
      const float row_scale = xs[r * groups + g];
      const int32_t offset = zero * xsum[r * groups + g];
      for (int64_t l = 0; l < kPanel; ++l) {
        const float product = scale[l] * row_scale;
        sums[r][l] = FusedMultiplyAdd(static_cast<float>(isum[l] - offset), product, sums[r][l]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int64_t l = 0; l < outputs; ++l) {
      float v = sums[r][l];
      if (relu_squared) {
        v = v > 0.0f ? v : 0.0f;  // NaN to 0, as the VNNI loop's max
        v = v * v;
      }
      y[r * y_stride + l] = v;
    }
  }
}

using TileFn = void (*)(const QuantizedShape&, const uint8_t*, const uint16_t*, const int8_t*,
                        const float*, const int32_t*, float*, int64_t, int64_t, bool);

template <bool kInt4>
TileFn TileOf(int64_t rows) {
  switch (rows) {
    case 1: return &Tile<1, kInt4>;
    case 2: return &Tile<2, kInt4>;
    case 3: return &Tile<3, kInt4>;
    default: return &Tile<4, kInt4>;
  }
}

}  // namespace

// Here rather than beside the other helpers so that the loop above inlines
// it.
float FusedMultiplyAdd(float a, float b, float c) {
  const double product = static_cast<double>(a) * static_cast<double>(b);  // exact: 48 bits
  const double addend = static_cast<double>(c);
  const double sum = product + addend;
  uint64_t bits;
  std::memcpy(&bits, &sum, sizeof(bits));
  if ((bits & 0x7FF0000000000000u) == 0x7FF0000000000000u) {
    return static_cast<float>(sum);  // Inf or NaN, as the fused one
  }
  // The addition's rounding error, exactly (Knuth's two-sum).
  const double virtual_addend = sum - product;
  const double error = (product - (sum - virtual_addend)) + (addend - virtual_addend);
  if (error != 0.0 && (bits & 1u) == 0) {
    // Round to odd: one step toward the exact value makes the last bit odd.
    if ((error > 0.0) == (sum > 0.0)) {
      ++bits;
    } else {
      --bits;
    }
  }
  double odd;
  std::memcpy(&odd, &bits, sizeof(odd));
  return static_cast<float>(odd);
}

void QuantizedProductPortable(const QuantizedProductArgs& args, int64_t panel_begin,
                              int64_t panel_end) {
  const QuantizedShape& shape = args.shape;
  const int64_t groups = shape.groups(), padded_in = shape.padded_in();
  const int64_t panel_bytes = shape.code_bytes() / shape.panels();
  const bool relu_squared = args.epilogue == QuantizedEpilogue::kReluSquared;
  const bool int4 = shape.kind == WeightQuantization::kInt4;
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const int64_t outputs = shape.out - p * kPanel < kPanel ? shape.out - p * kPanel : kPanel;
    const uint8_t* codes = args.codes + p * panel_bytes;
    const uint16_t* scales = args.scales + p * groups * kPanel;
    for (int64_t r = 0; r < args.rows; r += kRows) {
      const int64_t rows = args.rows - r < kRows ? args.rows - r : kRows;
      const int8_t* xq = args.x.xq + r * padded_in;
      const float* xs = args.x.xs + r * groups;
      const int32_t* xsum = args.x.xsum + r * groups;
      float* y = args.y + r * args.y_stride + p * kPanel;
      const TileFn tile = int4 ? TileOf<true>(rows) : TileOf<false>(rows);
      tile(shape, codes, scales, xq, xs, xsum, y, args.y_stride, outputs, relu_squared);
    }
  }
}

}  // namespace linserve

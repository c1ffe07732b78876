// engine/cpu/quantized_kernel.h in plain C++ for any CPU, with the same bits
// as the VNNI loop: the int32 sums are exact whatever their order, and the
// float step per group is std::fma, the one rounding the VNNI loop's
// vfmadd makes. Compiled with -ffp-contract=off, so that no build fuses the
// s * xs product into the fma or anything else into anything
// (engine/cpu/CMakeLists.txt). Tiles of up to 4 rows x 1 panel: each code is
// decoded once per tile.

#include <cmath>
#include <cstdint>

#include "engine/cpu/quantized_kernel.h"

namespace linserve {
namespace {

constexpr int64_t kPanel = 16;
constexpr int kRows = 4;

// R rows of one panel: `block0` is the panel's first (panel, group) block,
// `scales` its first 16 scales, `xq`/`xs`/`xsum` the tile's first row.
template <int R>
void Tile(const QuantizedShape& shape, const uint8_t* block0, const uint16_t* scales,
          const int8_t* xq, const float* xs, const int32_t* xsum, float* y, int64_t y_stride,
          int64_t outputs, bool relu_squared) {
  const int64_t groups = shape.groups(), group = shape.group, padded_in = shape.padded_in();
  const bool int4 = shape.kind == WeightQuantization::kInt4;
  const int64_t block_bytes = int4 ? group * kPanel / 2 : group * kPanel;
  const int32_t zero = shape.zero_point();
  float sums[R][kPanel] = {};
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* block = block0 + g * block_bytes;
    int32_t isum[R][kPanel];
    for (int r = 0; r < R; ++r) {
      for (int64_t l = 0; l < kPanel; ++l) isum[r][l] = -zero * xsum[r * groups + g];
    }
    // Input i of the group: line i / 4 (int8) or i / 8 (int4), byte l * 4 + i % 4.
    for (int64_t i = 0; i < group; ++i) {
      const int64_t line = int4 ? i / 8 : i / 4;
      const int shift = int4 && (i % 8) >= 4 ? 4 : 0;
      int32_t code[kPanel];
      for (int64_t l = 0; l < kPanel; ++l) {
        const int32_t byte = block[line * 64 + l * 4 + i % 4];
        code[l] = int4 ? (byte >> shift) & 0x0F : byte;
      }
      for (int r = 0; r < R; ++r) {
        const int32_t x = xq[r * padded_in + g * group + i];
        for (int64_t l = 0; l < kPanel; ++l) isum[r][l] += code[l] * x;
      }
    }
    float scale[kPanel];
    for (int64_t l = 0; l < kPanel; ++l) scale[l] = HalfToFloat(scales[g * kPanel + l]);
    for (int r = 0; r < R; ++r) {
      const float row_scale = xs[r * groups + g];
      for (int64_t l = 0; l < kPanel; ++l) {
        const float product = scale[l] * row_scale;
        sums[r][l] = std::fma(static_cast<float>(isum[r][l]), product, sums[r][l]);
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

}  // namespace

void QuantizedProductPortable(const QuantizedProductArgs& args, int64_t panel_begin,
                              int64_t panel_end) {
  const QuantizedShape& shape = args.shape;
  const int64_t groups = shape.groups(), padded_in = shape.padded_in();
  const int64_t panel_bytes = shape.code_bytes() / shape.panels();
  const bool relu_squared = args.epilogue == QuantizedEpilogue::kReluSquared;
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
      switch (rows) {
        case 1:
          Tile<1>(shape, codes, scales, xq, xs, xsum, y, args.y_stride, outputs, relu_squared);
          break;
        case 2:
          Tile<2>(shape, codes, scales, xq, xs, xsum, y, args.y_stride, outputs, relu_squared);
          break;
        case 3:
          Tile<3>(shape, codes, scales, xq, xs, xsum, y, args.y_stride, outputs, relu_squared);
          break;
        default:
          Tile<4>(shape, codes, scales, xq, xs, xsum, y, args.y_stride, outputs, relu_squared);
      }
    }
  }
}

}  // namespace linserve

// engine/cpu/quantized_kernel.h with AVX-512 VNNI: vpdpbusd multiplies 64
// unsigned code bytes by a row's 4 activation bytes (broadcast) and adds
// each lane's 4 products into 16 int32 sums, so one instruction does 64
// multiply-adds of one (panel, group) block. Each group's int32 sums start
// at -z * xsum (so the offset codes need no correction afterwards) and, being
// exact, may be split and added in any order; the float step per group is
// the header's, one fused multiply-add per lane, in group order.
//
// Tiles of R rows x C panels keep R x C float sums and R x C int32 sums in
// registers (4 x 3: 24 of the 32, with 3 weight lines and a broadcast). On
// the 0.1B RWKV-7 shape's matrices, 256 rows on one core, 4 x 3 ran 490 to
// 610 GOP/s; 4 x 2 and 3 x 4 up to 8% slower, 2 x 4 up to 20%. One row, the
// decode case, is memory-bound, and takes its own loop (OneRowPanel): one
// panel at a time, its codes in address order.
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mf16c
// (engine/cpu/CMakeLists.txt). No standard-library templates and no inline
// functions of other headers: a copy compiled here for AVX-512 could be the
// one the linker keeps for the whole program (engine/cpu/fixed_order_kernel.h).

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "engine/cpu/quantized_kernel.h"

namespace linserve {
namespace {

constexpr int64_t kPanel = 16;
constexpr int kRows = 4;        // the largest tile of several rows: 4 x 3
constexpr int kCols = 3;
constexpr int64_t kOneRowAhead = 8192;  // OneRowPanel's codes, fetched this far ahead
// Rows of a block whose activations stay in L2 while its panels pass over
// them (the codes of a tile's panels are read again for each R rows).
constexpr int64_t kBlockActivationBytes = int64_t{256} << 10;
constexpr int64_t kMinRowsPerBlock = 16;

// What a tile reads and writes, at its first row and first panel.
struct TileArgs {
  const uint8_t* codes;    // the first panel's codes
  int64_t panel_bytes;     // from one panel's codes to the next
  // A one-row tile (a several-row call's last row): from this tile's codes
  // to the next tile's, fetched into L2 on the way, past the end of a span
  // too (when one-row products took these tiles, stopping at a span's end
  // left a third of them unfetched, and 0.1B RWKV-7 decode took 8.5 against
  // 8.0 ms in int8, 6.0 against 5.2 in int4).
  int64_t ahead;
  // A tile of several rows: a slice of the next tile's codes, fetched into
  // L2 over this call's groups, so that each of a row block's passes over
  // the tile fetches its share (see QuantizedProductVnni).
  const uint8_t* fetch = nullptr;
  int64_t fetch_lines = 0;
  const uint16_t* scales;  // the first panel's scales
  int64_t panel_scales;    // from one panel's scales to the next
  int64_t groups;
  const int8_t* xq;  // the first row's activations; rows padded_in apart
  int64_t padded_in;
  const float* xs;  // the first row's scales and sums; rows `groups` apart
  const int32_t* xsum;
  float* y;
  int64_t y_stride;
  int last_outputs;  // outputs stored of the tile's last panel
  bool relu_squared;
};

int32_t Load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// R rows x C panels, groups of kGroup values, the codes int4 or int8. For
// one row, the int32 sums of a group are split in two chains (even and odd
// lines) so that vpdpbusd's latency does not bound the loop.
template <int R, int C, bool kInt4, int kGroup>
void Tile(const TileArgs& a) {
  constexpr int kLines = kInt4 ? kGroup / 8 : kGroup / 4;  // 64-byte lines per block
  constexpr int kBlockBytes = kLines * 64;
  constexpr int32_t kZero = kInt4 ? 8 : 128;
  constexpr int kChains = R == 1 ? 2 : 1;
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  __m512 y[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) y[r][c] = _mm512_setzero_ps();
  }
  const uint8_t* fetch = a.fetch;
  int64_t owed = 0;
  for (int64_t g = 0; g < a.groups; ++g) {
    const uint8_t* block = a.codes + g * kBlockBytes;
    const int8_t* x = a.xq + g * kGroup;
    if (R > 1) {
      // fetch_lines / groups lines a group, the remainder carried.
      for (owed += a.fetch_lines; owed >= a.groups; owed -= a.groups) {
        _mm_prefetch(reinterpret_cast<const char*>(fetch), _MM_HINT_T1);
        fetch += 64;
      }
    }
    __m512i sum[R][C][kChains];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i start = _mm512_set1_epi32(-kZero * a.xsum[r * a.groups + g]);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        sum[r][c][0] = start;
        if (kChains == 2) sum[r][c][kChains - 1] = _mm512_setzero_si512();
      }
    }
#pragma GCC unroll 16
    for (int j = 0; j < kLines; ++j) {
      const int chain = j % kChains;
      if (R == 1) {
        // Past the last panel this names memory beyond the codes: a prefetch
        // never faults, and the address is formed as an integer.
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(block) +
                                                     c * a.panel_bytes + a.ahead + j * 64),
                       _MM_HINT_T1);
        }
      }
      if (kInt4) {
        // The low nibbles hold inputs 8j..8j+3, the high ones 8j+4..8j+7.
        __m512i w[C];
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          w[c] = _mm512_and_si512(_mm512_loadu_si512(block + c * a.panel_bytes + j * 64),
                                  low_nibbles);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i in = _mm512_set1_epi32(Load32(x + r * a.padded_in + 8 * j));
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) {
            sum[r][c][chain] = _mm512_dpbusd_epi32(sum[r][c][chain], w[c], in);
          }
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const __m512i line = _mm512_loadu_si512(block + c * a.panel_bytes + j * 64);
          w[c] = _mm512_and_si512(_mm512_srli_epi16(line, 4), low_nibbles);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i in = _mm512_set1_epi32(Load32(x + r * a.padded_in + 8 * j + 4));
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) {
            sum[r][c][chain] = _mm512_dpbusd_epi32(sum[r][c][chain], w[c], in);
          }
        }
      } else {
        __m512i w[C];
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          w[c] = _mm512_loadu_si512(block + c * a.panel_bytes + j * 64);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i in = _mm512_set1_epi32(Load32(x + r * a.padded_in + 4 * j));
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) {
            sum[r][c][chain] = _mm512_dpbusd_epi32(sum[r][c][chain], w[c], in);
          }
        }
      }
    }
    // y = fma(float(isum - z xsum), s xs, y), s xs rounded first.
    __m512 scale[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      scale[c] = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.scales + c * a.panel_scales +
                                                               g * kPanel)));
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 row_scale = _mm512_set1_ps(a.xs[r * a.groups + g]);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        __m512i exact = sum[r][c][0];
        if (kChains == 2) exact = _mm512_add_epi32(exact, sum[r][c][kChains - 1]);
        y[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(scale[c], row_scale),
                                  y[r][c]);
      }
    }
  }
  const __mmask16 last_mask = static_cast<__mmask16>((1u << a.last_outputs) - 1);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      __m512 out = y[r][c];
      if (a.relu_squared) {
        // max_ps returns its second operand for a NaN: 0, as the reference.
        out = _mm512_max_ps(out, _mm512_setzero_ps());
        out = _mm512_mul_ps(out, out);
      }
      float* to = a.y + r * a.y_stride + c * kPanel;
      if (c + 1 < C || a.last_outputs == kPanel) {
        _mm512_storeu_ps(to, out);
      } else {
        _mm512_mask_storeu_ps(to, last_mask, out);
      }
    }
  }
}

using TileFn = void (*)(const TileArgs&);

template <int R, bool kInt4, int kGroup>
TileFn TileOfPanels(int panels) {
  switch (panels) {
    case 1: return &Tile<R, 1, kInt4, kGroup>;
    case 2: return &Tile<R, 2, kInt4, kGroup>;
    case 3: return &Tile<R, 3, kInt4, kGroup>;
    default: return &Tile<R, kCols, kInt4, kGroup>;
  }
}

template <bool kInt4, int kGroup>
TileFn TileOfShape(int rows, int panels) {
  static_assert(kRows == 4 && kCols <= 4, "TileOfShape covers 4 x 4");
  switch (rows) {
    case 1: return TileOfPanels<1, kInt4, kGroup>(panels);
    case 2: return TileOfPanels<2, kInt4, kGroup>(panels);
    case 3: return TileOfPanels<3, kInt4, kGroup>(panels);
    default: return TileOfPanels<4, kInt4, kGroup>(panels);
  }
}

TileFn AnyTile(bool int4, int64_t group, int rows, int panels) {
  if (int4) {
    return group == 64 ? TileOfShape<true, 64>(rows, panels) : TileOfShape<true, 32>(rows, panels);
  }
  return group == 64 ? TileOfShape<false, 64>(rows, panels) : TileOfShape<false, 32>(rows, panels);
}

// One row through one panel (its first row's args), kInFlight groups at a
// time. The panel's codes are read in address order, one stream, where a
// tile of four panels read four interleaved streams: a pure read in that
// tile's order got 17-22 GB/s against 25-30 in address order, and Qwen3.5
// 0.8B's int4 products 17.4-18.4 ms a token against 14.2-16.5 this way
// (bench/RESULTS.md). Each group's int32 sums are their own chain, kInFlight
// chains in flight, and the float step per group runs in group order: the
// bits of any tile. Codes are fetched kOneRowAhead bytes ahead into L1
// (without, Qwen3.5 0.8B's int8 products read 12-13 GB/s; into L2 they took
// 31.0 ms a token against 28.4-28.5 into L1, alternated). 4-bit groups take
// 8 in flight, 8-bit ones 4: on the 0.8B shape's 4-bit head (127 MB) one
// row read 27.4 GB/s that way against 21.5 with 4 in flight and no fetch,
// the hardware's prefetch alone (a plain read 28.2; bench/RESULTS.md).
template <bool kInt4, int kGroup, int kInFlight>
void OneRowPanelGroups(const TileArgs& a, int64_t first_group, __m512& y) {
  constexpr int kLines = kInt4 ? kGroup / 8 : kGroup / 4;
  constexpr int kBlockBytes = kLines * 64;
  constexpr int32_t kZero = kInt4 ? 8 : 128;
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  __m512i sum[kInFlight];
#pragma GCC unroll 8
  for (int k = 0; k < kInFlight; ++k) {
    const int64_t g = first_group + k;
    const uint8_t* block = a.codes + g * kBlockBytes;
    const int8_t* x = a.xq + g * kGroup;
    sum[k] = _mm512_set1_epi32(-kZero * a.xsum[g]);
#pragma GCC unroll 16
    for (int j = 0; j < kLines; ++j) {
      // Past the last panel this names memory beyond the codes: a prefetch
      // never faults, and the address is formed as an integer.
      _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(block) +
                                                 kOneRowAhead + j * 64),
                   _MM_HINT_T0);
      const __m512i line = _mm512_loadu_si512(block + j * 64);
      if (kInt4) {
        // The low nibbles hold inputs 8j..8j+3, the high ones 8j+4..8j+7.
        sum[k] = _mm512_dpbusd_epi32(sum[k], _mm512_and_si512(line, low_nibbles),
                                     _mm512_set1_epi32(Load32(x + 8 * j)));
        sum[k] = _mm512_dpbusd_epi32(sum[k],
                                     _mm512_and_si512(_mm512_srli_epi16(line, 4), low_nibbles),
                                     _mm512_set1_epi32(Load32(x + 8 * j + 4)));
      } else {
        sum[k] = _mm512_dpbusd_epi32(sum[k], line, _mm512_set1_epi32(Load32(x + 4 * j)));
      }
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < kInFlight; ++k) {
    const int64_t g = first_group + k;
    const __m512 scale = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.scales + g * kPanel)));
    y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[k]),
                        _mm512_mul_ps(scale, _mm512_set1_ps(a.xs[g])), y);
  }
}

template <bool kInt4, int kGroup>
void OneRowPanel(const TileArgs& a) {
  constexpr int kInFlight = kInt4 ? 8 : 4;
  __m512 y = _mm512_setzero_ps();
  int64_t g = 0;
  for (; g + kInFlight <= a.groups; g += kInFlight) {
    OneRowPanelGroups<kInt4, kGroup, kInFlight>(a, g, y);
  }
  for (; g < a.groups; ++g) OneRowPanelGroups<kInt4, kGroup, 1>(a, g, y);
  if (a.relu_squared) {
    // max_ps returns its second operand for a NaN: 0, as the reference.
    y = _mm512_max_ps(y, _mm512_setzero_ps());
    y = _mm512_mul_ps(y, y);
  }
  if (a.last_outputs == kPanel) {
    _mm512_storeu_ps(a.y, y);
  } else {
    _mm512_mask_storeu_ps(a.y, static_cast<__mmask16>((1u << a.last_outputs) - 1), y);
  }
}

TileFn AnyOneRowPanel(bool int4, int64_t group) {
  if (int4) return group == 64 ? &OneRowPanel<true, 64> : &OneRowPanel<true, 32>;
  return group == 64 ? &OneRowPanel<false, 64> : &OneRowPanel<false, 32>;
}

__mmask16 FirstLanes(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : static_cast<__mmask16>(count <= 0 ? 0 : (1u << count) - 1);
}

// The largest magnitude of group g of a row of `in` values. max_ps returns
// its second operand for a NaN: a NaN does not raise it.
template <int kGroup, bool kWhole>
float GroupLargest(const float* x, int64_t in, int64_t g) {
  __m512 largest = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int v = 0; v < kGroup / 16; ++v) {
    const int64_t first = g * kGroup + v * 16;
    const __m512 values = kWhole ? _mm512_loadu_ps(x + first)
                                 : _mm512_maskz_loadu_ps(FirstLanes(in - first), x + first);
    largest = _mm512_max_ps(_mm512_abs_ps(values), largest);
  }
  return _mm512_reduce_max_ps(largest);  // exact in any order
}

// Codes of group g (zeros past `in`), returning their sum. A NaN product is
// masked to 0 before the clamp; a group of zeros has an infinite inverse,
// and its 0 x Inf products are NaN, so its codes are 0 too.
template <int kGroup, bool kWhole>
int32_t QuantizeGroup(const float* x, int64_t in, int64_t g, float inverse, int8_t* xq) {
  const __m512 scale = _mm512_set1_ps(inverse);
  const __m512 low = _mm512_set1_ps(-127.0f), high = _mm512_set1_ps(127.0f);
  __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int v = 0; v < kGroup / 16; ++v) {
    const int64_t first = g * kGroup + v * 16;
    const __m512 values = kWhole ? _mm512_loadu_ps(x + first)
                                 : _mm512_maskz_loadu_ps(FirstLanes(in - first), x + first);
    __m512 scaled = _mm512_mul_ps(values, scale);
    scaled = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(scaled, scaled, _CMP_ORD_Q), scaled);
    scaled = _mm512_min_ps(_mm512_max_ps(scaled, low), high);
    // Rounded to nearest even (the MXCSR default, as the plain loop's).
    const __m512i q = _mm512_cvtps_epi32(scaled);
    sum = _mm512_add_epi32(sum, q);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + first), _mm512_cvtepi32_epi8(q));
  }
  return _mm512_reduce_add_epi32(sum);
}

// One row, 16 groups at a time: their maxima first, then both divisions for
// all 16 in one instruction each, then the codes. No group waits on the
// one before it, where one group at a time waited on its own reductions and
// divisions.
template <int kGroup>
void QuantizeRow(const float* x, int64_t in, int64_t groups, int8_t* xq, float* xs,
                 int32_t* xsum) {
  for (int64_t first = 0; first < groups; first += 16) {
    const int64_t count = groups - first < 16 ? groups - first : 16;
    alignas(64) float largest[16] = {};
    for (int64_t i = 0; i < count; ++i) {
      const int64_t g = first + i;
      largest[i] = (g + 1) * kGroup <= in ? GroupLargest<kGroup, true>(x, in, g)
                                          : GroupLargest<kGroup, false>(x, in, g);
    }
    const __m512 a = _mm512_load_ps(largest);
    alignas(64) float inverse[16];
    _mm512_store_ps(inverse, _mm512_div_ps(_mm512_set1_ps(127.0f), a));
    _mm512_mask_storeu_ps(xs + first, FirstLanes(count),
                          _mm512_div_ps(a, _mm512_set1_ps(127.0f)));
    for (int64_t i = 0; i < count; ++i) {
      const int64_t g = first + i;
      xsum[g] = (g + 1) * kGroup <= in ? QuantizeGroup<kGroup, true>(x, in, g, inverse[i], xq)
                                       : QuantizeGroup<kGroup, false>(x, in, g, inverse[i], xq);
    }
  }
}

}  // namespace

void QuantizeActivationsVnni(const QuantizedShape& shape, const float* x, int64_t x_stride,
                             int64_t rows, int8_t* xq, float* xs, int32_t* xsum) {
  const int64_t in = shape.in, group = shape.group;
  const int64_t groups = (in + group - 1) / group;
  for (int64_t r = 0; r < rows; ++r) {
    if (group == 64) {
      QuantizeRow<64>(x + r * x_stride, in, groups, xq + r * groups * group, xs + r * groups,
                      xsum + r * groups);
    } else {
      QuantizeRow<32>(x + r * x_stride, in, groups, xq + r * groups * group, xs + r * groups,
                      xsum + r * groups);
    }
  }
}

void QuantizedProductVnni(const QuantizedProductArgs& args, int64_t panel_begin,
                          int64_t panel_end) {
  // The header's inline members are not called here (see the top).
  const int64_t out = args.shape.out, group = args.shape.group;
  const int64_t groups = (args.shape.in + group - 1) / group;
  const int64_t padded_in = groups * group;
  const bool int4 = args.shape.kind == WeightQuantization::kInt4;
  const int64_t panel_bytes = int4 ? groups * group * kPanel / 2 : groups * group * kPanel;
  if (args.rows == 1) {
    const TileFn panel_fn = AnyOneRowPanel(int4, group);
    TileArgs tile;
    tile.panel_bytes = panel_bytes;
    tile.ahead = 0;
    tile.panel_scales = groups * kPanel;
    tile.groups = groups;
    tile.padded_in = padded_in;
    tile.y_stride = args.y_stride;
    tile.relu_squared = args.epilogue == QuantizedEpilogue::kReluSquared;
    tile.xq = args.x.xq;
    tile.xs = args.x.xs;
    tile.xsum = args.x.xsum;
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      const int64_t end_output = (p + 1) * kPanel;
      tile.codes = args.codes + p * panel_bytes;
      tile.scales = args.scales + p * groups * kPanel;
      tile.last_outputs =
          static_cast<int>(end_output <= out ? kPanel : out - (end_output - kPanel));
      tile.y = args.y + p * kPanel;
      panel_fn(tile);
    }
    return;
  }
  const int cols = kCols;
  int64_t block_rows = kBlockActivationBytes / padded_in;
  block_rows = block_rows < kMinRowsPerBlock ? kMinRowsPerBlock : block_rows;
  for (int64_t first = 0; first < args.rows; first += block_rows) {
    const int64_t last_row = first + block_rows < args.rows ? first + block_rows : args.rows;
    for (int64_t p = panel_begin; p < panel_end; p += cols) {
      const int panels = static_cast<int>(panel_end - p < cols ? panel_end - p : cols);
      const int64_t end_output = (p + panels) * kPanel;
      TileArgs tile;
      tile.codes = args.codes + p * panel_bytes;
      tile.panel_bytes = panel_bytes;
      tile.ahead = cols * panel_bytes;
      tile.scales = args.scales + p * groups * kPanel;
      tile.panel_scales = groups * kPanel;
      tile.groups = groups;
      tile.padded_in = padded_in;
      tile.y_stride = args.y_stride;
      tile.last_outputs =
          static_cast<int>(end_output <= out ? kPanel : out - (end_output - kPanel));
      tile.relu_squared = args.epilogue == QuantizedEpilogue::kReluSquared;
      // The next tile's codes, a share in each pass of several rows, where
      // the hardware's prefetch alone left the first pass waiting on memory:
      // 32 rows through 32 matrices of 3584 x 1024 in 8 bits ran about 525
      // GFLOP/s from memory that way, 577-597 this way, 657 from the caches
      // (bench/RESULTS.md).
      const int64_t next_tile_lines = cols * panel_bytes / 64;
      const int64_t passes = (last_row - first + kRows - 1) / kRows;
      for (int64_t r = first; r < last_row; r += kRows) {
        const int rows = static_cast<int>(last_row - r < kRows ? last_row - r : kRows);
        const int64_t pass = (r - first) / kRows;
        const int64_t fetch_first = pass * next_tile_lines / passes;
        tile.fetch = tile.codes + cols * panel_bytes + fetch_first * 64;
        tile.fetch_lines = (pass + 1) * next_tile_lines / passes - fetch_first;
        tile.xq = args.x.xq + r * padded_in;
        tile.xs = args.x.xs + r * groups;
        tile.xsum = args.x.xsum + r * groups;
        tile.y = args.y + r * args.y_stride + p * kPanel;
        AnyTile(int4, group, rows, panels)(tile);
      }
    }
  }
}

}  // namespace linserve

// engine/cpu/amx_kernel.h's bfloat16 product. Compiled with -mamx-tile
// -mamx-bf16 -mavx512f (engine/cpu/CMakeLists.txt), and only called where
// cpu_kernels.h found the CPU able to run it.

#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstring>

#include "engine/cpu/amx_kernel.h"

namespace linserve {
namespace {

constexpr int64_t kTileRows = 16;
constexpr int64_t kPairsPerTile = 16;  // a B tile: 16 pairs of one block, 1 KB
constexpr int64_t kInputsPerTile = 32;
// Rows whose bfloat16 inputs stay in L2 while a block pair's weights pass
// over them (each block pair reads every row of the range again).
constexpr int64_t kRangeInputBytes = int64_t{512} << 10;

// LDTILECFG's 64 bytes, palette 1.
struct TileShapes {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t bytes_per_row[16];
  uint8_t rows[16];
};

// Tiles 0-3: C[row tile][block] at 2 r + b; 4, 5: A of the two row tiles;
// 6, 7: B of the two blocks. All 16 rows of 64 bytes.
void LoadShapes() {
  TileShapes shapes;
  std::memset(&shapes, 0, sizeof(shapes));
  shapes.palette = 1;
  for (int t = 0; t < 8; ++t) {
    shapes.rows[t] = kTileRows;
    shapes.bytes_per_row[t] = 64;
  }
  _tile_loadconfig(&shapes);
}

// Past the matrix, a block's last partial B tile is read from a copy with
// zero pairs after it.
struct TailTiles {
  alignas(64) uint16_t block[2][kPairsPerTile * 32];
};

// Two row tiles (32 rows from `x`, `x_stride` apart) times `nb` (1 or 2)
// blocks from `w` (`block_stride` values apart): every input chunk, then the
// sums stored to `y`. kTwoRows: the second row tile is used.
template <bool kTwoRows, bool kTwoBlocks>
void Tiles(const uint16_t* w, int64_t block_stride, int64_t pairs, const TailTiles* tail,
           const uint16_t* x, int64_t x_stride, float* y, int64_t y_stride) {
  _tile_zero(0);
  if (kTwoBlocks) _tile_zero(1);
  if (kTwoRows) _tile_zero(2);
  if (kTwoRows && kTwoBlocks) _tile_zero(3);
  const int64_t x_bytes = x_stride * 2;
  const int64_t full = pairs / kPairsPerTile;
  const int64_t chunks = (pairs + kPairsPerTile - 1) / kPairsPerTile;
  for (int64_t c = 0; c < chunks; ++c) {
    const uint16_t* b0 = c < full ? w + c * kPairsPerTile * 32 : tail->block[0];
    const uint16_t* b1 = c < full ? w + block_stride + c * kPairsPerTile * 32 : tail->block[1];
    _tile_loadd(4, x + c * kInputsPerTile, x_bytes);
    _tile_loadd(6, b0, 64);
    if (kTwoBlocks) _tile_loadd(7, b1, 64);
    if (kTwoRows) _tile_loadd(5, x + kTileRows * x_stride + c * kInputsPerTile, x_bytes);
    _tile_dpbf16ps(0, 4, 6);
    if (kTwoBlocks) _tile_dpbf16ps(1, 4, 7);
    if (kTwoRows) _tile_dpbf16ps(2, 5, 6);
    if (kTwoRows && kTwoBlocks) _tile_dpbf16ps(3, 5, 7);
  }
  const int64_t y_bytes = y_stride * 4;
  _tile_stored(0, y, y_bytes);
  if (kTwoBlocks) _tile_stored(1, y + 16, y_bytes);
  if (kTwoRows) _tile_stored(2, y + kTileRows * y_stride, y_bytes);
  if (kTwoRows && kTwoBlocks) _tile_stored(3, y + kTileRows * y_stride + 16, y_bytes);
}

using TilesFn = void (*)(const uint16_t*, int64_t, int64_t, const TailTiles*, const uint16_t*,
                         int64_t, float*, int64_t);

TilesFn TilesOf(bool two_rows, bool two_blocks) {
  if (two_rows) return two_blocks ? &Tiles<true, true> : &Tiles<true, false>;
  return two_blocks ? &Tiles<false, true> : &Tiles<false, false>;
}

void ReluSquared(float* y, int64_t y_stride, int64_t rows, int64_t outputs) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < outputs; o += 16) {
      __m512 v = _mm512_max_ps(_mm512_loadu_ps(y + r * y_stride + o), _mm512_setzero_ps());
      _mm512_storeu_ps(y + r * y_stride + o, _mm512_mul_ps(v, v));
    }
  }
}

}  // namespace

void PackedBf16ProductAmx(const AmxBf16Args& a, int64_t block_begin, int64_t block_end) {
  if (a.rows <= 0 || block_begin >= block_end) return;
  LoadShapes();
  const int64_t block_stride = a.pairs * 32;
  // The last row tiles of the call, when fewer than 32 rows are left (their
  // inputs padded with zero rows by the caller): sums stored here first.
  const int64_t whole = a.rows / (2 * kTileRows) * (2 * kTileRows);
  const int64_t left = a.rows - whole;
  alignas(64) float spare_y[2 * kTileRows * 32];
  TailTiles tail;
  const int64_t tail_pairs = a.pairs % kPairsPerTile;
  const int64_t range_rows =
      (kRangeInputBytes / (a.x_stride * 2) / (2 * kTileRows) + 1) * (2 * kTileRows);
  for (int64_t first_row = 0; first_row < a.rows; first_row += range_rows) {
    const int64_t last_row = first_row + range_rows < a.rows ? first_row + range_rows : a.rows;
    for (int64_t b = block_begin; b < block_end; b += 2) {
      const bool two_blocks = b + 1 < block_end;
      const uint16_t* w = a.w + b * block_stride;
      if (tail_pairs != 0) {
        std::memset(&tail, 0, sizeof(tail));
        const int64_t at = a.pairs / kPairsPerTile * kPairsPerTile * 32;
        std::memcpy(tail.block[0], w + at, tail_pairs * 64);
        if (two_blocks) std::memcpy(tail.block[1], w + block_stride + at, tail_pairs * 64);
      }
      const int64_t outputs = two_blocks ? 32 : 16;
      for (int64_t r = first_row; r < last_row; r += 2 * kTileRows) {
        if (r < whole) {
          float* y = a.y + r * a.y_stride + b * 16;
          TilesOf(true, two_blocks)(w, block_stride, a.pairs, &tail, a.x + r * a.x_stride,
                                    a.x_stride, y, a.y_stride);
          if (a.relu_squared) ReluSquared(y, a.y_stride, 2 * kTileRows, outputs);
          continue;
        }
        TilesOf(left > kTileRows, two_blocks)(w, block_stride, a.pairs, &tail,
                                              a.x + r * a.x_stride, a.x_stride, spare_y, 32);
        if (a.relu_squared) ReluSquared(spare_y, 32, left, outputs);
        for (int64_t i = 0; i < left; ++i) {
          std::memcpy(a.y + (r + i) * a.y_stride + b * 16, spare_y + i * 32, outputs * 4);
        }
      }
    }
  }
  _tile_release();
}

double AmxBf16PeakGflops(double seconds) {
  LoadShapes();
  alignas(64) static uint16_t ones[kTileRows * 32];
  for (uint16_t& v : ones) v = 0x3F80;  // 1.0
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  constexpr int64_t kRounds = 1 << 16;
  int64_t done = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0.0;
  do {
    for (int64_t i = 0; i < kRounds; ++i) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    done += kRounds;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < seconds);
  alignas(64) float sink[kTileRows * 16];
  _tile_stored(0, sink, 64);
  _tile_release();
  // 4 tiles x 16 rows x 16 outputs x 32 inputs x 2 flops per round.
  return sink[0] >= 0.0f ? 4.0 * done * 16 * 16 * 32 * 2 / elapsed / 1e9 : 0.0;
}

}  // namespace linserve

#include "engine/cpu/cpu_bf16_product.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <torch/types.h>

#include "engine/cpu/amx_kernel.h"
#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/engine_threads.h"
#include "engine/cpu/huge_page_tensor.h"
#include "engine/cpu/product_spans.h"

namespace linserve {
namespace {

constexpr int64_t kBlock = 16;     // outputs per 64-byte line of the layout
constexpr int kBlocksPerTile = 5;  // a tile's outputs: 5 x 16
constexpr int kRowsPerTile = 4;

// Multiply-adds per span of the pool: about 10 us of work, so that a span's
// start costs nothing beside it.
constexpr int64_t kMultiplyAddsPerSpan = int64_t{1} << 20;

// RT rows x NB blocks of 16 outputs (at most 4 x 5: 20 sums, 5 weight lines
// and an input pair in 26 of the 32 registers; with 32 rows of the 0.1B
// shape's weights streamed from memory, 4 x 5 ran 216 GFLOP/s, 4 x 4 209,
// 8 x 3 205, 4 x 6 210). `w` is the first block's start in the
// packed matrix (blocks `block_stride` values apart), `x` the first row's
// input pairs (rows `x_stride` pairs apart), `y` the first row's first output
// (rows `y_stride` apart). Compiled for AVX-512 BF16 alone, and only called
// after HasCpuBf16Product checked the CPU; the loops are unrolled so that the
// sums stay in registers. The weights `ahead` blocks on (the next tile's)
// are fetched into L2 on the way: a weight read from memory (the 0.1B head,
// 100 MB) otherwise ran at 188 against 210 GFLOP/s with 32 rows. The last
// tile of a span passes 0 (a fetch of its own lines, which costs nothing):
// the next tile is another span's, likely another thread's, and fetching it
// here too cost batch-1 decode most of its gain from a second thread.
template <int RT, int NB, bool kReluSquared>
__attribute__((target("avx512f,avx512bf16"))) void Tile(const uint16_t* w, int64_t block_stride,
                                                        int64_t ahead, int64_t pairs,
                                                        const uint32_t* x, int64_t x_stride,
                                                        float* y, int64_t y_stride) {
  __m512 sum[RT][NB];
#pragma GCC unroll 8
  for (int r = 0; r < RT; ++r) {
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b) sum[r][b] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < pairs; ++i) {
    __m512bh weights[NB];
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b) {
      weights[b] = (__m512bh)_mm512_loadu_si512(w + b * block_stride + i * 2 * kBlock);
      // Past the last tile this names memory beyond the matrix: a prefetch
      // never faults, and the address is formed as an integer.
      _mm_prefetch(reinterpret_cast<const char*>(
                       reinterpret_cast<uintptr_t>(w) +
                       sizeof(uint16_t) * ((ahead + b) * block_stride + i * 2 * kBlock)),
                   _MM_HINT_T1);
    }
#pragma GCC unroll 8
    for (int r = 0; r < RT; ++r) {
      const __m512bh inputs = (__m512bh)_mm512_set1_epi32(static_cast<int>(x[r * x_stride + i]));
#pragma GCC unroll 8
      for (int b = 0; b < NB; ++b) sum[r][b] = _mm512_dpbf16_ps(sum[r][b], weights[b], inputs);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < RT; ++r) {
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b) {
      __m512 out = sum[r][b];
      if (kReluSquared) {
        out = _mm512_max_ps(out, _mm512_setzero_ps());
        out = _mm512_mul_ps(out, out);
      }
      _mm512_storeu_ps(y + r * y_stride + b * kBlock, out);
    }
  }
}

// n float32 values to bfloat16, rounded to nearest even as Tensor::to does
// (the instruction treats denormal inputs, below 1.2e-38, as zero).
__attribute__((target("avx512f,avx512bf16"))) void ToBfloat16(const float* x, int64_t n,
                                                              uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh rounded = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    std::memcpy(out + i, &rounded, sizeof(rounded));
  }
  for (; i < n; ++i) out[i] = c10::BFloat16(x[i]).x;
}

using TileFn = void (*)(const uint16_t*, int64_t, int64_t, int64_t, const uint32_t*, int64_t,
                        float*, int64_t);

template <int RT, bool kReluSquared>
TileFn TileOfBlocks(int blocks) {
  switch (blocks) {
    case 1: return &Tile<RT, 1, kReluSquared>;
    case 2: return &Tile<RT, 2, kReluSquared>;
    case 3: return &Tile<RT, 3, kReluSquared>;
    case 4: return &Tile<RT, 4, kReluSquared>;
    default: return &Tile<RT, 5, kReluSquared>;
  }
}

template <bool kReluSquared>
TileFn TileOf(int rows, int blocks) {
  switch (rows) {
    case 1: return TileOfBlocks<1, kReluSquared>(blocks);
    case 2: return TileOfBlocks<2, kReluSquared>(blocks);
    case 3: return TileOfBlocks<3, kReluSquared>(blocks);
    default: return TileOfBlocks<4, kReluSquared>(blocks);
  }
}

// The AMX family's product (engine/cpu/amx_kernel.h): rows padded with
// zeros to whole tiles of 32 inputs, spans of whole block pairs.
torch::Tensor AmxProduct(const torch::Tensor& packed, const torch::Tensor& x_f, int64_t rows,
                         Bf16Epilogue epilogue, torch::Tensor& y) {
  const int64_t blocks = packed.size(0), pairs = packed.size(1), in = pairs * 2;
  const int64_t stride = (in + 31) / 32 * 32;
  const int64_t left = rows % 32;
  const int64_t padded_rows = rows - left + (left == 0 ? 0 : left <= 16 ? 16 : 32);
  torch::Tensor inputs = torch::empty({padded_rows * stride}, torch::kBFloat16);
  auto* in_p = reinterpret_cast<uint16_t*>(inputs.data_ptr<at::BFloat16>());
  const float* x_p = x_f.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    ToBfloat16(x_p + r * in, in, in_p + r * stride);
    std::memset(in_p + r * stride + in, 0, (stride - in) * sizeof(uint16_t));
  }
  std::memset(in_p + rows * stride, 0, (padded_rows - rows) * stride * sizeof(uint16_t));
  AmxBf16Args args;
  args.w = reinterpret_cast<const uint16_t*>(packed.data_ptr<at::BFloat16>());
  args.blocks = blocks;
  args.pairs = pairs;
  args.x = in_p;
  args.x_stride = stride;
  args.rows = rows;
  args.y = y.data_ptr<float>();
  args.y_stride = blocks * kBlock;
  args.relu_squared = epilogue == Bf16Epilogue::kReluSquared;
  constexpr int64_t kBlocksPerUnit = 2;
  const int64_t units = (blocks + kBlocksPerUnit - 1) / kBlocksPerUnit;
  const int64_t grain = ProductUnitsPerSpan(rows * kBlocksPerUnit * kBlock * in,
                                            kBlocksPerUnit * kBlock * in * 2, kMultiplyAddsPerSpan);
  ParallelFor(units, grain, [&](int64_t begin, int64_t end) {
    PackedBf16ProductAmx(args, begin * kBlocksPerUnit, std::min(blocks, end * kBlocksPerUnit));
  });
  return y;
}

}  // namespace

bool HasCpuBf16Product() { return ActiveCpuHasAvx512Bf16(); }

bool CanPackBf16(int64_t out, int64_t in) {
  return out > 0 && in > 0 && out % kBlock == 0 && in % 2 == 0;
}

std::vector<int64_t> PackedBf16Shape(int64_t out, int64_t in) {
  return {out / kBlock, in / 2, kBlock, 2};
}

torch::Tensor PackBf16(const torch::Tensor& weight, torch::Tensor into) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == torch::kBFloat16 &&
                  CanPackBf16(weight.size(0), weight.size(1)),
              "PackBf16: a bfloat16 (out, in) matrix with out % 16 == 0 and in % 2 == 0, got ",
              weight.sizes(), " ", weight.scalar_type());
  const int64_t out = weight.size(0), in = weight.size(1);
  const std::vector<int64_t> shape = PackedBf16Shape(out, in);
  if (!into.defined()) into = EmptyInHugePages(shape, torch::kBFloat16);
  TORCH_CHECK(into.sizes() == torch::IntArrayRef(shape) && into.is_contiguous() &&
                  into.scalar_type() == torch::kBFloat16,
              "PackBf16: `into` must be a contiguous bfloat16 tensor of ", shape);
  into.copy_(weight.contiguous().view({out / kBlock, kBlock, in / 2, 2}).permute({0, 2, 1, 3}));
  return into;
}

bool IsPackedBf16(const torch::Tensor& t) {
  return t.dim() == 4 && t.size(2) == kBlock && t.size(3) == 2 &&
         t.scalar_type() == torch::kBFloat16;
}

torch::Tensor PackedBf16Product(const torch::Tensor& packed, const torch::Tensor& x,
                                Bf16Epilogue epilogue) {
  static const Bf16Loop loop = ActiveCpuHasAmx() ? Bf16Loop::kAmx : Bf16Loop::kAvx512;
  return PackedBf16ProductWith(loop, packed, x, epilogue);
}

torch::Tensor PackedBf16ProductWith(Bf16Loop loop, const torch::Tensor& packed,
                                    const torch::Tensor& x, Bf16Epilogue epilogue) {
  TORCH_CHECK(IsPackedBf16(packed) && packed.is_cpu() && packed.is_contiguous() &&
                  HasCpuBf16Product(),
              "PackedBf16Product: a packed CPU matrix on a CPU with AVX-512 BF16");
  TORCH_CHECK(loop == Bf16Loop::kAvx512 || ActiveCpuHasAmx(),
              "PackedBf16Product: the AMX loop where the AMX family is in force");
  const int64_t blocks = packed.size(0), pairs = packed.size(1);
  const int64_t out = blocks * kBlock, in = pairs * 2;
  TORCH_CHECK(x.size(-1) == in, "PackedBf16Product: x ", x.sizes(), " for ", in, " inputs");
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  const int64_t rows = x.numel() / in;
  torch::Tensor y = torch::empty(shape, torch::kFloat32);
  if (rows == 0) return y;
  // As few LibTorch calls as possible: at a few rows each costs about as
  // much as the product of a small matrix.
  const torch::Tensor x_f = x.scalar_type() == torch::kFloat32 ? x.contiguous()
                                                              : x.to(torch::kFloat32).contiguous();
  if (loop == Bf16Loop::kAmx) return AmxProduct(packed, x_f, rows, epilogue, y);
  torch::Tensor inputs = torch::empty({rows * in}, torch::kBFloat16);
  ToBfloat16(x_f.data_ptr<float>(), rows * in,
             reinterpret_cast<uint16_t*>(inputs.data_ptr<at::BFloat16>()));
  const auto* w = reinterpret_cast<const uint16_t*>(packed.data_ptr<at::BFloat16>());
  const auto* x_pairs = reinterpret_cast<const uint32_t*>(inputs.data_ptr<at::BFloat16>());
  float* y_p = y.data_ptr<float>();
  const int64_t block_stride = pairs * 2 * kBlock;
  const int64_t tiles = (blocks + kBlocksPerTile - 1) / kBlocksPerTile;  // of 80 outputs
  const int64_t grain = ProductUnitsPerSpan(rows * kBlocksPerTile * kBlock * in,
                                            kBlocksPerTile * kBlock * in * 2, kMultiplyAddsPerSpan);
  ParallelFor(tiles, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t first = t * kBlocksPerTile;
      const int nb = static_cast<int>(std::min<int64_t>(kBlocksPerTile, blocks - first));
      for (int64_t r = 0; r < rows; r += kRowsPerTile) {
        const int rt = static_cast<int>(std::min<int64_t>(kRowsPerTile, rows - r));
        const TileFn tile = epilogue == Bf16Epilogue::kReluSquared ? TileOf<true>(rt, nb)
                                                                   : TileOf<false>(rt, nb);
        tile(w + first * block_stride, block_stride, t + 1 < end ? nb : 0, pairs,
             x_pairs + r * pairs, pairs, y_p + r * out + first * kBlock, out);
      }
    }
  });
  return y;
}

}  // namespace linserve

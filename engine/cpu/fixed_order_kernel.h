#ifndef LINSERVE_ENGINE_FIXED_ORDER_KERNEL_H_
#define LINSERVE_ENGINE_FIXED_ORDER_KERNEL_H_

// The loops behind engine/cpu/fixed_order_product.h, one per kernel family
// (engine/cpu/cpu_kernels.h), each in a file of its own compiled for its
// instruction set. No LibTorch and no standard-library templates in those
// files: an inline function compiled there for AVX-512 could otherwise be
// the copy the linker keeps for the whole program.
//
// The order every family follows for output o of row r, the sum over k < in
// of x[r][k] w[o][k]: one running sum, k ascending from zero,
//   y = ((0 + x_0 w_0) + x_1 w_1) + x_2 w_2 + ...
// The SIMD families compute 16 outputs at once (one lane each, x[r][k]
// broadcast) and fuse each multiply-add (FMA), so AVX-512 and AVX2 give the
// same bits; the portable family rounds each product before the add, so its
// bits are its own. No step depends on the rows, the tile or the thread
// that computes it, and no sum is split.
//
// The weight is read as panels of 16 outputs: the 16 weights of input k in
// panel p are contiguous at w + p * panel_stride + k * k_stride. A packed
// weight (out/16, in, 16) has panel_stride in * 16 and k_stride 16; an (in,
// out) matrix stored row by row has panel_stride 16 and k_stride out.

#include <cstdint>

namespace linserve {

struct FixedOrderArgs {
  const float* x = nullptr;  // rows of `in` float32 inputs
  int64_t x_stride = 0;      // values from one row of x to the next
  const void* w = nullptr;   // the panels, float32 or bfloat16
  bool w_bf16 = false;       // the panels hold bfloat16 (uint16_t) rather than float32
  int64_t panel_stride = 0;  // values from one panel to the next
  int64_t k_stride = 0;      // values from one input's 16 weights to the next input's
  float* y = nullptr;        // rows of `out` float32 results
  int64_t y_stride = 0;      // values from one row of y to the next
  int64_t rows = 0;
  int64_t out = 0;  // outputs stored; the last panel's lanes past it are read, not stored
  int64_t in = 0;
};

// y[r][o] for every row and the outputs of panels [panel_begin, panel_end).
// Thread-safe for disjoint panel ranges. Each only where its family can run.
void FixedOrderProductAvx512(const FixedOrderArgs& args, int64_t panel_begin, int64_t panel_end);
void FixedOrderProductAvx2(const FixedOrderArgs& args, int64_t panel_begin, int64_t panel_end);
void FixedOrderProductPortable(const FixedOrderArgs& args, int64_t panel_begin,
                               int64_t panel_end);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_FIXED_ORDER_KERNEL_H_

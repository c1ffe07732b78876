#ifndef LINSERVE_ENGINE_FIXED_ORDER_KERNEL_H_
#define LINSERVE_ENGINE_FIXED_ORDER_KERNEL_H_

// The loops behind engine/fixed_order_product.h, one per kernel family
// (engine/cpu_kernels.h), each in a file of its own compiled for its
// instruction set. No LibTorch and no standard-library templates in those
// files: an inline function compiled there for AVX-512 could otherwise be
// the copy the linker keeps for the whole program.
//
// The order every family follows for output o of row r, sum over k < in of
// x[r][k] w[o][k]:
//   p_j = (((0 + x_j w_j) + x_{j+16} w_{j+16}) + x_{j+32} w_{j+32}) + ...
//         for the 16 lanes j = 0..15, k ascending (inputs past `in` are zero);
//   y = ((p_j + p_{j+8}) + (p_{j+4} + p_{j+12})) + ... : lanes j and j+8
//       added, then j and j+4, then j and j+2, then j and j+1.
// The AVX-512 and AVX2 families fuse each multiply-add (FMA), so they give
// the same bits; the portable family rounds the product before the add.
// No step depends on the rows, the tile or the thread that computes it.

#include <cstdint>

namespace linserve {

struct FixedOrderArgs {
  const float* x = nullptr;     // rows of `in` float32 inputs
  int64_t x_stride = 0;         // values from one row of x to the next
  const void* w = nullptr;      // `out` rows of `in` weights, float32 or bfloat16
  bool w_bf16 = false;          // w's rows are bfloat16 (uint16_t) rather than float32
  int64_t w_stride = 0;         // values from one row of w to the next
  float* y = nullptr;           // rows of `out` float32 results
  int64_t y_stride = 0;         // values from one row of y to the next
  int64_t rows = 0;
  int64_t out = 0;
  int64_t in = 0;
};

// y[r][o] for every row and o in [out_begin, out_end). Thread-safe for
// disjoint output ranges. Each only where its family can run.
void FixedOrderProductAvx512(const FixedOrderArgs& args, int64_t out_begin, int64_t out_end);
void FixedOrderProductAvx2(const FixedOrderArgs& args, int64_t out_begin, int64_t out_end);
void FixedOrderProductPortable(const FixedOrderArgs& args, int64_t out_begin, int64_t out_end);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_FIXED_ORDER_KERNEL_H_

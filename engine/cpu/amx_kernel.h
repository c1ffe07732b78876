#ifndef LINSERVE_ENGINE_CPU_AMX_KERNEL_H_
#define LINSERVE_ENGINE_CPU_AMX_KERNEL_H_

// The bfloat16 product on AMX tiles (TDPBF16PS), from the packed layout of
// engine/cpu/cpu_bf16_product.h: its (out/16, in/2, 16, 2) blocks are AMX
// B-tile rows as they lie, 16 input pairs of one block a 1 KB tile, so the
// weights keep their one copy. Only called where ActiveCpuHasAmx().
//
// A tile holds 16 rows; C tiles 2 x 2 (32 rows x 32 outputs) take four of
// the eight tile registers, two A tiles (rows) and two B tiles (blocks) the
// rest. Fewer rows than 16 run on zero rows beside them (a tile costs the
// same whatever its rows), so the tile shapes, and each output's order of
// sums, never depend on the rows: a row gets the same bits alone as in any
// batch. The sums run in the input order, 32 inputs per instruction in the
// unit's own order, so the bits are the AMX family's own: within a stated
// tolerance of the AVX-512 loop's (tests/engine/cpu/amx_product_test.cc).
// No LibTorch here, and no inline functions of other headers (see
// engine/cpu/fixed_order_kernel.h for why).

#include <cstdint>

namespace linserve {

struct AmxBf16Args {
  const uint16_t* w = nullptr;  // the packed matrix: blocks x pairs x 16 x 2 bfloat16
  int64_t blocks = 0;
  int64_t pairs = 0;
  // The rows' bfloat16 inputs, `x_stride` values from one row to the next,
  // x_stride a multiple of 32 and zeros from 2 * pairs up to it; then zero
  // rows up to a whole tile of 16 rows (a multiple of 32 where more than 16
  // rows are left after the last multiple of 32).
  const uint16_t* x = nullptr;
  int64_t x_stride = 0;
  int64_t rows = 0;
  float* y = nullptr;  // rows of 16 * blocks float32 results
  int64_t y_stride = 0;
  bool relu_squared = false;
};

// y for every row and the outputs of blocks [block_begin, block_end).
// Thread-safe for disjoint block ranges; loads its tile shapes on the
// calling thread and releases the tiles before it returns.
void PackedBf16ProductAmx(const AmxBf16Args& args, int64_t block_begin, int64_t block_end);

// The bfloat16 tile unit's rate on this core, GFLOP/s: a loop of TDPBF16PS
// on resident tiles, `seconds` long at least. For the benchmarks' ratios.
double AmxBf16PeakGflops(double seconds);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_CPU_AMX_KERNEL_H_

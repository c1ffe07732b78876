#ifndef LINSERVE_ENGINE_CPU_PRODUCT_SPANS_H_
#define LINSERVE_ENGINE_CPU_PRODUCT_SPANS_H_

// How many units of a product (a tile, a panel unit) one span of the
// engine's pool takes (engine/cpu/engine_threads.h). A span is cut by the
// product's shape alone, so the bits never depend on the thread count.

#include <algorithm>
#include <cstdint>

namespace linserve {

// Weight bytes per span at decode's few rows, where a product is bound by
// memory: 64 KB is about 2.5 us of one core's reads, long beside the 0.1 us
// of handing a span out, and short enough that a decode step's 768 x 768
// matrices (1.2 MB in bfloat16) split into 18 spans.
constexpr int64_t kWeightBytesPerSpan = int64_t{64} << 10;

// A span ends at whichever budget it reaches first: `multiply_adds_per_span`
// of arithmetic (about 10 us at the kernel's rate with many rows) or
// kWeightBytesPerSpan of weights.
inline int64_t ProductUnitsPerSpan(int64_t unit_multiply_adds, int64_t unit_weight_bytes,
                                   int64_t multiply_adds_per_span) {
  return std::max<int64_t>(
      1, std::min(multiply_adds_per_span / std::max<int64_t>(1, unit_multiply_adds),
                  kWeightBytesPerSpan / std::max<int64_t>(1, unit_weight_bytes)));
}

}  // namespace linserve

#endif  // LINSERVE_ENGINE_CPU_PRODUCT_SPANS_H_

#ifndef LINSERVE_BENCH_QUANTIZED_PRODUCT_MEASURE_H_
#define LINSERVE_BENCH_QUANTIZED_PRODUCT_MEASURE_H_

// linserve-engine-bench's quantized-product section: the 8- and 4-bit weight
// product (engine/cpu/quantized_linear.h) beside the packed bfloat16 one
// (engine/cpu/cpu_bf16_product.h), side by side in one run, at the 0.1B
// RWKV-7 shape's matrices (768 x 768, the FFN's 3072 x 768 and 768 x 3072,
// the 65,536 x 768 head) for one row (decode: how near the weights stream
// to the memory's rate), 32 (a decode batch) and 1,024 (prefill: how near
// the products run to the core's peak).

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace linserve {

struct QuantizedProductRow {
  int64_t out = 0;
  int64_t in = 0;
  int64_t rows = 0;
  std::string format;        // "bfloat16", "int8 g32", "int4 g64", ...
  int64_t weight_bytes = 0;  // what one product streams: the weight as stored
  double seconds = 0;        // median per product
};

// Every matrix, row count and format (bfloat16 only where the CPU has the
// AVX-512 BF16 dot product), medians of `repeats` products after one not
// timed. `quick`: the 768 x 768 matrix alone, at 1 and 32 rows.
std::vector<QuantizedProductRow> MeasureQuantizedProducts(int32_t repeats, bool quick);

void PrintQuantizedProducts(const std::vector<QuantizedProductRow>& rows, int32_t repeats);
nlohmann::json QuantizedProductsJson(const std::vector<QuantizedProductRow>& rows);

}  // namespace linserve

#endif  // LINSERVE_BENCH_QUANTIZED_PRODUCT_MEASURE_H_

#ifndef LINSERVE_BENCH_RWKV7_REPORT_H_
#define LINSERVE_BENCH_RWKV7_REPORT_H_

// The engine benchmark's RWKV-7 section (bench/rwkv7_measure.h measures it):
// batch-1 decode against this machine's memory bound, batched decode and
// prefill rates, printed side by side and as JSON.

#include <vector>

#include "bench/rwkv7_measure.h"
#include "nlohmann/json.hpp"

namespace linserve {

// The batch-1 decode bound: the weights' bytes streamed once per token at the
// measured read bandwidth.
double BoundMs(const Rwkv7Row& row, const MemoryBandwidth& bandwidth);

// The most `batch` can gain over batch 1 on this machine: batch 1 at its
// bound, against the batch's products at the 32-row product rate plus its
// state read and written once at the read bandwidth (everything else free).
double BatchCeiling(const Rwkv7Row& row, const MemoryBandwidth& bandwidth, int64_t batch);

// Section 6 of the benchmark's report: two tables.
void PrintRwkv7(const std::vector<Rwkv7Row>& rows, const MemoryBandwidth& bandwidth,
                const Rwkv7BenchOptions& o);

// The same rows as JSON (the report's "rwkv7").
nlohmann::json Rwkv7Json(const std::vector<Rwkv7Row>& rows, const MemoryBandwidth& bandwidth,
                         const Rwkv7BenchOptions& o);

}  // namespace linserve

#endif  // LINSERVE_BENCH_RWKV7_REPORT_H_

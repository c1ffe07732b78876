#ifndef LINSERVE_BENCH_RWKV7_MEASURE_H_
#define LINSERVE_BENCH_RWKV7_MEASURE_H_

// The RWKV-7 measurements of the engine benchmark: published shapes with
// random weights, per compute dtype, set against this machine's memory
// bandwidth. Not thread-safe, as engine_measure.h.

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cpu/quantized_kernel.h"
#include "engine/rwkv7/rwkv7_config.h"

namespace linserve {

// What a row measures: the compute dtype, and the big matrices' format.
struct Rwkv7Format {
  c10::ScalarType dtype;
  WeightQuantization quantization = WeightQuantization::kNone;
  int64_t group = 0;  // quantization group; 0 when not quantized
};

// "float32", "bfloat16", "float16", "int8", "int4", or "int8:32" / "int4:64"
// naming the group (default: DefaultQuantizationGroup). The quantized ones
// keep their small matrices in `small_dtype`.
absl::StatusOr<Rwkv7Format> ParseRwkv7Format(const std::string& name,
                                             c10::ScalarType small_dtype);
std::string Rwkv7FormatName(const Rwkv7Format& format);

struct Rwkv7BenchOptions {
  std::vector<std::string> shapes;             // Rwkv7BenchShape names
  std::vector<Rwkv7Format> formats;            // compute dtypes and weight formats
  std::vector<int64_t> batches = {1, 8, 32};   // batched decode, ascending, starting at 1
  int64_t decode_steps = 4;                    // steps timed per repeat and batch size
  int repeats = 3;                             // repeats of decode timings
  int64_t prefill_tokens = 1024;               // prompt of the chunked prefill
  int64_t recurrent_tokens = 128;              // of it, token by token (timed once)
  int prefill_repeats = 3;                     // repeats of the chunked prefill
  int64_t chunk_size = 32;                     // Rwkv7Options::chunk_size
  int64_t bandwidth_bytes = int64_t{1} << 30;  // buffer of the bandwidth measure
  uint64_t seed = 1;
  std::string device = "cpu";
};

// "0.1b": 12 x 768, 12 heads of 64; "0.4b": 24 x 1024, 16 heads of 64; both
// with V 65,536, Dw = Da = 64, Dv = 32, Dg = 128 and F = 4 C (the published
// models' shapes). "tiny": 2 x 128, V 1,024, for smoke runs.
absl::StatusOr<Rwkv7Config> Rwkv7BenchShape(const std::string& name);

// "float32", "bfloat16", "float16" and back (InvalidArgument for others).
std::string DtypeName(c10::ScalarType dtype);
absl::StatusOr<c10::ScalarType> ParseDtype(const std::string& name);

// Memory bandwidth of one thread, as the decode step uses it: medians of
// a sum over a buffer far larger than any cache (bytes read), and of a copy
// between two halves of it (bytes read + bytes written).
struct MemoryBandwidth {
  int64_t bytes = 0;
  int repeats = 0;
  double read_gb_per_s = 0;  // torch::sum, 1e9 bytes per second
  double copy_gb_per_s = 0;  // Tensor::copy_
  // The same sum split over the engine pool (spans of 16 MiB), by thread
  // count: what a plain read gains from more threads, beside the decode
  // step that reads its weights once.
  std::map<int, double> pool_read_gb_per_s;
};
MemoryBandwidth MeasureMemoryBandwidth(int64_t bytes, int repeats, const std::string& device);
// Fills bandwidth.pool_read_gb_per_s for each count of `threads` (the CPU
// only), leaving the pool at its size before.
void MeasurePoolReadBandwidth(const std::vector<int64_t>& threads, MemoryBandwidth& bandwidth);

struct Rwkv7Row {
  std::string shape;
  Rwkv7Format format;
  int threads = 1;  // the engine pool's size (engine/cpu/engine_threads.h)
  int64_t parameters = 0;
  // Bytes one decode step reads from the weights at batch 1: every parameter
  // once, but only the token's row of the embedding.
  int64_t weight_bytes_per_token = 0;
  int64_t weight_values_per_token = 0;       // the same in values: multiply-adds per token
  // The model's own product of 32 rows (one token each) through channel
  // mixing's key matrix, which stays in cache: the compute rate a batch-32
  // step's products can reach at best. Median of 15.
  double product_gflops_32_rows = 0;
  // One row through the head (V x C, read from memory: 100 MB at the 0.1B
  // shape in bfloat16), weight bytes per second, median of 15: the rate
  // batch-1 decode's products read at, without the step's other work.
  double head_product_gb_per_s = 0;
  int64_t state_bytes = 0;                   // one session
  double init_seconds = 0;                   // allocating and filling the random weights
  double decode_ms = 0;                      // batch 1, median of single steps
  std::vector<double> batched_tokens_per_s;  // per batch size, median of single steps
  double chunked_tokens_per_s = 0;           // median of prefill_repeats
  double recurrent_tokens_per_s = 0;         // one run of ForwardStep over recurrent_tokens
};
// One row per count of `threads` (the engine pool's size), all from one
// module: each timing runs at every count in turn. Leaves the pool at its
// size before.
std::vector<Rwkv7Row> MeasureRwkv7(const std::string& shape, const Rwkv7Format& format,
                                   const Rwkv7BenchOptions& options,
                                   const std::vector<int64_t>& threads);

}  // namespace linserve

#endif  // LINSERVE_BENCH_RWKV7_MEASURE_H_

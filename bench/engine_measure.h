#ifndef LINSERVE_BENCH_ENGINE_MEASURE_H_
#define LINSERVE_BENCH_ENGINE_MEASURE_H_

// The measurements of the engine benchmark: every function times one aspect
// of the engine on the options' device and returns plain numbers (medians of repeats);
// engine_bench.cc turns them into tables. Not thread-safe: one thread runs
// the whole benchmark, and the timings assume nothing else runs beside it.

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/base/model_config.h"

namespace linserve {

// Seconds `fn` takes, waiting for the work queued on `device` before and
// after (CUDA kernels run asynchronously).
double TimeSeconds(const c10::Device& device, const std::function<void()>& fn);

// The median of `values`; 0 when empty.
double Median(std::vector<double> values);

struct EngineBenchOptions {
  std::vector<AttentionKind> kinds;
  std::vector<int64_t> contexts;    // decode contexts, ascending
  int64_t prefill_tokens = 4096;    // prompt length of the prefill comparison
  int64_t recurrent_tokens = 4096;  // tokens of the token-by-token prefill (timed once)
  std::vector<int64_t> batches;     // batched-decode batch sizes, ascending
  int64_t batch_context = 256;      // batched sessions stand around this position
  // Decode steps are timed one by one and summarised by their median, over
  // repeats that go round the contexts (or batch sizes): a shared machine's
  // noise comes in bursts, which such a median leaves out.
  int64_t decode_steps = 16;                       // steps timed per repeat (batch 1)
  int repeats = 15;                                // repeats of the fast measurements
  int prefill_repeats = 3;                         // repeats of chunked and reference prefill
  int64_t reference_max_bytes = int64_t{4} << 30;  // above: reference at fallback length
  int64_t reference_fallback_tokens = 1024;
  uint64_t seed = 1;
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N" (checked by ParseDevice)
};

// The model every kind is measured with: the default model's size
// (d_model 256, 4 layers, 4 heads of 64, MLP 512, chunk 64) and random weights.
ModelConfig BenchModelConfig(AttentionKind kind);

struct MachineInfo {
  unsigned cores = 0;             // std::thread::hardware_concurrency
  std::string cpu_model;          // /proc/cpuinfo "model name"
  std::vector<std::string> blas;  // mapped libraries whose path names BLAS (after a matmul)
  std::string torch_blas_info;    // BLAS_INFO from LibTorch's build configuration
  // OpenBLAS's kernel set for this CPU ("Haswell", "SkylakeX", ...; "" with
  // another BLAS): an OpenBLAS older than the CPU falls back to "Prescott",
  // SSE3 kernels, unless $OPENBLAS_CORETYPE names one.
  std::string openblas_core;
  bool cpu_has_avx2 = false;  // /proc/cpuinfo flags
  std::string torch_version;
  std::string device;            // EngineBenchOptions::device
  int torch_threads = 0;         // torch::get_num_threads()
  std::string openblas_threads;  // $OPENBLAS_NUM_THREADS or "unset"
  std::string date;              // UTC, ISO 8601
};

// Call after a first matrix product, so that the BLAS library is mapped.
MachineInfo ReadMachineInfo(const std::string& device);

struct MatmulPeak {
  int64_t size = 1024;  // n of an n x n x n fp32 product
  int repeats = 0;
  double gflops = 0;  // median
};
MatmulPeak MeasureMatmulPeak(int repeats, const std::string& device);

// Decode time per token at batch 1, one session per context.
struct DecodeRow {
  AttentionKind kind;
  std::vector<double> ms_per_token;  // per context, median
};
DecodeRow MeasureDecode(AttentionKind kind, const EngineBenchOptions& options);

// One session's state size per context, also relative to the softmax KV cache.
struct StateRow {
  AttentionKind kind;
  std::vector<int64_t> bytes;  // per context
  std::vector<double> vs_softmax;
};
StateRow MeasureStateBytes(AttentionKind kind, const std::vector<int64_t>& contexts);

// Prefill of one prompt in the three forms; tokens/s.
struct PrefillRow {
  AttentionKind kind;
  double chunked = 0;            // median of prefill_repeats, prefill_tokens
  double recurrent = 0;          // one run over recurrent_tokens
  double reference = 0;          // median of prefill_repeats, reference_tokens
  int64_t reference_tokens = 0;  // prefill_tokens, or the fallback when too big
  int64_t reference_bytes = 0;   // estimated peak of the reference at prefill_tokens
};
PrefillRow MeasurePrefill(AttentionKind kind, const EngineBenchOptions& options);

// Aggregate decode throughput of a batch of sessions at different positions.
struct BatchRow {
  AttentionKind kind;
  std::vector<int64_t> steps;           // per batch size, steps timed per repeat
  std::vector<double> tokens_per_s;     // per batch size, median
  std::vector<double> flops_per_token;  // per batch size, at the batch's mean position
};
BatchRow MeasureBatchedDecode(AttentionKind kind, const EngineBenchOptions& options);

// Steps timed per repeat of the batched decode: decode_steps up to batch 8,
// then fewer (at least 4) so that large batches time about as many tokens.
int64_t BatchedSteps(int64_t decode_steps, int64_t batch);

// Estimated FLOPs of one decode step for one session at `position`; see the
// definition for what is counted.
double DecodeFlopsPerToken(const ModelConfig& config, int64_t position);

// Estimated peak memory of ForwardReference over `tokens` tokens at batch 1.
int64_t ReferenceBytes(const ModelConfig& config, int64_t tokens);

}  // namespace linserve

#endif  // LINSERVE_BENCH_ENGINE_MEASURE_H_

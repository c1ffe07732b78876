#ifndef LINSERVE_BENCH_QWEN35_MEASURE_H_
#define LINSERVE_BENCH_QWEN35_MEASURE_H_

// The Qwen3.5 measurements of the engine benchmark: the published shapes
// with random weights, per weight format, set against this machine's memory
// bandwidth (the decode bound) and its product rate (the batched ceiling).
// Not thread-safe, as engine_measure.h.

#include <cstdint>
#include <string>
#include <vector>

#include "bench/rwkv7_measure.h"
#include "nlohmann/json.hpp"

namespace linserve {

struct Qwen35BenchOptions {
  std::vector<std::string> shapes;               // Qwen35ShapeByName names; empty: none
  std::vector<Rwkv7Format> formats;              // weight formats (as RWKV-7's rows)
  std::vector<int64_t> contexts = {128, 4096};   // batch-1 decode against the bound
  std::vector<int64_t> cost_contexts = {128, 1024, 4096, 16384};  // decode cost against context
  int64_t batch = 32;                            // the batched decode (against batch 1)
  int64_t batch_context = 128;                   // its sessions' position
  std::vector<int64_t> prefill_tokens = {1024, 4096};
  int64_t decode_steps = 4;                      // steps timed per repeat
  int repeats = 3;
  uint64_t seed = 1;
};

struct Qwen35Row {
  std::string shape;
  Rwkv7Format format;
  int threads = 1;  // the engine pool's size (engine/cpu/engine_threads.h)
  int64_t parameters = 0;
  int64_t weight_bytes_per_token = 0;   // every matrix once but the embedding's one row
  int64_t gdn_state_bytes = 0;          // the constant part of a session's state
  int64_t kv_bytes_per_token = 0;       // the KV cache's growth
  double product_gflops_32_rows = 0;    // the MLP's up product over 32 rows: the batch's ceiling
  // One row through every matrix of a kind ("mlp.up_proj", "lm_head"), in
  // layer order, from memory: its bytes, and the GB/s they were read at.
  struct ProductKind {
    std::string kind;
    int64_t bytes = 0;
    double gb_per_s = 0;
  };
  std::vector<ProductKind> one_row_products;
  double one_row_products_ms = 0;       // all of them: a decode step's products alone
  std::vector<double> decode_ms;        // batch 1, per `contexts`
  std::vector<double> bound_ms;         // bytes read (weights, KV, GDN state in and out) / bandwidth
  double decode_read_gb_per_s = 0;      // that bandwidth: a plain read between the decode steps
  double batch_tokens_per_s = 0;        // batch `batch` at batch_context
  double batch1_tokens_per_s = 0;       // batch 1 at batch_context
  double ceiling_ratio = 0;             // what the bandwidth and product rate allow batch / batch 1
  // The batch's step modelled as the ceiling models it (its products at the
  // 32-row rate, its states at the bandwidth), in seconds: beside the
  // measured step, a figure that batch 1's own speed does not move.
  double batch_model_seconds = 0;
  std::vector<double> cost_ms;          // batch 1, per `cost_contexts`
  std::vector<double> prefill_tokens_per_s;  // per `prefill_tokens`
  std::vector<double> prefill_gflops;        // the products' and attention's work / time
};

Qwen35Row MeasureQwen35(const std::string& shape, const Rwkv7Format& format,
                        const Qwen35BenchOptions& options, const MemoryBandwidth& bandwidth);
void PrintQwen35(const std::vector<Qwen35Row>& rows, const MemoryBandwidth& bandwidth,
                 const Qwen35BenchOptions& options);
nlohmann::json Qwen35Json(const std::vector<Qwen35Row>& rows, const MemoryBandwidth& bandwidth,
                          const Qwen35BenchOptions& options);

}  // namespace linserve

#endif  // LINSERVE_BENCH_QWEN35_MEASURE_H_

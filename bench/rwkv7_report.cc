#include "bench/rwkv7_report.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_table.h"

namespace linserve {
namespace {

std::string Megabytes(int64_t bytes) { return absl::StrFormat("%.1f MB", bytes / 1e6); }

// Each row measured at more threads than the first row of its shape and
// format, against that row. Prints nothing when every row has one count.
void PrintRwkv7ThreadScaling(const std::vector<Rwkv7Row>& rows, const MemoryBandwidth& bandwidth,
                             size_t batch_index, int64_t batch);

}  // namespace

double BoundMs(const Rwkv7Row& row, const MemoryBandwidth& bandwidth) {
  return 1e3 * static_cast<double>(row.weight_bytes_per_token) / (bandwidth.read_gb_per_s * 1e9);
}

double BatchCeiling(const Rwkv7Row& row, const MemoryBandwidth& bandwidth, int64_t batch) {
  const double products_ms =
      1e3 * 2.0 * row.weight_values_per_token * batch / (row.product_gflops_32_rows * 1e9);
  const double state_ms =
      1e3 * 2.0 * row.state_bytes * batch / (bandwidth.read_gb_per_s * 1e9);
  return batch * BoundMs(row, bandwidth) / (products_ms + state_ms);
}

void PrintRwkv7(const std::vector<Rwkv7Row>& rows, const MemoryBandwidth& bandwidth,
                const Rwkv7BenchOptions& o) {
  absl::PrintF(
      "6. RWKV-7, random weights at published shapes (0.1b: 12 layers x 768, 12 heads of 64; "
      "0.4b: 24 x 1024, 16 heads of 64; both V 65536, Dw = Da = 64, Dv = 32, Dg = 128, FFN 4 x "
      "width); chunk %d\n",
      o.chunk_size);
  absl::PrintF(
      "   memory bandwidth, one thread over %s (in huge pages where granted, as the weights), "
      "median of %d: read (torch::sum) %.1f GB/s, copy %.1f GB/s (bytes read + written)\n\n",
      Bytes(bandwidth.bytes), bandwidth.repeats, bandwidth.read_gb_per_s, bandwidth.copy_gb_per_s);
  absl::PrintF(
      "   Batch-1 decode against this machine's bound (bound = weight bytes read per token, the "
      "embedding as one row, / read bandwidth; decode: median of %d single steps)\n",
      o.repeats * o.decode_steps);
  Table decode({"shape", "dtype", "threads", "parameters", "weights/token", "bound ms", "decode ms",
                "measured/bound", "state/session", "init s"});
  for (const Rwkv7Row& row : rows) {
    decode.Add(
        {row.shape, Rwkv7FormatName(row.format), absl::StrCat(row.threads),
         absl::StrFormat("%.1fM", row.parameters / 1e6),
         Megabytes(row.weight_bytes_per_token), absl::StrFormat("%.1f", BoundMs(row, bandwidth)),
         absl::StrFormat("%.1f", row.decode_ms), Ratio(row.decode_ms, BoundMs(row, bandwidth)),
         Bytes(row.state_bytes), absl::StrFormat("%.1f", row.init_seconds)});
  }
  decode.Print();
  absl::PrintF("   target: 0.1b decode within 1.5x of its bound\n\n");

  size_t target = o.batches.size() - 1;
  for (size_t i = 0; i < o.batches.size(); ++i) {
    if (o.batches[i] == 32) target = i;
  }
  absl::PrintF(
      "   Batched decode and prefill of a %d-token prompt, tokens/s (decode: median of %d single "
      "steps per batch size; chunked: median of %d; token by token: one run over %d tokens)\n",
      o.prefill_tokens, o.repeats * o.decode_steps, o.prefill_repeats, o.recurrent_tokens);
  std::vector<std::string> header = {"shape", "dtype", "threads"};
  for (int64_t b : o.batches) header.push_back(absl::StrCat("batch ", b));
  header.push_back(absl::StrCat(o.batches[target], "/", o.batches.front()));
  header.push_back("ceiling");
  header.push_back("32-row GFLOP/s");
  for (const char* name : {"chunked", "token by token", "chunked/token by token"}) {
    header.push_back(name);
  }
  Table rates(header);
  for (const Rwkv7Row& row : rows) {
    std::vector<std::string> cells = {row.shape, Rwkv7FormatName(row.format),
                                      absl::StrCat(row.threads)};
    for (double rate : row.batched_tokens_per_s) cells.push_back(absl::StrFormat("%.1f", rate));
    cells.push_back(Ratio(row.batched_tokens_per_s[target], row.batched_tokens_per_s.front()));
    cells.push_back(absl::StrFormat("%.2fx", BatchCeiling(row, bandwidth, o.batches[target])));
    cells.push_back(absl::StrFormat("%.0f", row.product_gflops_32_rows));
    cells.push_back(absl::StrFormat("%.1f", row.chunked_tokens_per_s));
    cells.push_back(absl::StrFormat("%.1f", row.recurrent_tokens_per_s));
    cells.push_back(Ratio(row.chunked_tokens_per_s, row.recurrent_tokens_per_s));
    rates.Add(cells);
  }
  rates.Print();
  absl::PrintF(
      "   ceiling: the most batch %d can gain over batch 1 here: batch 1 at its bound, against "
      "batch %d's products at the 32-row product rate (the model's own product, weight in "
      "cache: 32-row GFLOP/s) plus its state read and written once at the read bandwidth\n",
      o.batches[target], o.batches[target]);
  absl::PrintF("   targets: batch 32 / batch 1 >= 8x; chunked / token by token >= 5x\n\n");
  PrintRwkv7ThreadScaling(rows, bandwidth, target, o.batches[target]);
}

namespace {

void PrintRwkv7ThreadScaling(const std::vector<Rwkv7Row>& rows, const MemoryBandwidth& bandwidth,
                             size_t batch_index, int64_t batch) {
  // Each row against the first row of its shape and format: the fewest threads.
  std::vector<std::pair<const Rwkv7Row*, const Rwkv7Row*>> pairs;
  for (const Rwkv7Row& row : rows) {
    for (const Rwkv7Row& base : rows) {
      if (base.shape == row.shape && Rwkv7FormatName(base.format) == Rwkv7FormatName(row.format)) {
        if (base.threads != row.threads) pairs.emplace_back(&base, &row);
        break;
      }
    }
  }
  if (pairs.empty()) return;
  absl::PrintF("   Threads: each row's speed against the same shape and dtype at its fewest "
               "threads, from the tables above (one module, every timing taken at each thread "
               "count in turn)\n");
  Table scaling({"shape", "dtype", "threads", "chunked prefill", "batch-1 decode",
                 absl::StrCat("batch ", batch), "head, 1 row", "read bandwidth"});
  auto bandwidth_ratio = [&](int threads, int base) -> std::string {
    auto a = bandwidth.pool_read_gb_per_s.find(threads);
    auto b = bandwidth.pool_read_gb_per_s.find(base);
    if (a == bandwidth.pool_read_gb_per_s.end() || b == bandwidth.pool_read_gb_per_s.end()) {
      return "-";
    }
    return absl::StrFormat("%.2fx (%.1f / %.1f GB/s)", a->second / b->second, a->second,
                           b->second);
  };
  for (const auto& [base, row] : pairs) {
    scaling.Add({row->shape, Rwkv7FormatName(row->format),
                 absl::StrCat(row->threads, " vs ", base->threads),
                 Ratio(row->chunked_tokens_per_s, base->chunked_tokens_per_s),
                 Ratio(base->decode_ms, row->decode_ms),
                 Ratio(row->batched_tokens_per_s[batch_index],
                       base->batched_tokens_per_s[batch_index]),
                 absl::StrFormat("%.2fx (%.1f / %.1f GB/s)",
                                 row->head_product_gb_per_s / base->head_product_gb_per_s,
                                 row->head_product_gb_per_s, base->head_product_gb_per_s),
                 bandwidth_ratio(row->threads, base->threads)});
  }
  scaling.Print();
  absl::PrintF("   targets (0.1b, 2 threads against 1): prefill >= 1.6x, batch-1 decode >= 1.4x, "
               "batch 32 >= 1.6x\n");
  absl::PrintF("   read bandwidth: a sum over %s split over the pool, medians of %d alternated "
               "runs: what a plain read gains from threads, beside batch-1 decode, which reads its "
               "weights once a token (not a ceiling: the machine's bandwidth varies by the "
               "minute); head, 1 row: one row's product through the head alone, weight bytes "
               "per second (medians of 15, alternated): what decode's products gain without the "
               "step's serial work\n\n",
               Bytes(bandwidth.bytes), bandwidth.repeats);
}

}  // namespace

nlohmann::json Rwkv7Json(const std::vector<Rwkv7Row>& rows, const MemoryBandwidth& bandwidth,
                         const Rwkv7BenchOptions& o) {
  nlohmann::json j;
  j["options"] = {{"batches", o.batches},
                  {"decode_steps", o.decode_steps},
                  {"repeats", o.repeats},
                  {"prefill_tokens", o.prefill_tokens},
                  {"recurrent_tokens", o.recurrent_tokens},
                  {"prefill_repeats", o.prefill_repeats},
                  {"chunk_size", o.chunk_size}};
  j["bandwidth"] = {{"bytes", bandwidth.bytes},
                    {"repeats", bandwidth.repeats},
                    {"read_gb_per_s", bandwidth.read_gb_per_s},
                    {"copy_gb_per_s", bandwidth.copy_gb_per_s},
                    {"pool_read_gb_per_s", bandwidth.pool_read_gb_per_s}};
  j["rows"] = nlohmann::json::array();
  for (const Rwkv7Row& row : rows) {
    j["rows"].push_back({{"shape", row.shape},
                         {"dtype", Rwkv7FormatName(row.format)},
                         {"threads", row.threads},
                         {"config", Rwkv7ConfigToJson(Rwkv7BenchShape(row.shape).value())},
                         {"parameters", row.parameters},
                         {"weight_bytes_per_token", row.weight_bytes_per_token},
                         {"state_bytes", row.state_bytes},
                         {"init_seconds", row.init_seconds},
                         {"decode_ms", row.decode_ms},
                         {"bound_ms", BoundMs(row, bandwidth)},
                         {"batched_tokens_per_s", row.batched_tokens_per_s},
                         {"product_gflops_32_rows", row.product_gflops_32_rows},
                         {"head_product_gb_per_s", row.head_product_gb_per_s},
                         {"batch_ceiling", BatchCeiling(row, bandwidth, o.batches.back())},
                         {"chunked_tokens_per_s", row.chunked_tokens_per_s},
                         {"recurrent_tokens_per_s", row.recurrent_tokens_per_s}});
  }
  return j;
}

}  // namespace linserve

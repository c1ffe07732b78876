// linserve-engine-bench: measures the engine's attention kinds side by side on
// this machine, with random weights at the default model's size, then RWKV-7
// at published shapes against the machine's memory bandwidth, and prints
// plain-text tables (or one JSON document with --json). Every number is a
// median of repeats unless its section says otherwise; ratios compare numbers
// taken in the same run. --quantized_products adds the 8- and 4-bit weight
// products beside the packed bfloat16 one (bench/quantized_product_measure.h).
//
//   OPENBLAS_NUM_THREADS=1 linserve-engine-bench [--quick] [--kinds=...] [--rwkv7_shapes=...] ...

#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_table.h"
#include "bench/constraint_measure.h"
#include "bench/engine_measure.h"
#include "bench/malloc_flag.h"
#include "bench/quantized_product_measure.h"
#include "bench/qwen35_measure.h"
#include "bench/rwkv7_measure.h"
#include "bench/rwkv7_report.h"
#include "bench/sampling_measure.h"
#include "engine/cpu/engine_threads.h"
#include "engine/model/language_model.h"
#include "engine/rwkv7/rwkv7_model.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, kinds, "softmax,linear_elu,linear_softmax,linear_cosine,vq,compressed",
          "attention kinds to measure, comma-separated; empty for none");
ABSL_FLAG(std::string, contexts, "128,1024,4096,16384",
          "contexts of the decode and state-size tables, comma-separated");
ABSL_FLAG(int64_t, prefill_tokens, 4096, "prompt length of the prefill comparison");
ABSL_FLAG(int64_t, recurrent_tokens, 4096,
          "tokens of the token-by-token prefill, timed once (at most --prefill_tokens)");
ABSL_FLAG(std::string, batches, "1,8,32,128", "batch sizes of the batched decode");
ABSL_FLAG(int64_t, batch_context, 256, "batched sessions stand within +-25% of this position");
ABSL_FLAG(int64_t, decode_steps, 16,
          "decode steps timed per repeat (batched decode: fewer above batch 8, at least 4)");
ABSL_FLAG(int32_t, repeats, 15, "repeats of the matrix product and of decode timings");
ABSL_FLAG(int32_t, prefill_repeats, 3, "repeats of the chunked and reference prefill");
ABSL_FLAG(bool, quick, false,
          "smoke run at tiny sizes (under a minute); replaces every size and repeat flag");
ABSL_FLAG(std::string, rwkv7_shapes, "0.1b,0.4b",
          "RWKV-7 shapes to measure with random weights (0.1b, 0.4b, tiny), comma-separated; "
          "empty for none");
ABSL_FLAG(std::string, rwkv7_dtypes, "float32,bfloat16",
          "formats of the RWKV-7 rows, comma-separated: compute dtypes (float32, bfloat16, "
          "float16) or 8- and 4-bit weights (int8, int4, or int8:32 / int4:64 naming the "
          "group), whose small matrices take the CPU's default dtype");
ABSL_FLAG(std::string, rwkv7_batches, "1,8,32", "RWKV-7 batched-decode batch sizes (1 added)");
ABSL_FLAG(int64_t, rwkv7_prefill_tokens, 1024, "prompt length of the RWKV-7 prefill comparison");
ABSL_FLAG(int64_t, rwkv7_recurrent_tokens, 128,
          "of that prompt, tokens of the RWKV-7 token-by-token prefill, timed once (a step costs "
          "the same at any position)");
ABSL_FLAG(int32_t, rwkv7_repeats, 3,
          "repeats of the RWKV-7 decode timings (4 single steps per batch size each)");
ABSL_FLAG(int32_t, rwkv7_prefill_repeats, 3, "repeats of the RWKV-7 chunked prefill");
ABSL_FLAG(std::string, qwen35_shapes, "",
          "Qwen3.5 shapes to measure with random weights (0.8b, 2b, 4b, tiny), comma-separated; "
          "empty (the default) for none: the 0.8b shape takes minutes per format");
ABSL_FLAG(std::string, qwen35_formats, "bfloat16,int8,int4",
          "formats of the Qwen3.5 rows: float32, bfloat16, int8, int4 (or int8:32 / int4:64)");
ABSL_FLAG(std::string, qwen35_contexts, "128,4096", "contexts of the Qwen3.5 batch-1 decode bound");
ABSL_FLAG(std::string, qwen35_cost_contexts, "128,1024,4096,16384",
          "contexts of the Qwen3.5 decode-cost row");
ABSL_FLAG(std::string, qwen35_prefill_tokens, "1024,4096", "Qwen3.5 prefill lengths");
ABSL_FLAG(int64_t, qwen35_batch, 32, "the Qwen3.5 batched decode's batch (against batch 1)");
ABSL_FLAG(int32_t, qwen35_repeats, 3, "repeats of the Qwen3.5 timings");
ABSL_FLAG(std::string, device, "cpu", "where the engine runs: cpu, cuda or cuda:N");
ABSL_FLAG(int64_t, sampling_vocab, 65536,
          "vocabulary of the sampling section (0 leaves the section out)");
ABSL_FLAG(int32_t, sampling_repeats, 200, "rows per setting of the sampling section");
ABSL_FLAG(std::string, sampling_model, "",
          "a model directory whose own logits the sampling section also samples");
ABSL_FLAG(std::string, constraint_model, "",
          "a model directory for the constrained-decoding section (empty leaves it out): "
          "batch-1 decode with and without a JSON schema");
ABSL_FLAG(int32_t, constraint_tokens, 256, "tokens of each side of the constrained-decoding section");
ABSL_FLAG(bool, quantized_products, false,
          "also time the 8- and 4-bit weight products beside the packed bfloat16 one (--repeats "
          "each; about a minute)");
ABSL_FLAG(std::string, threads, "1",
          "sizes of the engine's thread pool: the RWKV-7 and Qwen3.5 rows are measured at each, "
          "side by side (LibTorch's own loops stay on one thread, as in the server)");
ABSL_FLAG(bool, json, false, "print one JSON document instead of the tables");

namespace linserve {
namespace {

// "128,1024" -> {128, 1024}: positive, sorted, without duplicates.
absl::StatusOr<std::vector<int64_t>> ParseIntList(const std::string& flag,
                                                  const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(piece, &value) || value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", piece, "' is not a positive integer"));
    }
    out.push_back(value);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<EngineBenchOptions> OptionsFromFlags() {
  EngineBenchOptions options;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_kinds), ',', absl::SkipWhitespace())) {
    absl::StatusOr<AttentionKind> kind = ParseAttentionKind(std::string(name));
    if (!kind.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--kinds: ", kind.status().message()));
    }
    options.kinds.push_back(*kind);
  }
  options.device = absl::GetFlag(FLAGS_device);
  if (absl::Status device = ParseDevice(options.device).status(); !device.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--device: ", device.message()));
  }
  if (absl::GetFlag(FLAGS_quick)) {
    options.contexts = {16, 64};
    options.prefill_tokens = 128;
    options.recurrent_tokens = 128;
    options.batches = {1, 4};
    options.batch_context = 32;
    options.decode_steps = 4;
    options.repeats = 2;
    options.prefill_repeats = 1;
    return options;
  }
  absl::StatusOr<std::vector<int64_t>> contexts =
      ParseIntList("contexts", absl::GetFlag(FLAGS_contexts));
  if (!contexts.ok()) return contexts.status();
  absl::StatusOr<std::vector<int64_t>> batches =
      ParseIntList("batches", absl::GetFlag(FLAGS_batches));
  if (!batches.ok()) return batches.status();
  options.contexts = *std::move(contexts);
  options.batches = *std::move(batches);
  options.prefill_tokens = absl::GetFlag(FLAGS_prefill_tokens);
  options.recurrent_tokens =
      std::min(absl::GetFlag(FLAGS_recurrent_tokens), options.prefill_tokens);
  options.batch_context = absl::GetFlag(FLAGS_batch_context);
  options.decode_steps = absl::GetFlag(FLAGS_decode_steps);
  options.repeats = absl::GetFlag(FLAGS_repeats);
  options.prefill_repeats = absl::GetFlag(FLAGS_prefill_repeats);
  if (options.prefill_tokens <= 0 || options.recurrent_tokens <= 0 || options.batch_context <= 0 ||
      options.decode_steps <= 0 || options.repeats <= 0 || options.prefill_repeats <= 0) {
    return absl::InvalidArgumentError(
        "--prefill_tokens, --recurrent_tokens, --batch_context, --decode_steps, --repeats and "
        "--prefill_repeats must be positive");
  }
  return options;
}

absl::StatusOr<Rwkv7BenchOptions> Rwkv7OptionsFromFlags(const EngineBenchOptions& engine) {
  Rwkv7BenchOptions options;
  options.device = engine.device;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_rwkv7_shapes), ',', absl::SkipWhitespace())) {
    if (absl::Status shape = Rwkv7BenchShape(std::string(name)).status(); !shape.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--rwkv7_shapes: ", shape.message()));
    }
    options.shapes.emplace_back(name);
  }
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_rwkv7_dtypes), ',', absl::SkipWhitespace())) {
    absl::StatusOr<Rwkv7Format> format = ParseRwkv7Format(
        std::string(name), Rwkv7Model::DefaultDtype(torch::Device(options.device)));
    if (!format.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--rwkv7_dtypes: ", format.status().message()));
    }
    options.formats.push_back(*format);
  }
  if (!options.shapes.empty() && options.formats.empty()) {
    return absl::InvalidArgumentError("--rwkv7_dtypes is empty");
  }
  if (absl::GetFlag(FLAGS_quick)) {
    if (!options.shapes.empty()) options.shapes = {"tiny"};
    options.batches = {1, 4};
    options.decode_steps = 2;
    options.repeats = 2;
    options.prefill_repeats = 1;
    options.prefill_tokens = 64;
    options.recurrent_tokens = 16;
    options.bandwidth_bytes = int64_t{64} << 20;
    return options;
  }
  absl::StatusOr<std::vector<int64_t>> batches =
      ParseIntList("rwkv7_batches", absl::StrCat("1,", absl::GetFlag(FLAGS_rwkv7_batches)));
  if (!batches.ok()) return batches.status();
  options.batches = *std::move(batches);
  options.prefill_tokens = absl::GetFlag(FLAGS_rwkv7_prefill_tokens);
  options.recurrent_tokens =
      std::min(absl::GetFlag(FLAGS_rwkv7_recurrent_tokens), options.prefill_tokens);
  options.repeats = absl::GetFlag(FLAGS_rwkv7_repeats);
  options.prefill_repeats = absl::GetFlag(FLAGS_rwkv7_prefill_repeats);
  if (options.prefill_tokens <= 0 || options.recurrent_tokens <= 0 || options.repeats <= 0 ||
      options.prefill_repeats <= 0) {
    return absl::InvalidArgumentError(
        "--rwkv7_prefill_tokens, --rwkv7_recurrent_tokens, --rwkv7_repeats and "
        "--rwkv7_prefill_repeats must be positive");
  }
  return options;
}

void PrintHeader(const MachineInfo& machine, const MatmulPeak& peak) {
  const ModelConfig c = BenchModelConfig(AttentionKind::kLinearElu);
  absl::PrintF("linserve engine benchmark, %s\n", machine.date);
  absl::PrintF("machine: %d cores, %s\n", machine.cores, machine.cpu_model);
  absl::PrintF("BLAS: %s (LibTorch BLAS_INFO=%s)%s\n",
               machine.blas.empty() ? std::string("no BLAS library mapped")
                                    : absl::StrJoin(machine.blas, ", "),
               machine.torch_blas_info,
               machine.openblas_core.empty()
                   ? ""
                   : absl::StrCat(", OpenBLAS kernels ", machine.openblas_core));
  if (machine.openblas_core == "Prescott" && machine.cpu_has_avx2) {
    absl::PrintF(
        "  note: this OpenBLAS does not know the CPU and runs its SSE3 kernels; "
        "OPENBLAS_CORETYPE=Haswell (AVX2) or SkylakeX (AVX-512) selects faster ones\n");
  }
  absl::PrintF("LibTorch %s, device %s, torch threads %d, OPENBLAS_NUM_THREADS=%s\n",
               machine.torch_version, machine.device, machine.torch_threads,
               machine.openblas_threads);
  absl::PrintF(
      "model: random weights, fp32, d_model %d, %d layers, %d heads x %d, MLP %d, vocab %d, "
      "chunk %d; vq %d codes, window %d; compressed %d slots\n\n",
      c.d_model, c.n_layers, c.n_heads, c.head_dim, c.mlp_hidden, c.vocab_size,
      c.attention.chunk_size, c.attention.codebook_size, c.attention.window, c.attention.slots);
  absl::PrintF("1. Matrix-product peak: %dx%dx%d fp32 torch::mm, median of %d: %.1f GFLOP/s\n\n",
               peak.size, peak.size, peak.size, peak.repeats, peak.gflops);
}

void PrintDecode(const std::vector<DecodeRow>& rows, const EngineBenchOptions& o) {
  absl::PrintF(
      "2. Decode time per token, batch 1 (ms/token; median of %d single steps: %d repeats x %d)\n",
      o.repeats * o.decode_steps, o.repeats, o.decode_steps);
  std::vector<std::string> header = {"kind"};
  for (int64_t c : o.contexts) header.push_back(absl::StrCat("ctx ", c));
  header.push_back(absl::StrCat(o.contexts.back(), "/", o.contexts.front()));
  Table table(header);
  for (const DecodeRow& row : rows) {
    std::vector<std::string> cells = {AttentionKindName(row.kind)};
    for (double ms : row.ms_per_token) cells.push_back(absl::StrFormat("%.3f", ms));
    cells.push_back(Ratio(row.ms_per_token.back(), row.ms_per_token.front()));
    table.Add(cells);
  }
  table.Print();
  absl::PrintF(
      "  target: ratio <= 1.10 for the constant-state kinds; softmax grows with context\n\n");
}

void PrintStates(const std::vector<StateRow>& rows, const EngineBenchOptions& o) {
  absl::PrintF("3. State bytes of one session (x = relative to the softmax KV cache)\n");
  std::vector<std::string> header = {"kind"};
  for (int64_t c : o.contexts) header.push_back(absl::StrCat("ctx ", c));
  Table table(header);
  for (const StateRow& row : rows) {
    std::vector<std::string> cells = {AttentionKindName(row.kind)};
    for (size_t i = 0; i < row.bytes.size(); ++i) {
      cells.push_back(absl::StrFormat("%s (%.3gx)", Bytes(row.bytes[i]), row.vs_softmax[i]));
    }
    table.Add(cells);
  }
  table.Print();
}

void PrintPrefill(const std::vector<PrefillRow>& rows, const EngineBenchOptions& o) {
  absl::PrintF(
      "4. Prefill of a %d-token prompt, tokens/s (chunked, reference: median of %d; recurrent: "
      "one run over %d tokens)\n",
      o.prefill_tokens, o.prefill_repeats, o.recurrent_tokens);
  Table table({"kind", "chunked", "recurrent", "reference", "chunked/recurrent",
               "chunked/reference", "note"},
              /*left_from=*/6);
  for (const PrefillRow& row : rows) {
    std::string note;
    if (row.reference_tokens != o.prefill_tokens) {
      note = absl::StrCat("reference at ", row.reference_tokens, " tokens (est. ",
                          Bytes(row.reference_bytes), " at ", o.prefill_tokens, ")");
    }
    table.Add({AttentionKindName(row.kind), Rate(row.chunked), Rate(row.recurrent),
               Rate(row.reference), Ratio(row.chunked, row.recurrent),
               Ratio(row.chunked, row.reference), note});
  }
  table.Print();
  absl::PrintF("  target: chunked/recurrent >= 10x\n\n");
}

void PrintBatched(const std::vector<BatchRow>& rows, const EngineBenchOptions& o,
                  const MatmulPeak& peak) {
  // The ratio compares batch 32 (or the largest batch) with the smallest.
  size_t target = o.batches.size() - 1;
  for (size_t i = 0; i < o.batches.size(); ++i) {
    if (o.batches[i] == 32) target = i;
  }
  std::vector<int64_t> steps;
  for (int64_t b : o.batches) steps.push_back(BatchedSteps(o.decode_steps, b));
  absl::PrintF(
      "5. Batched decode, aggregate tokens/s (sessions at positions %d..%d; median of single "
      "steps, %d repeats of %s steps)\n",
      o.batch_context - o.batch_context / 4, o.batch_context + o.batch_context / 4, o.repeats,
      absl::StrJoin(steps, ", "));
  std::vector<std::string> header = {"kind"};
  for (int64_t b : o.batches) header.push_back(absl::StrCat("batch ", b));
  header.push_back(absl::StrCat(o.batches[target], "/", o.batches.front()));
  Table rates(header);
  header.pop_back();
  Table flops(header);
  for (const BatchRow& row : rows) {
    std::vector<std::string> rate_cells = {AttentionKindName(row.kind)};
    std::vector<std::string> flop_cells = {AttentionKindName(row.kind)};
    for (size_t i = 0; i < row.tokens_per_s.size(); ++i) {
      rate_cells.push_back(Rate(row.tokens_per_s[i]));
      const double gflops = row.tokens_per_s[i] * row.flops_per_token[i] / 1e9;
      flop_cells.push_back(absl::StrFormat("%.2f (%.1f%%)", gflops, 100 * gflops / peak.gflops));
    }
    rate_cells.push_back(Ratio(row.tokens_per_s[target], row.tokens_per_s.front()));
    rates.Add(rate_cells);
    flops.Add(flop_cells);
  }
  rates.Print();
  absl::PrintF("  target: batch 32 / batch 1 >= 8x\n\n");
  absl::PrintF(
      "   Achieved GFLOP/s (%% of the matrix-product peak; FLOPs counted in "
      "DecodeFlopsPerToken)\n");
  flops.Print();
}

nlohmann::json ToJson(const MachineInfo& machine, const MatmulPeak& peak,
                      const EngineBenchOptions& o, const std::vector<DecodeRow>& decode,
                      const std::vector<StateRow>& states, const std::vector<PrefillRow>& prefill,
                      const std::vector<BatchRow>& batched) {
  nlohmann::json j;
  j["machine"] = {{"cores", machine.cores},
                  {"cpu_model", machine.cpu_model},
                  {"blas", machine.blas},
                  {"torch_blas_info", machine.torch_blas_info},
                  {"openblas_core", machine.openblas_core},
                  {"torch_version", machine.torch_version},
                  {"device", machine.device},
                  {"torch_threads", machine.torch_threads},
                  {"openblas_num_threads", machine.openblas_threads},
                  {"date", machine.date}};
  j["options"] = {{"contexts", o.contexts},
                  {"prefill_tokens", o.prefill_tokens},
                  {"recurrent_tokens", o.recurrent_tokens},
                  {"batches", o.batches},
                  {"batch_context", o.batch_context},
                  {"decode_steps", o.decode_steps},
                  {"repeats", o.repeats},
                  {"prefill_repeats", o.prefill_repeats}};
  j["matmul_peak_gflops"] = peak.gflops;
  nlohmann::json kinds = nlohmann::json::object();
  for (size_t k = 0; k < o.kinds.size(); ++k) {
    nlohmann::json& row = kinds[AttentionKindName(o.kinds[k])];
    row["decode_ms_per_token"] = decode[k].ms_per_token;
    row["state_bytes"] = states[k].bytes;
    row["state_vs_softmax"] = states[k].vs_softmax;
    row["prefill_tokens_per_s"] = {{"chunked", prefill[k].chunked},
                                   {"recurrent", prefill[k].recurrent},
                                   {"reference", prefill[k].reference},
                                   {"reference_tokens", prefill[k].reference_tokens}};
    row["batched_steps"] = batched[k].steps;
    row["batched_tokens_per_s"] = batched[k].tokens_per_s;
    row["batched_flops_per_token"] = batched[k].flops_per_token;
  }
  j["kinds"] = kinds;
  return j;
}

absl::StatusOr<Qwen35BenchOptions> Qwen35OptionsFromFlags() {
  Qwen35BenchOptions options;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_qwen35_shapes), ',', absl::SkipWhitespace())) {
    options.shapes.emplace_back(name);
  }
  if (options.shapes.empty()) return options;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_qwen35_formats), ',', absl::SkipWhitespace())) {
    absl::StatusOr<Rwkv7Format> format = ParseRwkv7Format(std::string(name), torch::kBFloat16);
    if (!format.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--qwen35_formats: ", format.status().message()));
    }
    options.formats.push_back(*format);
  }
  absl::StatusOr<std::vector<int64_t>> contexts =
      ParseIntList("qwen35_contexts", absl::GetFlag(FLAGS_qwen35_contexts));
  absl::StatusOr<std::vector<int64_t>> costs =
      ParseIntList("qwen35_cost_contexts", absl::GetFlag(FLAGS_qwen35_cost_contexts));
  absl::StatusOr<std::vector<int64_t>> prefill =
      ParseIntList("qwen35_prefill_tokens", absl::GetFlag(FLAGS_qwen35_prefill_tokens));
  if (!contexts.ok()) return contexts.status();
  if (!costs.ok()) return costs.status();
  if (!prefill.ok()) return prefill.status();
  options.contexts = *contexts;
  options.cost_contexts = *costs;
  options.prefill_tokens = *prefill;
  options.batch = absl::GetFlag(FLAGS_qwen35_batch);
  options.repeats = absl::GetFlag(FLAGS_qwen35_repeats);
  if (options.batch < 2 || options.repeats < 1) {
    return absl::InvalidArgumentError("--qwen35_batch must be at least 2, --qwen35_repeats positive");
  }
  return options;
}

int Run(const EngineBenchOptions& options, const Rwkv7BenchOptions& rwkv7,
        const std::vector<int64_t>& threads, int64_t sampling_vocab, int32_t sampling_repeats,
        bool json) {
  const auto start = std::chrono::steady_clock::now();
  // Tables go out as each section finishes, so a long run shows them early.
  auto print = [json](auto&& print_section) {
    if (json) return;
    print_section();
    std::fflush(stdout);
  };
  // The matrix product comes first: it also makes LibTorch load its BLAS.
  std::cerr << "matrix-product peak" << std::endl;
  const MatmulPeak peak = MeasureMatmulPeak(std::max(options.repeats, 5), options.device);
  const MachineInfo machine = ReadMachineInfo(options.device);
  print([&] { PrintHeader(machine, peak); });

  std::vector<DecodeRow> decode;
  std::vector<StateRow> states;
  std::vector<PrefillRow> prefill;
  std::vector<BatchRow> batched;
  if (!options.kinds.empty()) {
    for (AttentionKind kind : options.kinds) {
      decode.push_back(MeasureDecode(kind, options));
      states.push_back(MeasureStateBytes(kind, options.contexts));
    }
    print([&] {
      PrintDecode(decode, options);
      PrintStates(states, options);
    });

    for (AttentionKind kind : options.kinds) prefill.push_back(MeasurePrefill(kind, options));
    print([&] { PrintPrefill(prefill, options); });

    for (AttentionKind kind : options.kinds) {
      batched.push_back(MeasureBatchedDecode(kind, options));
    }
    print([&] { PrintBatched(batched, options, peak); });
  }

  // RWKV-7: one model at a time (the 0.4b shape is 1.7 GB in float32).
  MemoryBandwidth bandwidth;
  std::vector<Rwkv7Row> rwkv7_rows;
  if (!rwkv7.shapes.empty()) {
    std::cerr << "memory bandwidth" << std::endl;
    bandwidth = MeasureMemoryBandwidth(rwkv7.bandwidth_bytes, /*repeats=*/9, rwkv7.device);
    if (threads.size() > 1 && rwkv7.device == "cpu") MeasurePoolReadBandwidth(threads, bandwidth);
    for (const std::string& shape : rwkv7.shapes) {
      for (const Rwkv7Format& format : rwkv7.formats) {
        for (Rwkv7Row& row : MeasureRwkv7(shape, format, rwkv7, threads)) {
          rwkv7_rows.push_back(std::move(row));
        }
      }
    }
    print([&] { PrintRwkv7(rwkv7_rows, bandwidth, rwkv7); });
  }

  // Qwen3.5: one model at a time, against the same bandwidth.
  const Qwen35BenchOptions qwen35 = Qwen35OptionsFromFlags().value();
  std::vector<Qwen35Row> qwen35_rows;
  if (!qwen35.shapes.empty()) {
    if (bandwidth.repeats == 0) {
      std::cerr << "memory bandwidth" << std::endl;
      bandwidth = MeasureMemoryBandwidth(rwkv7.bandwidth_bytes, /*repeats=*/9, rwkv7.device);
    }
    for (const std::string& shape : qwen35.shapes) {
      for (const Rwkv7Format& format : qwen35.formats) {
        for (int64_t count : threads) {
          SetEngineThreads(static_cast<int>(count));
          qwen35_rows.push_back(MeasureQwen35(shape, format, qwen35, bandwidth));
          qwen35_rows.back().threads = static_cast<int>(count);
        }
      }
    }
    print([&] { PrintQwen35(qwen35_rows, bandwidth, qwen35); });
  }

  std::vector<SamplingRow> sampling;
  if (sampling_vocab > 0) {
    std::cerr << "sampling" << std::endl;
    sampling = MeasureSampling(sampling_vocab, sampling_repeats, absl::GetFlag(FLAGS_sampling_model));
    print([&] { PrintSampling(sampling, sampling_vocab, sampling_repeats); });
  }

  const std::string constraint_model = absl::GetFlag(FLAGS_constraint_model);
  ConstraintRow constraint;
  if (!constraint_model.empty()) {
    std::cerr << "constrained decoding" << std::endl;
    constraint = MeasureConstrainedDecode(constraint_model, absl::GetFlag(FLAGS_constraint_tokens));
    print([&] { PrintConstraint(constraint, constraint_model); });
  }

  std::vector<QuantizedProductRow> quantized;
  if (absl::GetFlag(FLAGS_quantized_products)) {
    quantized = MeasureQuantizedProducts(options.repeats, absl::GetFlag(FLAGS_quick));
    print([&] { PrintQuantizedProducts(quantized, options.repeats); });
  }

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print([&] { absl::PrintF("run time: %.0f s\n", seconds); });
  if (json) {
    nlohmann::json report = ToJson(machine, peak, options, decode, states, prefill, batched);
    if (!rwkv7.shapes.empty()) report["rwkv7"] = Rwkv7Json(rwkv7_rows, bandwidth, rwkv7);
    if (!qwen35.shapes.empty()) report["qwen35"] = Qwen35Json(qwen35_rows, bandwidth, qwen35);
    if (sampling_vocab > 0) report["sampling"] = SamplingJson(sampling, sampling_vocab);
    if (!constraint_model.empty()) report["constraint"] = ConstraintJson(constraint);
    if (!quantized.empty()) report["quantized_products"] = QuantizedProductsJson(quantized);
    report["run_seconds"] = seconds;
    absl::PrintF("%s\n", report.dump(2));
  }
  return 0;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "engine_bench.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "measures the engine's attention kinds side by side: decode cost against context, state "
      "size, prefill forms and batched decode; then RWKV-7 at published shapes against this "
      "machine's memory bound");
  absl::ParseCommandLine(argc, argv);
  if (!linserve::KeepFreedMemoryAsFlagged()) return 2;
  absl::StatusOr<linserve::EngineBenchOptions> options = linserve::OptionsFromFlags();
  absl::StatusOr<linserve::Rwkv7BenchOptions> rwkv7 =
      options.ok() ? linserve::Rwkv7OptionsFromFlags(*options) : options.status();
  if (absl::StatusOr<linserve::Qwen35BenchOptions> qwen35 = linserve::Qwen35OptionsFromFlags();
      !qwen35.ok()) {
    std::cerr << qwen35.status().message() << std::endl;
    return 2;
  } else if (!qwen35->shapes.empty()) {
    // A Qwen3.5 section alone is a run.
  } else if (rwkv7.ok() && options->kinds.empty() && rwkv7->shapes.empty() &&
      absl::GetFlag(FLAGS_sampling_vocab) <= 0 && absl::GetFlag(FLAGS_constraint_model).empty() &&
      !absl::GetFlag(FLAGS_quantized_products)) {
    rwkv7 = absl::InvalidArgumentError(
        "--kinds and --rwkv7_shapes are both empty, --sampling_vocab is 0 and no other section "
        "is asked for");
  }
  if (!rwkv7.ok()) {
    std::cerr << rwkv7.status().message() << std::endl;
    return 2;
  }
  const absl::StatusOr<std::vector<int64_t>> threads =
      linserve::ParseIntList("threads", absl::GetFlag(FLAGS_threads));
  if (!threads.ok()) {
    std::cerr << threads.status().message() << std::endl;
    return 2;
  }
  // As the server: the pool is the engine's only parallelism.
  torch::set_num_threads(1);
  try {
    const bool quick = absl::GetFlag(FLAGS_quick);
    return linserve::Run(*options, *rwkv7, *threads, absl::GetFlag(FLAGS_sampling_vocab),
                         quick ? 5 : std::max(1, absl::GetFlag(FLAGS_sampling_repeats)),
                         absl::GetFlag(FLAGS_json));
  } catch (const c10::Error& e) {
    std::cerr << "engine error: " << e.what_without_backtrace() << std::endl;
    return 1;
  }
}

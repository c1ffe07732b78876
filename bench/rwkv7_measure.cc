#include "bench/rwkv7_measure.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/engine_measure.h"
#include "engine/base/status_macros.h"
#include "engine/model/language_model.h"
#include "engine/cpu/engine_threads.h"
#include "engine/cpu/huge_page_tensor.h"
#include "engine/rwkv7/rwkv7.h"
#include "engine/model/state.h"

namespace linserve {
namespace {

void Progress(const std::string& shape, const Rwkv7Format& format, const std::string& what) {
  std::cerr << "  rwkv7 " << shape << " " << Rwkv7FormatName(format) << ": " << what << std::endl;
}

torch::Tensor RandomTokens(const Rwkv7Config& config, std::vector<int64_t> shape,
                           const torch::Device& device) {
  return torch::randint(config.vocab_size, shape, torch::kInt64).to(device);
}

// Builds the module on the CPU with its parameters filled in place, in the
// compute dtype (the 0.4B shape is 1.7 GB in float32: no float32 copy beside
// it), quantizes its big matrices from those values for a quantized format,
// then moves it to `device`.
Rwkv7 RandomModule(const Rwkv7Config& config, const Rwkv7Format& format,
                   const Rwkv7BenchOptions& options) {
  Rwkv7Options module_options;
  module_options.dtype = format.dtype;
  module_options.quantization = format.quantization;
  if (format.group != 0) module_options.quantization_group = format.group;
  module_options.chunk_size = options.chunk_size;
  Rwkv7 module(config, module_options);
  TensorMap parameters;
  for (const auto& item : module->named_parameters()) parameters[item.key()] = item.value();
  FillRandomRwkv7Weights(config, options.seed, parameters);
  if (format.quantization != WeightQuantization::kNone) module->LoadWeights(parameters);
  module->to(torch::Device(options.device));
  module->PackForCpu();  // as Rwkv7Model::Build does
  return module;
}

int64_t StateBytes(const State& state) {
  int64_t bytes = 0;
  for (const LayerState& layer : state.layers) {
    for (const torch::Tensor& t : layer) bytes += t.numel() * t.element_size();
  }
  return bytes;
}

}  // namespace

std::string DtypeName(c10::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32:
      return "float32";
    case torch::kBFloat16:
      return "bfloat16";
    case torch::kFloat16:
      return "float16";
    default:
      return c10::toString(dtype);
  }
}

absl::StatusOr<c10::ScalarType> ParseDtype(const std::string& name) {
  if (name == "float32") return torch::kFloat32;
  if (name == "bfloat16") return torch::kBFloat16;
  if (name == "float16") return torch::kFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("'", name, "' is not float32, bfloat16, float16, int8 or int4"));
}

absl::StatusOr<Rwkv7Format> ParseRwkv7Format(const std::string& name,
                                             c10::ScalarType small_dtype) {
  const std::string kind = name.substr(0, name.find(':'));
  Rwkv7Format format{small_dtype};
  if (kind == "int8" || kind == "int4") {
    format.quantization = kind == "int8" ? WeightQuantization::kInt8 : WeightQuantization::kInt4;
    format.group = DefaultQuantizationGroup(format.quantization);
    if (kind.size() < name.size()) {
      const std::string group = name.substr(kind.size() + 1);
      if (group != "32" && group != "64") {
        return absl::InvalidArgumentError(
            absl::StrCat("'", name, "': the group is 32 or 64"));
      }
      format.group = std::stoi(group);
    }
    return format;
  }
  LINSERVE_ASSIGN_OR_RETURN(format.dtype, ParseDtype(name));
  return format;
}

std::string Rwkv7FormatName(const Rwkv7Format& format) {
  if (format.quantization == WeightQuantization::kNone) return DtypeName(format.dtype);
  return absl::StrCat(WeightQuantizationName(format.quantization), ":", format.group);
}

absl::StatusOr<Rwkv7Config> Rwkv7BenchShape(const std::string& name) {
  Rwkv7Config config = Rwkv7Config01B();
  if (name == "0.1b") return config;
  if (name == "0.4b") {
    config.n_layers = 24;
    config.d_model = 1024;
    config.n_heads = 16;
    config.ffn_size = 4 * config.d_model;
    return config;
  }
  if (name == "tiny") {
    config.n_layers = 2;
    config.d_model = 128;
    config.n_heads = 2;
    config.w_lora = config.a_lora = 16;
    config.v_lora = 8;
    config.g_lora = 32;
    config.ffn_size = 4 * config.d_model;
    config.vocab_size = 1024;
    return config;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown RWKV-7 shape '", name, "' (0.1b, 0.4b or tiny)"));
}

MemoryBandwidth MeasureMemoryBandwidth(int64_t bytes, int repeats, const std::string& device_name) {
  torch::NoGradGuard no_grad;
  const torch::Device device(device_name);
  MemoryBandwidth bandwidth;
  bandwidth.bytes = bytes;
  bandwidth.repeats = repeats;
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  // Filled, so that every page is mapped before the clock starts. On the
  // CPU in the same kind of memory as the weights (Rwkv7::PackForCpu puts
  // them in huge pages where it can), so that the bound is reachable.
  torch::Tensor buffer =
      device.is_cpu() ? EmptyInHugePages({n}, torch::kFloat32).fill_(1)
                      : torch::ones({n}, torch::TensorOptions().device(device));
  torch::Tensor from = buffer.narrow(0, 0, n / 2), to = buffer.narrow(0, n / 2, n / 2);
  std::vector<double> read, copy;
  for (int r = 0; r < repeats; ++r) {
    read.push_back(bytes / TimeSeconds(device, [&] { buffer.sum(); }) / 1e9);
    copy.push_back(bytes / TimeSeconds(device, [&] { to.copy_(from); }) / 1e9);
  }
  bandwidth.read_gb_per_s = Median(read);
  bandwidth.copy_gb_per_s = Median(copy);
  return bandwidth;
}

void MeasurePoolReadBandwidth(const std::vector<int64_t>& threads, MemoryBandwidth& bandwidth) {
  torch::NoGradGuard no_grad;
  const int64_t n = bandwidth.bytes / static_cast<int64_t>(sizeof(float));
  const int64_t span = (int64_t{16} << 20) / static_cast<int64_t>(sizeof(float));
  torch::Tensor buffer = EmptyInHugePages({n}, torch::kFloat32).fill_(1);
  const int before = EngineThreads();
  // Alternated by thread count, so that a moment of load elsewhere hits
  // every count alike.
  std::map<int, std::vector<double>> read;
  for (int r = 0; r < bandwidth.repeats; ++r) {
    for (int64_t count : threads) {
      SetEngineThreads(static_cast<int>(count));
      read[static_cast<int>(count)].push_back(
          bandwidth.bytes / TimeSeconds(torch::Device(torch::kCPU), [&] {
            ParallelFor((n + span - 1) / span, 1, [&](int64_t begin, int64_t end) {
              buffer.narrow(0, begin * span, std::min(n, end * span) - begin * span).sum();
            });
          }) / 1e9);
    }
  }
  SetEngineThreads(before);
  for (const auto& [count, rates] : read) bandwidth.pool_read_gb_per_s[count] = Median(rates);
}

std::vector<Rwkv7Row> MeasureRwkv7(const std::string& shape, const Rwkv7Format& format,
                                   const Rwkv7BenchOptions& options,
                                   const std::vector<int64_t>& threads) {
  torch::NoGradGuard no_grad;
  const Rwkv7Config config = Rwkv7BenchShape(shape).value();
  const torch::Device device(options.device);
  const int pool_before = EngineThreads();
  const size_t counts = threads.size();
  // Every timing below runs once per thread count in turn, on the one
  // module, the order turned each repeat: a minute of load elsewhere on a
  // shared machine then hits every count alike, and the rows' ratios are
  // side by side in the strict sense.
  auto at_each_count = [&](int repeat, const auto& measure) {
    for (size_t j = 0; j < counts; ++j) {
      const size_t c = (static_cast<size_t>(repeat) + j) % counts;
      SetEngineThreads(static_cast<int>(threads[c]));
      measure(c);
    }
  };
  Rwkv7Row row;
  row.shape = shape;
  row.format = format;

  Progress(shape, format, "random weights");
  Rwkv7 module{nullptr};
  row.init_seconds = TimeSeconds(device, [&] { module = RandomModule(config, format, options); });
  const std::map<std::string, QuantizedWeight> quantized = module->QuantizedMatrices();
  for (const auto& item : module->named_parameters()) {
    const torch::Tensor& p = item.value();
    auto q = quantized.find(item.key());
    if (q != quantized.end()) {
      // The embedding: one row's codes and scales per token.
      const QuantizedShape& s = q->second.shape;
      const int64_t rows = item.key() == "emb.weight" ? 1 : s.out;  // read per token
      row.parameters += s.out * s.in;
      row.weight_values_per_token += rows * s.in;
      const int64_t row_bytes = s.code_bytes() / (s.panels() * 16) + s.groups() * 2;
      row.weight_bytes_per_token += item.key() == "emb.weight" ? row_bytes : q->second.bytes();
      continue;
    }
    row.parameters += p.numel();
    const int64_t values = item.key() == "emb.weight" ? p.size(1) : p.numel();
    row.weight_values_per_token += values;
    row.weight_bytes_per_token += values * p.element_size();
  }
  row.state_bytes = StateBytes(module->NewState(1));
  std::vector<Rwkv7Row> rows(counts, row);
  for (size_t c = 0; c < counts; ++c) rows[c].threads = static_cast<int>(threads[c]);

  {
    Progress(shape, format, "32-row product rate");
    WeightMatrix& key = module->blocks->at<Rwkv7BlockImpl>(0).ffn->key;
    const torch::Tensor x = torch::randn({32, 1, config.d_model}, torch::TensorOptions(device));
    std::vector<std::vector<double>> rates(counts);
    for (int i = 0; i < 15; ++i) {
      at_each_count(i, [&](size_t c) {
        key->forward(x);  // the weight back in cache after the switch
        rates[c].push_back(2.0 * 32 * config.ffn_size * config.d_model /
                           TimeSeconds(device, [&] { key->forward(x); }) / 1e9);
      });
    }
    for (size_t c = 0; c < counts; ++c) rows[c].product_gflops_32_rows = Median(rates[c]);
  }
  {
    Progress(shape, format, "one-row head product");
    auto q = quantized.find("head.weight");
    const torch::Tensor& weight = module->head->weight;
    const int64_t bytes = q != quantized.end()
                              ? q->second.bytes()
                              : weight.numel() * static_cast<int64_t>(weight.element_size());
    const torch::Tensor x = torch::randn({1, 1, config.d_model}, torch::TensorOptions(device));
    std::vector<std::vector<double>> rates(counts);
    for (int i = 0; i < 15; ++i) {
      at_each_count(i, [&](size_t c) {
        rates[c].push_back(bytes / TimeSeconds(device, [&] { module->head->forward(x); }) / 1e9);
      });
    }
    for (size_t c = 0; c < counts; ++c) rows[c].head_product_gb_per_s = Median(rates[c]);
  }

  // Batched decode; batch 1 is the batch-1 decode. Sessions start from a
  // short prefill, so that their states hold something. Batch sizes and
  // thread counts take turns by blocks of steps, each block after an untimed
  // step, as in MeasureBatchedDecode (a batch-1 step right after a batch-32
  // one would find its weights evicted from cache).
  const size_t n = options.batches.size();
  std::vector<State> states;
  std::vector<torch::Tensor> tokens;  // (B) per batch size
  for (int64_t batch : options.batches) {
    Progress(shape, format, absl::StrCat("prefilling ", batch, " sessions"));
    states.push_back(module->NewState(batch));
    module->ForwardPrefill(RandomTokens(config, {batch, 16}, device), states.back());
    tokens.push_back(RandomTokens(config, {batch}, device));
  }
  Progress(shape, format, "batched decode");
  std::vector<std::vector<std::vector<double>>> seconds(  // [count][batch]
      counts, std::vector<std::vector<double>>(n));
  for (int r = 0; r < options.repeats; ++r) {
    for (size_t i = 0; i < n; ++i) {
      const size_t k = (r + i) % n;
      at_each_count(r, [&](size_t c) {
        module->ForwardStep(tokens[k], states[k]);
        for (int64_t step = 0; step < options.decode_steps; ++step) {
          seconds[c][k].push_back(
              TimeSeconds(device, [&] { module->ForwardStep(tokens[k], states[k]); }));
        }
      });
    }
  }
  for (size_t c = 0; c < counts; ++c) {
    for (size_t k = 0; k < n; ++k) {
      rows[c].batched_tokens_per_s.push_back(options.batches[k] / Median(seconds[c][k]));
    }
    rows[c].decode_ms = 1e3 / rows[c].batched_tokens_per_s.front();
  }
  states.clear();

  const int64_t length = options.prefill_tokens;
  const torch::Tensor prompt = RandomTokens(config, {1, length}, device);  // (1, T)
  {
    State warm = module->NewState(1);
    module->ForwardPrefill(prompt.narrow(1, 0, std::min<int64_t>(length, 64)), warm);
  }
  Progress(shape, format, absl::StrCat("chunked prefill of ", length, " tokens"));
  std::vector<std::vector<double>> rates(counts);
  for (int r = 0; r < options.prefill_repeats; ++r) {
    at_each_count(r, [&](size_t c) {
      State state = module->NewState(1);
      rates[c].push_back(length /
                         TimeSeconds(device, [&] { module->ForwardPrefill(prompt, state); }));
    });
  }
  for (size_t c = 0; c < counts; ++c) rows[c].chunked_tokens_per_s = Median(rates[c]);

  // Every token's logits are computed, as a recurrent-only engine would.
  const int64_t steps = std::min(options.recurrent_tokens, length);
  Progress(shape, format, absl::StrCat("token-by-token prefill of ", steps, " tokens"));
  std::vector<torch::Tensor> prompt_tokens;  // (1) each, built before the clock starts
  for (int64_t i = 0; i < steps; ++i) prompt_tokens.push_back(prompt.select(1, i));
  at_each_count(0, [&](size_t c) {
    State state = module->NewState(1);
    rows[c].recurrent_tokens_per_s = steps / TimeSeconds(device, [&] {
                                       for (const torch::Tensor& token : prompt_tokens) {
                                         module->ForwardStep(token, state);
                                       }
                                     });
  });
  SetEngineThreads(pool_before);
  return rows;
}

}  // namespace linserve

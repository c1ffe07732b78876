#include "bench/qwen35_measure.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/engine_measure.h"
#include "engine/cpu/huge_page_tensor.h"
#include "engine/model/state.h"
#include "engine/model/weight_matrix.h"
#include "engine/qwen35/qwen35.h"
#include "engine/qwen35/qwen35_config.h"
#include "engine/qwen35/qwen35_random.h"

namespace linserve {
namespace {

void Progress(const std::string& shape, const Rwkv7Format& format, const std::string& what) {
  std::cerr << "  qwen3.5 " << shape << " " << Rwkv7FormatName(format) << ": " << what
            << std::endl;
}

// `batch` sessions standing at `context` with a filled KV cache: what a
// decode step's cost depends on, without prefilling `context` tokens (a
// step reads every cached position whatever the values).
State StateAt(Qwen35& module, int64_t batch, int64_t context) {
  State state = module->NewState(batch);
  const Qwen35Config& c = module->config();
  const int64_t bs = module->options().kv_block_tokens;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.layer_types[i] != Qwen35LayerKind::kFullAttention) continue;
    for (BlockTable& table : state.tables) {
      for (TensorBlocks& blocks : table.layers[i]) {
        for (int64_t k = 0; k < BlocksFor(context, bs); ++k) {
          // In the memory the engine's own blocks take (WritableBlocks).
          const torch::TensorOptions options(module->options().kv_dtype);
          blocks.push_back(EmptyStateTensor({c.num_key_value_heads, bs, c.head_dim}, options)
                               .copy_(torch::randn({c.num_key_value_heads, bs, c.head_dim})));
        }
      }
    }
  }
  state.positions.assign(batch, context);
  return state;
}

double StepMs(Qwen35& module, State& state, int64_t steps, int repeats) {
  const torch::Tensor tokens =
      torch::randint(module->config().vocab_size, {state.batch_size()}, torch::kInt64);
  module->ForwardStep(tokens, state);  // warm
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    for (int64_t s = 0; s < steps; ++s) {
      seconds.push_back(TimeSeconds(torch::kCPU, [&] { module->ForwardStep(tokens, state); }));
    }
  }
  return 1e3 * Median(seconds);
}

}  // namespace

Qwen35Row MeasureQwen35(const std::string& shape, const Rwkv7Format& format,
                        const Qwen35BenchOptions& options, const MemoryBandwidth& bandwidth) {
  torch::NoGradGuard no_grad;
  const Qwen35Config config = Qwen35ShapeByName(shape).value();
  Qwen35Row row;
  row.shape = shape;
  row.format = format;
  Progress(shape, format, "random weights");
  Qwen35Options module_options;
  module_options.dtype = format.dtype;
  module_options.quantization = format.quantization;
  if (format.group != 0) module_options.quantization_group = format.group;
  Qwen35 module(config, module_options);
  {
    const TensorMap weights = RandomQwen35Weights(config, options.seed);
    module->LoadWeights(weights);
  }
  module->PackForCpu();
  const int64_t H = config.hidden_size;
  for (const auto& [name, shape_of] : Qwen35TensorShapes(config)) {
    int64_t n = 1;
    for (int64_t d : shape_of) n *= d;
    row.parameters += n;
  }
  // Bytes a token reads: each matrix as held (the head counted once, the
  // embedding one row), the small vectors as float32.
  const std::vector<std::string> quantized = module->QuantizedMatrixNames();
  for (const auto& item : module->named_modules()) {
    if (auto* m = dynamic_cast<WeightMatrixImpl*>(item.value().get())) {
      row.weight_bytes_per_token += m->quantized.defined()
                                        ? m->quantized.bytes()
                                        : m->weight.numel() * m->weight.element_size();
    }
  }
  row.weight_bytes_per_token += H * (format.quantization == WeightQuantization::kNone
                                         ? static_cast<int64_t>(c10::elementSize(format.dtype))
                                         : 1);
  const StateLayout layout(Qwen35StateSpecs(config, module_options.kv_dtype));
  row.gdn_state_bytes = StateBytes(layout, 0);
  row.kv_bytes_per_token = StateBytes(layout, 1) - StateBytes(layout, 0);
  {
    Progress(shape, format, "32-row product rate");
    WeightMatrix& up = module->layers->at<Qwen35LayerImpl>(0).mlp->up_proj;
    const torch::Tensor x = torch::randn({32, H});
    up->forward(x);
    std::vector<double> rates;
    for (int i = 0; i < 15; ++i) {
      rates.push_back(2.0 * 32 * config.intermediate_size * H /
                      TimeSeconds(torch::kCPU, [&] { up->forward(x); }) / 1e9);
    }
    row.product_gflops_32_rows = Median(rates);
  }
  {
    // Each kind's matrices one after another, so that every product reads
    // from memory as a decode step's do: the bigger kinds' matrices together
    // exceed the caches at these shapes (the smallest, in_proj_a and _b, do
    // not, and their rate is mostly the call's own cost).
    Progress(shape, format, "one-row products by matrix");
    std::map<std::string, std::vector<WeightMatrixImpl*>> kinds;
    for (const auto& item : module->named_modules()) {
      auto* matrix = dynamic_cast<WeightMatrixImpl*>(item.value().get());
      if (matrix == nullptr) continue;
      std::string kind = item.key();
      if (absl::StartsWith(kind, "layers.")) kind = kind.substr(kind.find('.', 7) + 1);
      kinds[kind].push_back(matrix);
    }
    for (const auto& entry : kinds) {
      const std::vector<WeightMatrixImpl*>& matrices = entry.second;
      Qwen35Row::ProductKind product{entry.first};
      std::vector<torch::Tensor> inputs;
      for (WeightMatrixImpl* m : matrices) {
        product.bytes += m->quantized.defined() ? m->quantized.bytes()
                                                : m->weight.numel() * m->weight.element_size();
        inputs.push_back(torch::randn({1, m->in_features()}));
      }
      auto all = [&] {
        for (size_t i = 0; i < matrices.size(); ++i) matrices[i]->forward(inputs[i]);
      };
      all();
      std::vector<double> seconds;
      for (int r = 0; r < 2 * options.repeats + 1; ++r) {
        seconds.push_back(TimeSeconds(torch::kCPU, all));
      }
      const double median = Median(seconds);
      product.gb_per_s = product.bytes / median / 1e9;
      row.one_row_products_ms += 1e3 * median;
      row.one_row_products.push_back(product);
    }
  }
  const double bytes_per_s = bandwidth.read_gb_per_s * 1e9;
  {
    // Every context's steps and a plain read of memory in turn, round after
    // round, and the bound at the read rate of these rounds: on a shared
    // machine the rate moves by the minute, and a bound taken from a read
    // minutes before (or contexts timed a minute apart) moved the ratio by
    // as much as any change measured.
    Progress(shape, format, "batch-1 decode by context, alternated with a read of memory");
    std::vector<State> states;
    for (int64_t context : options.contexts) states.push_back(StateAt(module, 1, context));
    const torch::Tensor buffer =
        EmptyInHugePages({bandwidth.bytes / static_cast<int64_t>(sizeof(float))}, torch::kFloat32)
            .fill_(1);
    std::vector<std::vector<double>> ms(states.size());
    std::vector<double> reads;
    for (int r = 0; r < options.repeats; ++r) {
      for (int k = 0; k < 2; ++k) {
        reads.push_back(bandwidth.bytes / TimeSeconds(torch::kCPU, [&] { buffer.sum(); }));
      }
      for (size_t i = 0; i < states.size(); ++i) {
        ms[i].push_back(StepMs(module, states[i], options.decode_steps, 1));
      }
    }
    row.decode_read_gb_per_s = Median(reads) / 1e9;
    for (size_t i = 0; i < states.size(); ++i) {
      const double bytes = row.weight_bytes_per_token +
                           row.kv_bytes_per_token * options.contexts[i] + 2.0 * row.gdn_state_bytes;
      row.decode_ms.push_back(Median(ms[i]));
      row.bound_ms.push_back(1e3 * bytes / Median(reads));
    }
  }
  {
    Progress(shape, format, absl::StrCat("batch ", options.batch, " against batch 1"));
    State one = StateAt(module, 1, options.batch_context);
    State many = StateAt(module, options.batch, options.batch_context);
    // Alternated, so that both see the same machine.
    std::vector<double> ms_one, ms_many;
    for (int r = 0; r < options.repeats; ++r) {
      ms_one.push_back(StepMs(module, one, options.decode_steps, 1));
      ms_many.push_back(StepMs(module, many, options.decode_steps, 1));
    }
    row.batch1_tokens_per_s = 1e3 / Median(ms_one);
    row.batch_tokens_per_s = options.batch * 1e3 / Median(ms_many);
    // The ceiling, as RWKV-7's: batch 1 at its bound, against batch B's
    // products at the 32-row product rate plus each session's state read
    // (and the GDN part written) once at the read bandwidth.
    const double state_bytes =
        row.kv_bytes_per_token * options.batch_context + 2.0 * row.gdn_state_bytes;
    const double values = row.parameters - (config.tie_word_embeddings ? 0.0 : 1.0) *
                                               config.vocab_size * H;  // the embedding: one row
    const double bound_1 = (row.weight_bytes_per_token + state_bytes) / bytes_per_s;
    const double batch_s = options.batch * 2.0 * values / (row.product_gflops_32_rows * 1e9) +
                           options.batch * state_bytes / bytes_per_s;
    row.ceiling_ratio = options.batch * bound_1 / batch_s;
    row.batch_model_seconds = batch_s;
  }
  for (int64_t context : options.cost_contexts) {
    Progress(shape, format, absl::StrCat("decode cost at ", context));
    State state = StateAt(module, 1, context);
    row.cost_ms.push_back(StepMs(module, state, options.decode_steps, 1));
  }
  for (int64_t tokens : options.prefill_tokens) {
    Progress(shape, format, absl::StrCat("prefill of ", tokens, " tokens"));
    const torch::Tensor prompt = torch::randint(config.vocab_size, {1, tokens}, torch::kInt64);
    std::vector<double> seconds;
    for (int r = 0; r < std::max(1, options.repeats - 1); ++r) {
      State state = module->NewState(1);
      seconds.push_back(TimeSeconds(torch::kCPU, [&] { module->ForwardPrefill(prompt, state); }));
    }
    const double s = Median(seconds);
    row.prefill_tokens_per_s.push_back(tokens / s);
    // Every matrix but the embedding and the head (one row only), and the
    // attention's two products over the causal triangle.
    const double matrix_flops =
        2.0 * tokens * (row.parameters - 2 * config.vocab_size * H * (config.tie_word_embeddings ? 0.5 : 1.0));
    const double attention_flops = 2.0 * 2.0 * config.full_attention_layers() *
                                   config.num_attention_heads * config.head_dim * tokens *
                                   (tokens + 1) / 2.0;
    row.prefill_gflops.push_back((matrix_flops + attention_flops) / s / 1e9);
  }
  return row;
}

void PrintQwen35(const std::vector<Qwen35Row>& rows, const MemoryBandwidth& bandwidth,
                 const Qwen35BenchOptions& options) {
  absl::PrintF("\nQwen3.5, random weights (248,320-id vocabulary); memory bandwidth "
               "%.1f GB/s read by one thread (median of %d)\n",
               bandwidth.read_gb_per_s, bandwidth.repeats);
  absl::PrintF("bound: (weights + KV cache read + GDN state read and written) / the read "
               "bandwidth measured between the decode steps; "
               "ceiling: batch 1 at its bound against the batch's products at the 32-row "
               "product rate plus its states at the bandwidth (a slow batch 1 raises the "
               "fraction of it; the step against its modelled time does not depend on batch 1)"
               "\n");
  for (const Qwen35Row& r : rows) {
    absl::PrintF("\n%s %s, %d thread%s: %.2fB parameters, %.0f MB weights read per token, GDN "
                 "state %.1f MB, KV %.1f KB/token, 32-row product %.0f GFLOP/s\n",
                 r.shape, Rwkv7FormatName(r.format), r.threads, r.threads == 1 ? "" : "s",
                 r.parameters / 1e9,
                 r.weight_bytes_per_token / 1e6, r.gdn_state_bytes / 1e6,
                 r.kv_bytes_per_token / 1e3, r.product_gflops_32_rows);
    std::vector<std::string> products;
    for (const Qwen35Row::ProductKind& p : r.one_row_products) {
      products.push_back(absl::StrFormat("%s %.0f MB %.1f", p.kind, p.bytes / 1e6, p.gb_per_s));
    }
    absl::PrintF("  one-row products, GB/s from memory: %s; all %.1f ms (%.1f GB/s)\n",
                 absl::StrJoin(products, ", "), r.one_row_products_ms,
                 r.weight_bytes_per_token / r.one_row_products_ms / 1e6);
    for (size_t i = 0; i < options.contexts.size(); ++i) {
      absl::PrintF("  batch-1 decode at context %6d: %7.1f ms, bound %6.1f ms, %.2fx the bound\n",
                   options.contexts[i], r.decode_ms[i], r.bound_ms[i],
                   r.decode_ms[i] / r.bound_ms[i]);
    }
    absl::PrintF("    (contexts and a read of memory alternated; its rate %.1f GB/s)\n",
                 r.decode_read_gb_per_s);
    const double measured = r.batch_tokens_per_s / r.batch1_tokens_per_s;
    const double step_ms = 1e3 * options.batch / r.batch_tokens_per_s;
    absl::PrintF("  batch %d at context %d: %.1f tokens/s, batch 1 %.1f: %.2fx; ceiling %.2fx; "
                 "%.2f of the ceiling; its step %.1f ms against %.1f modelled (%.2f)\n",
                 options.batch, options.batch_context, r.batch_tokens_per_s,
                 r.batch1_tokens_per_s, measured, r.ceiling_ratio, measured / r.ceiling_ratio,
                 step_ms, 1e3 * r.batch_model_seconds,
                 1e3 * r.batch_model_seconds / step_ms);
    std::vector<std::string> costs;
    for (size_t i = 0; i < options.cost_contexts.size(); ++i) {
      costs.push_back(absl::StrFormat("%d: %.1f ms", options.cost_contexts[i], r.cost_ms[i]));
    }
    absl::PrintF("  decode cost by context: %s\n", absl::StrJoin(costs, ", "));
    for (size_t i = 0; i < options.prefill_tokens.size(); ++i) {
      absl::PrintF("  prefill of %d tokens: %.1f tokens/s, %.0f GFLOP/s\n",
                   options.prefill_tokens[i], r.prefill_tokens_per_s[i], r.prefill_gflops[i]);
    }
  }
  // Each row against the first of its shape and format: the fewest threads.
  for (const Qwen35Row& r : rows) {
    for (const Qwen35Row& base : rows) {
      if (base.shape != r.shape || Rwkv7FormatName(base.format) != Rwkv7FormatName(r.format)) {
        continue;
      }
      if (base.threads != r.threads) {
        absl::PrintF("\n%s %s, %d threads against %d: batch-1 decode at context %d %.2fx, batch "
                     "%d %.2fx, prefill of %d tokens %.2fx",
                     r.shape, Rwkv7FormatName(r.format), r.threads, base.threads,
                     options.contexts.front(), base.decode_ms.front() / r.decode_ms.front(),
                     options.batch, r.batch_tokens_per_s / base.batch_tokens_per_s,
                     options.prefill_tokens.front(),
                     r.prefill_tokens_per_s.front() / base.prefill_tokens_per_s.front());
      }
      break;
    }
  }
  absl::PrintF("\n");
}

nlohmann::json Qwen35Json(const std::vector<Qwen35Row>& rows, const MemoryBandwidth& bandwidth,
                          const Qwen35BenchOptions& options) {
  nlohmann::json out = {{"read_gb_per_s", bandwidth.read_gb_per_s},
                        {"contexts", options.contexts},
                        {"cost_contexts", options.cost_contexts},
                        {"prefill_tokens", options.prefill_tokens},
                        {"batch", options.batch},
                        {"rows", nlohmann::json::array()}};
  for (const Qwen35Row& r : rows) {
    nlohmann::json products = nlohmann::json::object();
    for (const Qwen35Row::ProductKind& p : r.one_row_products) {
      products[p.kind] = {{"bytes", p.bytes}, {"gb_per_s", p.gb_per_s}};
    }
    out["rows"].push_back({{"shape", r.shape},
                           {"format", Rwkv7FormatName(r.format)},
                           {"threads", r.threads},
                           {"parameters", r.parameters},
                           {"weight_bytes_per_token", r.weight_bytes_per_token},
                           {"gdn_state_bytes", r.gdn_state_bytes},
                           {"kv_bytes_per_token", r.kv_bytes_per_token},
                           {"product_gflops_32_rows", r.product_gflops_32_rows},
                           {"one_row_products", products},
                           {"one_row_products_ms", r.one_row_products_ms},
                           {"decode_ms", r.decode_ms},
                           {"bound_ms", r.bound_ms},
                           {"decode_read_gb_per_s", r.decode_read_gb_per_s},
                           {"batch_tokens_per_s", r.batch_tokens_per_s},
                           {"batch1_tokens_per_s", r.batch1_tokens_per_s},
                           {"ceiling_ratio", r.ceiling_ratio},
                           {"batch_model_seconds", r.batch_model_seconds},
                           {"cost_ms", r.cost_ms},
                           {"prefill_tokens_per_s", r.prefill_tokens_per_s},
                           {"prefill_gflops", r.prefill_gflops}});
  }
  return out;
}

}  // namespace linserve

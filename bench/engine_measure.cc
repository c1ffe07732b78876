#include "bench/engine_measure.h"

#include <ATen/Version.h>
#include <dlfcn.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>
#include <utility>

#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/transformer/attention_kernel.h"
#include "engine/transformer/transformer_model.h"
#include "engine/model/state.h"

namespace linserve {
namespace {

using Clock = std::chrono::steady_clock;

// Waits for the work queued on `device`: CUDA kernels run asynchronously, so
// a clock read without this would time only their launch.
void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

torch::Tensor RandomTokens(const ModelConfig& config, int64_t batch, int64_t length,
                           const torch::Device& device) {
  return torch::randint(config.vocab_size, {batch, length}, torch::kInt64).to(device);  // (B, T)
}

// Progress goes to stderr so that a long run shows where it is while stdout
// keeps only the report.
void Progress(AttentionKind kind, const std::string& what) {
  std::cerr << "  " << AttentionKindName(kind) << ": " << what << std::endl;
}

int64_t TensorBytes(const State& state) {
  int64_t bytes = 0;
  for (const LayerState& layer : state.layers) {
    for (const torch::Tensor& t : layer) bytes += t.numel() * t.element_size();
  }
  return bytes;
}

std::string FirstField(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, key)) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "unknown";
}

// Libraries mapped into this process whose path names a BLAS (OpenBLAS,
// reference BLAS, BLIS, MKL): which libblas.so.3 the loader resolved.
std::vector<std::string> MappedBlasLibraries() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> found;
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string lower = absl::AsciiStrToLower(path);
    if (absl::StrContains(lower, "blas") || absl::StrContains(lower, "blis") ||
        absl::StrContains(lower, "mkl")) {
      found.insert(path);
    }
  }
  return {found.begin(), found.end()};
}

std::string OpenBlasCore() {
  using CoreName = char* (*)();
  auto core_name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (core_name == nullptr) return "";
  const char* name = core_name();
  return name != nullptr ? name : "";
}

// Debian's LibTorch says "generic": it calls whatever libblas.so.3 resolves to.
std::string TorchBlasInfo() {
  const std::string key = "BLAS_INFO=";
  const std::string config = at::show_config();
  const size_t at = config.find(key);
  if (at == std::string::npos) return "unknown";
  const size_t start = at + key.size();
  const size_t end = config.find_first_of(", \n", start);
  return config.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

double TimeSeconds(const torch::Device& device, const std::function<void()>& fn) {
  Synchronize(device);
  const Clock::time_point start = Clock::now();
  fn();
  Synchronize(device);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

ModelConfig BenchModelConfig(AttentionKind kind) {
  ModelConfig config;
  config.d_model = 256;
  config.n_layers = 4;
  config.n_heads = 4;
  config.head_dim = 64;
  config.mlp_hidden = 512;
  config.attention.kind = kind;
  config.attention.chunk_size = 64;
  config.attention.codebook_size = 64;
  config.attention.window = 64;
  config.attention.slots = 16;
  return config;
}

MachineInfo ReadMachineInfo(const std::string& device) {
  MachineInfo info;
  info.cores = std::thread::hardware_concurrency();
  info.cpu_model = FirstField("/proc/cpuinfo", "model name");
  info.blas = MappedBlasLibraries();
  info.torch_blas_info = TorchBlasInfo();
  info.openblas_core = OpenBlasCore();
  info.cpu_has_avx2 =
      absl::StrContains(absl::StrCat(" ", FirstField("/proc/cpuinfo", "flags"), " "), " avx2 ");
#ifdef TORCH_VERSION
  info.torch_version = TORCH_VERSION;
#else
  info.torch_version = "unknown";
#endif
  info.device = device;
  info.torch_threads = torch::get_num_threads();
  const char* openblas = std::getenv("OPENBLAS_NUM_THREADS");
  info.openblas_threads = openblas != nullptr ? openblas : "unset";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &utc);
  info.date = date;
  return info;
}

MatmulPeak MeasureMatmulPeak(int repeats, const std::string& device_name) {
  torch::NoGradGuard no_grad;
  const torch::Device device(device_name);
  MatmulPeak peak;
  peak.repeats = repeats;
  const int64_t n = peak.size;
  auto options = torch::TensorOptions().device(device);
  torch::Tensor a = torch::randn({n, n}, options);
  torch::Tensor b = torch::randn({n, n}, options);
  torch::Tensor c = torch::empty({n, n}, options);
  for (int i = 0; i < 2; ++i) torch::mm_out(c, a, b);  // warm up threads and caches
  std::vector<double> gflops;
  for (int r = 0; r < repeats; ++r) {
    const double seconds = TimeSeconds(device, [&] { torch::mm_out(c, a, b); });
    gflops.push_back(2.0 * n * n * n / seconds / 1e9);
  }
  peak.gflops = Median(gflops);
  return peak;
}

DecodeRow MeasureDecode(AttentionKind kind, const EngineBenchOptions& options) {
  torch::NoGradGuard no_grad;
  const ModelConfig config = BenchModelConfig(kind);
  const torch::Device device(options.device);
  auto model = TransformerModel::Create(config, options.seed, device);
  Transformer& net = model->module();
  const torch::Tensor token = RandomTokens(config, 1, 1, device).view({1});  // (B)

  // One session per context; contexts ascend, so each prefills only what it
  // adds to the previous one.
  std::vector<State> sessions;
  State prefilled = net->NewState(1);
  for (int64_t context : options.contexts) {
    Progress(kind, absl::StrCat("prefill to context ", context));
    net->ForwardChunked(RandomTokens(config, 1, context - prefilled.positions[0], device),
                        prefilled);
    const int64_t declared = model->StateBytes(context);
    if (TensorBytes(prefilled) != declared) {
      std::cerr << "  WARNING: " << AttentionKindName(kind) << " state at " << context << " holds "
                << TensorBytes(prefilled) << " bytes, StateBytes says " << declared << std::endl;
    }
    sessions.push_back(CloneState(prefilled));
  }

  // Every step is timed on its own and the contexts take turns step by step,
  // so that the shared machine's slowly varying noise falls on all of them
  // alike; the median over all steps then leaves its bursts out. (For the
  // constant-state kinds every context has the same working set, so a turn
  // leaves the caches as the next one wants them; softmax's small contexts
  // pay for following its large ones, which only understates its growth.)
  Progress(kind, "decode");
  const size_t n = sessions.size();
  std::vector<std::vector<double>> ms(n);
  for (int r = 0; r < options.repeats; ++r) {
    std::vector<State> states;
    for (const State& session : sessions) {
      states.push_back(CloneState(session));
      // Untimed: the first step is where a growing KV cache reallocates.
      net->ForwardStep(token, states.back());
    }
    for (int64_t step = 0; step < options.decode_steps; ++step) {
      for (size_t i = 0; i < n; ++i) {
        const size_t c = (step + i) % n;
        ms[c].push_back(1e3 * TimeSeconds(device, [&] { net->ForwardStep(token, states[c]); }));
      }
    }
  }
  DecodeRow row{kind, {}};
  for (const std::vector<double>& times : ms) row.ms_per_token.push_back(Median(times));
  return row;
}

StateRow MeasureStateBytes(AttentionKind kind, const std::vector<int64_t>& contexts) {
  // The state's layout needs no weights: kernels without parameters suffice.
  const ModelConfig config = BenchModelConfig(kind);
  const ModelConfig softmax_config = BenchModelConfig(AttentionKind::kSoftmax);
  const auto kernel = MakeAttentionKernel(config, AttentionParams{});
  const auto softmax = MakeAttentionKernel(softmax_config, AttentionParams{});
  StateRow row{kind, {}, {}};
  for (int64_t context : contexts) {
    const int64_t bytes = StateBytes(StateLayout{kernel->StateSpec(), config.n_layers}, context);
    const int64_t kv_bytes =
        StateBytes(StateLayout{softmax->StateSpec(), softmax_config.n_layers}, context);
    row.bytes.push_back(bytes);
    row.vs_softmax.push_back(static_cast<double>(bytes) / static_cast<double>(kv_bytes));
  }
  return row;
}

PrefillRow MeasurePrefill(AttentionKind kind, const EngineBenchOptions& options) {
  torch::NoGradGuard no_grad;
  const ModelConfig config = BenchModelConfig(kind);
  const torch::Device device(options.device);
  auto model = TransformerModel::Create(config, options.seed, device);
  Transformer& net = model->module();
  PrefillRow row{kind};
  const int64_t n = options.prefill_tokens;
  const torch::Tensor prompt = RandomTokens(config, 1, n, device);  // (1, T)
  {
    State warm = net->NewState(1);
    net->ForwardChunked(prompt.narrow(1, 0, std::min<int64_t>(n, 256)), warm);
  }

  Progress(kind, absl::StrCat("chunked prefill of ", n, " tokens"));
  std::vector<double> rates;
  for (int r = 0; r < options.prefill_repeats; ++r) {
    State state = net->NewState(1);
    rates.push_back(n / TimeSeconds(device, [&] { net->ForwardChunked(prompt, state); }));
  }
  row.chunked = Median(rates);

  const int64_t steps = std::min(options.recurrent_tokens, n);
  Progress(kind, absl::StrCat("token-by-token prefill of ", steps, " tokens"));
  std::vector<torch::Tensor> tokens;  // (1) each, built before the clock starts
  for (int64_t i = 0; i < steps; ++i) tokens.push_back(prompt.select(1, i));
  {
    State state = net->NewState(1);
    row.recurrent = steps / TimeSeconds(device, [&] {
                      for (const torch::Tensor& token : tokens) net->ForwardStep(token, state);
                    });
  }

  row.reference_bytes = ReferenceBytes(config, n);
  row.reference_tokens = row.reference_bytes <= options.reference_max_bytes
                             ? n
                             : std::min(n, options.reference_fallback_tokens);
  Progress(kind, absl::StrCat("reference forward of ", row.reference_tokens, " tokens"));
  const torch::Tensor reference_prompt = prompt.narrow(1, 0, row.reference_tokens);
  rates.clear();
  for (int r = 0; r < options.prefill_repeats; ++r) {
    rates.push_back(row.reference_tokens /
                    TimeSeconds(device, [&] { net->ForwardReference(reference_prompt); }));
  }
  row.reference = Median(rates);
  return row;
}

int64_t BatchedSteps(int64_t decode_steps, int64_t batch) {
  return std::max<int64_t>(4, decode_steps * 8 / std::max<int64_t>(batch, 8));
}

BatchRow MeasureBatchedDecode(AttentionKind kind, const EngineBenchOptions& options) {
  torch::NoGradGuard no_grad;
  const ModelConfig config = BenchModelConfig(kind);
  const torch::Device device(options.device);
  auto model = TransformerModel::Create(config, options.seed, device);
  Transformer& net = model->module();
  BatchRow row{kind, {}, {}, {}};

  // A few distinct sessions at positions spread over context +- 25%; a batch
  // of any size cycles through them, so every batch mixes positions.
  const int64_t c = options.batch_context;
  const int64_t distinct = std::min<int64_t>(16, options.batches.back());
  Progress(kind, absl::StrCat("prefilling ", distinct, " sessions around ", c, " tokens"));
  std::vector<State> sessions;
  for (int64_t i = 0; i < distinct; ++i) {
    const int64_t length = std::max<int64_t>(1, c - c / 4 + (c / 2) * i / distinct);
    State state = net->NewState(1);
    net->ForwardChunked(RandomTokens(config, 1, length, device), state);
    sessions.push_back(std::move(state));
  }

  std::vector<std::vector<const State*>> members(options.batches.size());
  std::vector<torch::Tensor> tokens;  // (B) per batch size
  for (size_t k = 0; k < options.batches.size(); ++k) {
    const int64_t batch = options.batches[k];
    double mean_position = 0;
    for (int64_t i = 0; i < batch; ++i) {
      members[k].push_back(&sessions[i % distinct]);
      mean_position += members[k].back()->positions[0];
    }
    const int64_t steps = BatchedSteps(options.decode_steps, batch);
    // Timed steps run from position + 1 to position + steps.
    mean_position = mean_position / batch + 1 + steps / 2.0;
    row.steps.push_back(steps);
    row.flops_per_token.push_back(DecodeFlopsPerToken(config, static_cast<int64_t>(mean_position)));
    tokens.push_back(RandomTokens(config, batch, 1, device).view({batch}));
  }

  // Unlike the contexts in MeasureDecode, batch sizes take turns by blocks of
  // steps: after a step at batch 128 a batch-1 step would find its weights
  // evicted from cache, which a server decoding at batch 1 never sees. Each
  // block starts with an untimed step and times the rest one by one.
  Progress(kind, "batched decode");
  const size_t n = options.batches.size();
  std::vector<std::vector<double>> rates(n);
  for (int r = 0; r < options.repeats; ++r) {
    for (size_t i = 0; i < n; ++i) {
      const size_t k = (r + i) % n;
      State state = StackStates(members[k]);
      net->ForwardStep(tokens[k], state);  // untimed: warms caches, grows a KV cache
      for (int64_t step = 0; step < row.steps[k]; ++step) {
        rates[k].push_back(options.batches[k] /
                           TimeSeconds(device, [&] { net->ForwardStep(tokens[k], state); }));
      }
    }
  }
  for (const std::vector<double>& r : rates) row.tokens_per_s.push_back(Median(r));
  return row;
}

// FLOPs of one decode step of one session, 2 per multiply-add:
//   weights: every matrix a token passes through, once: per layer the fused
//     q/k/v projection (D x 3Hd), the output projection (Hd x D), the MLP
//     (D x hidden, hidden x D) and compressed's slot projection (D x Hm); then
//     the tied output head (V x D). The embedding lookup is free.
//   attention, per layer and head, on the state:
//     linear_*:   S += phi(k) v^T and phi(q)^T S (2 F dv each), z likewise (2 F each)
//     softmax:    q . k_j and sum p_j v_j over the n = position + 1 cached keys
//                 (2 n d each); the engine scans its whole (spare) capacity, not
//                 counted here
//     vq:         quantising k against the codebook (2 c d), window scores and
//                 values (2 W d each), code scores and U (2 c d each)
//     compressed: decay-and-add of sum_k and sum_v (3 m d each), the pooling
//                 divisions (m d each), slot scores and weighted values (2 m d each)
// Norms, activations and softmaxes are O(D) or O(n) per token and left out.
double DecodeFlopsPerToken(const ModelConfig& config, int64_t position) {
  const double d_model = config.d_model, heads = config.n_heads, d = config.head_dim;
  const AttentionConfig& attention = config.attention;
  double layer_weights = d_model * 3 * heads * d + heads * d * d_model +
                         2 * d_model * static_cast<double>(config.mlp_hidden);
  if (attention.kind == AttentionKind::kCompressed) {
    layer_weights += d_model * heads * static_cast<double>(attention.slots);
  }
  const double weights =
      config.n_layers * layer_weights + static_cast<double>(config.vocab_size) * d_model;

  double per_head = 0;
  switch (attention.kind) {
    case AttentionKind::kSoftmax:
      per_head = 2 * 2 * static_cast<double>(position + 1) * d;
      break;
    case AttentionKind::kVq: {
      const double codes = attention.codebook_size, window = attention.window;
      per_head = 2 * codes * d + 2 * 2 * window * d + 2 * 2 * codes * d;
      break;
    }
    case AttentionKind::kCompressed: {
      const double slots = attention.slots;
      per_head = 2 * 3 * slots * d + 2 * slots * d + 2 * 2 * slots * d;
      break;
    }
    default: {
      const double features = attention.kind == AttentionKind::kLinearCosine ? d + 1 : d;
      per_head = 2 * 2 * features * d + 2 * 2 * features;
      break;
    }
  }
  return 2 * weights + config.n_layers * heads * per_head;
}

// The reference forms hold a few score-sized float tensors alive per layer:
// (B, H, T, T) for most kinds, (B, H, m, T, T) for compressed's pooled weights
// (scores, scaled or masked copies, exponentials, products). Peak resident
// memory above the model measured 2.3 (softmax) to 4.8 (vq) such copies at
// T = 4096 and 3.1 for compressed at T = 1024 (LibTorch 1.13, CPU); six
// copies plus 16 bytes per pair for the int64/bool index tensors of the
// causal mask and window bias leave a margin over that.
int64_t ReferenceBytes(const ModelConfig& config, int64_t tokens) {
  constexpr int64_t kScoreCopies = 6;
  const int64_t pairs = tokens * tokens;
  int64_t per_pair = config.n_heads * static_cast<int64_t>(sizeof(float));
  if (config.attention.kind == AttentionKind::kCompressed) per_pair *= config.attention.slots;
  return kScoreCopies * per_pair * pairs + 16 * pairs;
}

}  // namespace linserve

// linserve-rwkv7-probe: a quick measure of the RWKV-7 forms at a published
// shape with random weights (default 0.1B: 12 x 768, V 65,536): decode steps
// at a few batch sizes, and a prompt through the chunked prefill against the
// same prompt token by token through the recurrent step, per compute dtype.
// Medians of --repeats; one thread unless OMP_NUM_THREADS says otherwise.
//
//   OPENBLAS_NUM_THREADS=1 linserve-rwkv7-probe [--dtypes=float32,bfloat16] [--tokens=1024]

#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/malloc_flag.h"
#include "engine/rwkv7/rwkv7.h"
#include "engine/rwkv7/rwkv7_config.h"

ABSL_FLAG(std::string, dtypes, "float32,bfloat16", "compute dtypes, comma-separated");
ABSL_FLAG(std::string, batches, "1,8,32", "decode batch sizes, comma-separated");
ABSL_FLAG(int64_t, tokens, 1024, "prompt length of the prefill comparison");
ABSL_FLAG(bool, recurrent, true, "also time the prompt token by token (slow)");
ABSL_FLAG(int64_t, chunk, 32, "chunk size of the chunked prefill");
ABSL_FLAG(int32_t, repeats, 5, "repeats of each timing (median)");
ABSL_FLAG(int32_t, decode_steps, 8, "decode steps per repeat");
ABSL_FLAG(int64_t, width, 768, "C: width (heads of 64)");
ABSL_FLAG(int64_t, layers, 12, "layers");

namespace linserve {
namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double MedianSeconds(int repeats, F&& f) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const Clock::time_point start = Clock::now();
    f();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::vector<int64_t> IntList(const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t value = 0;
    if (absl::SimpleAtoi(piece, &value) && value > 0) out.push_back(value);
  }
  return out;
}

int Run() {
  if (std::getenv("OMP_NUM_THREADS") == nullptr) at::set_num_threads(1);
  Rwkv7Config config = Rwkv7Config01B();
  config.d_model = absl::GetFlag(FLAGS_width);
  config.n_heads = config.d_model / 64;
  config.ffn_size = 4 * config.d_model;
  config.n_layers = absl::GetFlag(FLAGS_layers);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  const int steps = absl::GetFlag(FLAGS_decode_steps);
  const int64_t T = absl::GetFlag(FLAGS_tokens);
  std::printf("shape %s, %d thread(s), chunk %ld\n", Rwkv7ConfigToJson(config).dump().c_str(),
              at::get_num_threads(), absl::GetFlag(FLAGS_chunk));
  const TensorMap weights = RandomRwkv7Weights(config, 1);
  torch::NoGradGuard no_grad;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_dtypes), ',')) {
    Rwkv7Options options;
    options.dtype = name == "bfloat16"  ? torch::kBFloat16
                    : name == "float16" ? torch::kFloat16
                                        : torch::kFloat32;
    options.chunk_size = absl::GetFlag(FLAGS_chunk);
    Rwkv7 module(config, options);
    module->LoadWeights(weights);
    module->PackForCpu();
    for (int64_t B : IntList(absl::GetFlag(FLAGS_batches))) {
      State state = module->NewState(B);
      const torch::Tensor tokens = torch::randint(config.vocab_size, {B}, torch::kInt64);
      module->ForwardStep(tokens, state);  // warm-up
      const double s = MedianSeconds(repeats, [&] {
        for (int i = 0; i < steps; ++i) module->ForwardStep(tokens, state);
      }) / steps;
      std::printf("%-8s decode B=%-3ld %8.2f ms/step  %8.1f tokens/s\n", std::string(name).c_str(),
                  B, s * 1e3, B / s);
    }
    const torch::Tensor prompt = torch::randint(config.vocab_size, {1, T}, torch::kInt64);
    {
      State warm = module->NewState();
      module->ForwardPrefill(prompt.narrow(1, 0, std::min<int64_t>(T, 64)), warm);
    }
    const double chunked = MedianSeconds(repeats, [&] {
      State state = module->NewState();
      module->ForwardPrefill(prompt, state);
    });
    if (!absl::GetFlag(FLAGS_recurrent)) {
      std::printf("%-8s prefill %ld tokens: chunked %.2f s (%.0f tokens/s)\n",
                  std::string(name).c_str(), T, chunked, T / chunked);
      continue;
    }
    // Token by token once (it is the slow one); the logits of every token
    // are computed, as a recurrent-only engine would.
    const double recurrent = MedianSeconds(1, [&] {
      State state = module->NewState();
      for (int64_t t = 0; t < T; ++t) module->ForwardStep(prompt.select(1, t), state);
    });
    std::printf("%-8s prefill %ld tokens: chunked %.2f s (%.0f tokens/s), token by token %.2f s "
                "(%.0f tokens/s): %.1fx\n",
                std::string(name).c_str(), T, chunked, T / chunked, recurrent, T / recurrent,
                recurrent / chunked);
  }
  return 0;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (!linserve::KeepFreedMemoryAsFlagged()) return 2;
  return linserve::Run();
}

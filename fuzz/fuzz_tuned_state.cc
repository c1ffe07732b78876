// libFuzzer target: the state-tuning reader, ParseRwkv7TunedState, on
// arbitrary bytes (an uploaded named state reaches it from any tenant). A
// refusal must be INVALID_ARGUMENT or DATA_LOSS, the codes the reader
// promises. A state it accepts must hold one (H, N, N) float32 matrix per
// layer of the model, every value finite.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "engine/rwkv7/rwkv7_tuned_state.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_tuned_state: broken promise: %s\n", what);
  std::abort();
}

// The seeds' shape (make_seed_corpus.cc): 2 layers of 2 heads of 4.
linserve::Rwkv7Config Shape() {
  linserve::Rwkv7Config config;
  config.n_layers = 2;
  config.n_heads = 2;
  config.head_size = 4;
  config.d_model = 8;
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  static const linserve::Rwkv7Config config = Shape();
  absl::StatusOr<linserve::TunedState> tuned = linserve::ParseRwkv7TunedState(bytes, config);
  if (!tuned.ok()) {
    const absl::StatusCode code = tuned.status().code();
    Require(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kDataLoss,
            "a refusal is INVALID_ARGUMENT or DATA_LOSS");
    return 0;
  }
  Require(static_cast<int64_t>(tuned->wkv.size()) == config.n_layers, "one matrix per layer");
  for (const at::Tensor& m : tuned->wkv) {
    Require(m.scalar_type() == at::kFloat, "float32");
    Require(m.sizes() == at::IntArrayRef({config.n_heads, config.head_size, config.head_size}),
            "(H, N, N)");
    Require(m.isfinite().all().item<bool>(), "every value finite");
  }
  return 0;
}

#ifndef LINSERVE_ENGINE_LOADER_SERVING_DEFAULTS_H_
#define LINSERVE_ENGINE_LOADER_SERVING_DEFAULTS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace linserve {

// The server limits a model needs out of the box, read from its directory's
// config.json alone (before the weights load, so that the server's options
// are whole when it starts). A model whose state grows with the position
// (Qwen3.5's KV cache) gets a context of min(max_position_embeddings,
// 32,768) tokens, shortened until one session's state at that length fits
// in an eighth of `memory_bytes`; its state files and prompts are bounded to
// match. Every other model keeps the fixed defaults (the softmax baseline's
// 8,192 tokens, 64 MiB, 16 KiB).
struct ServingDefaults {
  int64_t max_context_tokens = 8192;
  int64_t max_state_bytes = int64_t{64} << 20;
  int64_t max_prompt_bytes = 16384;
};

// `model_path` as --model names it; `memory_bytes` the machine's memory. A
// config.json that is not a regular file (a pipe) is not read: the fixed
// defaults.
// Errors only for a config.json that names Qwen3.5 and is malformed (the
// load would refuse it too).
absl::StatusOr<ServingDefaults> ServingDefaultsForModel(const std::string& model_path,
                                                        int64_t memory_bytes);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_LOADER_SERVING_DEFAULTS_H_

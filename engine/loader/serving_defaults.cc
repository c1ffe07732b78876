#include "engine/loader/serving_defaults.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "engine/base/status_macros.h"
#include "engine/model/state.h"
#include "engine/qwen35/qwen35.h"
#include "engine/qwen35/qwen35_config.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

// The longest context a growing model gets by default: a long conversation
// of the small Qwen3.5 models (32,768 tokens of the 0.8B shape are 768 MiB
// of float32 KV cache).
constexpr int64_t kDefaultLongContext = 32768;
constexpr int64_t kMiB = int64_t{1} << 20;
// UTF-8 bytes of prompt allowed per context token: text runs 3 to 5 bytes a
// token, so a whole context's history fits in one stateless request.
constexpr int64_t kPromptBytesPerToken = 8;

}  // namespace

absl::StatusOr<ServingDefaults> ServingDefaultsForModel(const std::string& model_path,
                                                        int64_t memory_bytes) {
  ServingDefaults defaults;
  // Only a regular file is read here: a config.json that is a pipe (a
  // model still being written, the lifecycle test's held model) is read
  // once, by the load, and must not block the server before it listens.
  const std::filesystem::path config_file = std::filesystem::path(model_path) / "config.json";
  std::error_code error;
  if (!std::filesystem::is_regular_file(config_file, error)) return defaults;
  std::ifstream in(config_file);
  if (!in) return defaults;
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !IsQwen35Config(json)) return defaults;
  LINSERVE_ASSIGN_OR_RETURN(Qwen35Config config, Qwen35ConfigFromJson(json));
  const StateLayout layout(Qwen35StateSpecs(config, torch::kFloat32));
  int64_t context = std::min(config.max_position_embeddings, kDefaultLongContext);
  while (context > 2048 && StateBytes(layout, context) > memory_bytes / 8) context /= 2;
  defaults.max_context_tokens = context;
  defaults.max_prompt_bytes =
      std::max(defaults.max_prompt_bytes, kPromptBytesPerToken * context);
  // The state file holds the state, the tokens it consumed (4 bytes each)
  // and a chat session's messages (each part within a prompt's bytes).
  defaults.max_state_bytes =
      std::max(defaults.max_state_bytes, (StateBytes(layout, context) + 4 * context +
                                          2 * int64_t{defaults.max_prompt_bytes} + kMiB) /
                                             kMiB * kMiB);
  return defaults;
}

}  // namespace linserve

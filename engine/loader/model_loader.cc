// LanguageModel::Load: recognises the architecture of a model directory and
// hands it to that architecture's loader. Adding an architecture adds one
// branch here and nothing above the engine.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "engine/model/language_model.h"
#include "engine/qwen35/qwen35_config.h"
#include "engine/qwen35/qwen35_model.h"
#include "engine/rwkv7/rwkv7_model.h"
#include "engine/base/status_macros.h"
#include "engine/transformer/transformer_model.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

constexpr char kConfigFile[] = "config.json";

// Weights a directory without config.json may hold: only RWKV-7 reads them
// without one (the transformer's config.json is required).
bool HoldsRwkv7Weights(const std::filesystem::path& dir) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::filesystem::path& file = entry.path();
    if (file.extension() == ".pth" || file.extension() == ".pt" ||
        file.filename() == "model.safetensors") {
      return true;
    }
  }
  return false;
}

// A model directory's config.json, read once (it may be a pipe). A directory
// without one but with a *.pth or model.safetensors is an RWKV-7 checkpoint.
absl::StatusOr<nlohmann::json> ReadConfigJson(const std::filesystem::path& dir) {
  const std::filesystem::path config = dir / kConfigFile;
  std::error_code error;
  if (!std::filesystem::exists(config, error) && HoldsRwkv7Weights(dir)) {
    return nlohmann::json{{"architecture", "rwkv7"}};
  }
  std::ifstream in(config);
  if (!in) return absl::NotFoundError(absl::StrCat("config: cannot open ", config.string()));
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", config.string(), " is not a JSON object"));
  }
  return json;
}

// The "architecture" config.json names; the transformer's own config.json
// (model_type "linserve") names none. A Hugging Face config.json names its
// family by model_type and architectures: Qwen3.5's is "qwen3_5"; any other
// is refused by name rather than taken for the transformer.
absl::StatusOr<std::string> ArchitectureOf(const nlohmann::json& config) {
  if (IsQwen35Config(config)) return std::string("qwen3_5");
  auto it = config.find("architecture");
  if (it == config.end()) {
    auto type = config.find("model_type");
    const bool ours = type != config.end() && *type == "linserve";
    if (!ours && (type != config.end() || config.contains("architectures"))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config: model_type ", type != config.end() ? type->dump() : "(none)",
          " / architectures ", config.value("architectures", nlohmann::json()).dump(),
          " is not a family linserve serves (known: qwen3_5, rwkv7, linserve's transformer)"));
    }
    return std::string("transformer");
  }
  if (!it->is_string()) {
    return absl::InvalidArgumentError("config: 'architecture' must be a string");
  }
  return it->get<std::string>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LanguageModel>> LanguageModel::Load(const std::string& path,
                                                                   const LoadOptions& options) {
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error)) {
    // A bare weights file: only RWKV-7 checkpoints come that way.
    LINSERVE_ASSIGN_OR_RETURN(std::unique_ptr<Rwkv7Model> model, Rwkv7Model::Load(path, options));
    return std::unique_ptr<LanguageModel>(std::move(model));
  }
  if (!std::filesystem::is_directory(path, error)) {
    return absl::NotFoundError(absl::StrCat("model '", path, "' is not a directory"));
  }
  LINSERVE_ASSIGN_OR_RETURN(nlohmann::json json, ReadConfigJson(path));
  LINSERVE_ASSIGN_OR_RETURN(std::string architecture, ArchitectureOf(json));
  if (architecture == "transformer") {
    LINSERVE_ASSIGN_OR_RETURN(ModelConfig config, ModelConfigFromJson(json));
    LINSERVE_ASSIGN_OR_RETURN(std::unique_ptr<TransformerModel> model,
                              TransformerModel::Load(path, config, options));
    return std::unique_ptr<LanguageModel>(std::move(model));
  }
  if (architecture == "rwkv7") {
    LINSERVE_ASSIGN_OR_RETURN(std::unique_ptr<Rwkv7Model> model,
                              Rwkv7Model::Load(path, json, options));
    return std::unique_ptr<LanguageModel>(std::move(model));
  }
  if (architecture == "qwen3_5") {
    LINSERVE_ASSIGN_OR_RETURN(std::unique_ptr<Qwen35Model> model,
                              Qwen35Model::Load(path, json, options));
    return std::unique_ptr<LanguageModel>(std::move(model));
  }
  return absl::InvalidArgumentError(absl::StrCat("model '", path, "': config.json names architecture '",
                                                 architecture, "'; known: transformer, rwkv7, qwen3_5"));
}

}  // namespace linserve

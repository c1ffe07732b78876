#include "engine/language_model.h"

#include <filesystem>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/fingerprint.h"
#include "engine/safetensors.h"
#include "engine/status_macros.h"

namespace linserve {
namespace {

constexpr char kConfigFile[] = "config.json";
constexpr char kWeightsFile[] = "model.safetensors";

absl::Status CheckTokens(absl::Span<const int64_t> tokens, int64_t vocab_size) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("tokens[", i, "] = ", tokens[i],
                                                     " is outside [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

torch::Tensor TokenTensor(absl::Span<const int64_t> tokens, const torch::Device& device) {
  return torch::tensor(std::vector<int64_t>(tokens.begin(), tokens.end()),
                       torch::TensorOptions().dtype(torch::kInt64))
      .to(device);
}

}  // namespace

absl::StatusOr<torch::Device> ParseDevice(const std::string& name) {
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (name.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available()) {
      return absl::FailedPreconditionError(
          absl::StrCat("device '", name, "': this LibTorch build has no usable CUDA"));
    }
    try {
      return torch::Device(name);
    } catch (const c10::Error& e) {
      return absl::InvalidArgumentError(absl::StrCat("device '", name, "': ", e.what_without_backtrace()));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("device '", name, "' is not cpu, cuda or cuda:N"));
}

LanguageModel::LanguageModel(const ModelConfig& config, Transformer module)
    : config_(config), module_(std::move(module)) {
  module_->eval();
}

std::unique_ptr<LanguageModel> LanguageModel::Create(const ModelConfig& config, uint64_t seed,
                                                     const torch::Device& device) {
  torch::manual_seed(seed);
  Transformer module(config);
  module->to(device);
  return std::unique_ptr<LanguageModel>(new LanguageModel(config, std::move(module)));
}

absl::StatusOr<std::unique_ptr<LanguageModel>> LanguageModel::Load(const std::string& dir,
                                                                   const torch::Device& device) {
  LINSERVE_ASSIGN_OR_RETURN(ModelConfig config,
                            ReadModelConfig((std::filesystem::path(dir) / kConfigFile).string()));
  LINSERVE_ASSIGN_OR_RETURN(
      SafetensorsContents weights,
      ReadSafetensorsFile((std::filesystem::path(dir) / kWeightsFile).string()));
  try {
    Transformer module(config);
    std::map<std::string, TensorSpec> expected;
    for (const auto& item : module->named_parameters()) {
      expected[item.key()] = {item.value().sizes().vec(), item.value().scalar_type()};
    }
    LINSERVE_RETURN_IF_ERROR(CheckTensors(weights.tensors, expected));
    torch::NoGradGuard no_grad;
    for (auto& item : module->named_parameters()) {
      item.value().copy_(weights.tensors.at(item.key()));
    }
    module->to(device);
    return std::unique_ptr<LanguageModel>(new LanguageModel(config, std::move(module)));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("loading ", dir, ": ", e.what_without_backtrace()));
  }
}

absl::Status LanguageModel::Save(const std::string& dir) const {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", error.message()));
  LINSERVE_RETURN_IF_ERROR(
      WriteSafetensorsFile((std::filesystem::path(dir) / kWeightsFile).string(), Weights()));
  return WriteModelConfig(config_, (std::filesystem::path(dir) / kConfigFile).string());
}

TensorMap LanguageModel::Weights() const {
  TensorMap tensors;
  for (const auto& item : module_->named_parameters()) {
    tensors[item.key()] = item.value().detach().cpu();
  }
  return tensors;
}

std::string LanguageModel::Fingerprint() const { return ModelFingerprint(config_, Weights()); }

int64_t LanguageModel::StateBytes(int64_t position) const {
  return linserve::StateBytes(kernel(), config_.n_layers, position);
}

absl::StatusOr<std::vector<float>> LanguageModel::Prefill(State& state,
                                                          absl::Span<const int64_t> tokens) {
  if (state.batch_size() != 1) return absl::InvalidArgumentError("Prefill: one session at a time");
  LINSERVE_ASSIGN_OR_RETURN(torch::Tensor last, PrefillBatch(state, tokens));
  return std::vector<float>(last.data_ptr<float>(), last.data_ptr<float>() + last.numel());
}

absl::StatusOr<torch::Tensor> LanguageModel::PrefillBatch(State& batch,
                                                          absl::Span<const int64_t> tokens) {
  const int64_t sessions = batch.batch_size();
  if (sessions < 1 || tokens.empty() || static_cast<int64_t>(tokens.size()) % sessions != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Prefill: ", tokens.size(), " tokens for ",
                                                   sessions, " sessions; need equal rows"));
  }
  for (int64_t position : batch.positions) {
    if (position != batch.positions[0]) {
      return absl::InvalidArgumentError("Prefill: sessions must stand at the same position");
    }
  }
  LINSERVE_RETURN_IF_ERROR(CheckTokens(tokens, config_.vocab_size));
  try {
    torch::NoGradGuard no_grad;
    // On failure the state must stay as it was: advance a shallow copy.
    State next = batch;
    torch::Tensor logits =
        module_->ForwardChunked(TokenTensor(tokens, device()).view({sessions, -1}), next);
    torch::Tensor last = logits.select(1, -1).to(torch::kCPU, torch::kFloat32).contiguous();
    batch = std::move(next);
    return last;  // (B, V)
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("Prefill: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<torch::Tensor> LanguageModel::Step(State& batch, absl::Span<const int64_t> tokens) {
  if (static_cast<int64_t>(tokens.size()) != batch.batch_size()) {
    return absl::InvalidArgumentError(absl::StrCat("Step: ", tokens.size(), " tokens for ",
                                                   batch.batch_size(), " sessions"));
  }
  LINSERVE_RETURN_IF_ERROR(CheckTokens(tokens, config_.vocab_size));
  try {
    torch::NoGradGuard no_grad;
    return module_->ForwardStep(TokenTensor(tokens, device()), batch)
        .to(torch::kCPU, torch::kFloat32)
        .contiguous();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("Step: ", e.what_without_backtrace()));
  }
}

std::string LanguageModel::SerializeState(const State& state) const {
  return linserve::SerializeState(MoveState(state, torch::kCPU), kernel());
}

absl::StatusOr<State> LanguageModel::DeserializeState(std::string_view bytes) const {
  try {
    return linserve::DeserializeState(bytes, kernel(), config_.n_layers, device());
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat("state: ", e.what_without_backtrace()));
  }
}

}  // namespace linserve

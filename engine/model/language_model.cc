#include "engine/model/language_model.h"

#include <torch/cuda.h>
#include <torch/nn/module.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

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

absl::StatusOr<torch::ScalarType> ParseComputeDtype(const std::string& name) {
  if (name == "float32") return torch::kFloat32;
  if (name == "bfloat16") return torch::kBFloat16;
  if (name == "float16") return torch::kFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("dtype '", name, "' is not float32, bfloat16 or float16"));
}

const char* ComputeDtypeName(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32: return "float32";
    case torch::kBFloat16: return "bfloat16";
    case torch::kFloat16: return "float16";
    default: return "unsupported";
  }
}

absl::Status ApplyDtypeFlag(const std::string& name, LoadOptions& options) {
  if (name == "int8" || name == "int4") {
    options.quantization = name == "int8" ? WeightQuantization::kInt8 : WeightQuantization::kInt4;
    return CheckQuantizationOptions(options);
  }
  absl::StatusOr<torch::ScalarType> dtype = ParseComputeDtype(name);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype '", name, "' is not float32, bfloat16, float16, int8 or int4"));
  }
  options.dtype = *dtype;
  return absl::OkStatus();
}

absl::Status CheckQuantizationOptions(const LoadOptions& options) {
  if (options.quantization == WeightQuantization::kNone) return absl::OkStatus();
  if (!options.device.is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat(
        WeightQuantizationName(options.quantization), " weights are for the CPU, not ",
        options.device.str(), ": use bfloat16 or float16 there"));
  }
  if (options.quantization_group != 0 && options.quantization_group != 32 &&
      options.quantization_group != 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantization group ", options.quantization_group, " is not 32 or 64"));
  }
  return absl::OkStatus();
}

int64_t DefaultQuantizationGroup(WeightQuantization kind) {
  return kind == WeightQuantization::kInt4 ? 32 : 64;
}

absl::StatusOr<State> LanguageModel::StateFromTuningFile(std::string_view /*bytes*/) const {
  return absl::UnimplementedError(absl::StrCat(
      "state-tuning files are RWKV-7's; this server's model is ", architecture(),
      " (upload a linserve state file instead)"));
}

std::string LanguageModel::WeightFormatName() const {
  if (weight_quantization() != WeightQuantization::kNone) {
    return WeightQuantizationName(weight_quantization());
  }
  return ComputeDtypeName(compute_dtype());
}

int64_t LanguageModel::StateBytes(int64_t position) const {
  return linserve::StateBytes(state_layout(), position);
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
  LINSERVE_RETURN_IF_ERROR(CheckTokens(tokens, vocab_size()));
  try {
    torch::NoGradGuard no_grad;
    // On failure the state must stay as it was: advance a shallow copy.
    State next = batch;
    torch::Tensor last =
        ForwardPrefill(TokenTensor(tokens, device()).view({sessions, -1}), next)
            .to(torch::kCPU, torch::kFloat32)
            .contiguous();
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
  LINSERVE_RETURN_IF_ERROR(CheckTokens(tokens, vocab_size()));
  try {
    torch::NoGradGuard no_grad;
    return ForwardDecode(TokenTensor(tokens, device()), batch)
        .to(torch::kCPU, torch::kFloat32)
        .contiguous();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("Step: ", e.what_without_backtrace()));
  }
}

std::vector<State> LanguageModel::SplitState(const State& batch) const {
  return linserve::SplitState(batch, state_layout());
}

std::string LanguageModel::SerializeState(const State& state) const {
  return linserve::SerializeState(MoveState(state, torch::kCPU), state_layout());
}

absl::StatusOr<State> LanguageModel::DeserializeState(std::string_view bytes) const {
  try {
    return linserve::DeserializeState(bytes, state_layout(), device());
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat("state: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<int64_t> LanguageModel::CheckSerializedState(std::string_view bytes) const {
  try {
    return linserve::CheckSerializedState(bytes, state_layout());
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat("state: ", e.what_without_backtrace()));
  }
}

WeightFootprint FootprintOf(const torch::nn::Module& module) {
  WeightFootprint footprint;
  auto add = [&footprint](const torch::Tensor& t) {
    footprint.elements += t.numel();
    footprint.bytes += static_cast<int64_t>(t.nbytes());
  };
  for (const torch::Tensor& t : module.parameters()) add(t);
  for (const torch::Tensor& t : module.buffers()) add(t);
  return footprint;
}

}  // namespace linserve

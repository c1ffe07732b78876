#include "tools/train/evaluation.h"

#include <torch/nn/functional.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "absl/strings/str_cat.h"
#include "engine/transformer/transformer_model.h"
#include "tools/train/corpus.h"

namespace linserve {
namespace {

constexpr int64_t kEvalBatch = 16;  // validation windows per forward pass

}  // namespace

const char* FormName(Form form) {
  switch (form) {
    case Form::kReference:
      return "reference";
    case Form::kRecurrent:
      return "recurrent";
    case Form::kChunked:
      break;
  }
  return "chunked";
}

torch::Tensor WindowTensor(const std::vector<int64_t>& bytes, int64_t length,
                           const torch::Device& device) {
  const int64_t count = static_cast<int64_t>(bytes.size()) / length;
  return torch::tensor(bytes, torch::kInt64).view({count, length}).to(device);
}

absl::StatusOr<Form> ParseForm(const std::string& name) {
  for (Form form : {Form::kChunked, Form::kReference, Form::kRecurrent}) {
    if (name == FormName(form)) return form;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("form '", name, "' is not chunked, reference or recurrent"));
}

torch::Tensor WindowLoss(Transformer& net, const torch::Tensor& bytes, Form form) {
  // Every window starts from the zero state, so it starts as a served
  // conversation does: after BOS when the model takes one.
  const ModelConfig& config = net->config();
  const torch::Tensor windows =
      config.add_bos
          ? torch::cat({torch::full({bytes.size(0), 1}, config.bos_id, bytes.options()), bytes}, 1)
          : bytes;                                         // (N, T + 1)
  const int64_t t = windows.size(1) - 1;
  const torch::Tensor inputs = windows.narrow(1, 0, t);  // (N, T)
  torch::Tensor logits;                                  // (N, T, V)
  if (form == Form::kReference) {
    logits = net->ForwardReference(inputs);
  } else {
    State state = net->NewState(windows.size(0));
    if (form == Form::kChunked) {
      logits = net->ForwardChunked(inputs, state);
    } else {
      std::vector<torch::Tensor> steps;
      for (int64_t i = 0; i < t; ++i) steps.push_back(net->ForwardStep(inputs.select(1, i), state));
      logits = torch::stack(steps, 1);
    }
  }
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                              windows.narrow(1, 1, t).reshape({-1}));
}

absl::StatusOr<double> ValidationLoss(TransformerModel& model, const Corpus& corpus, int64_t context,
                                      int64_t windows, Form form) {
  const std::vector<int64_t> bytes = corpus.ValidationWindows(context + 1, windows);
  if (bytes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "validation split has ", corpus.validation_bytes(), " bytes, fewer than context + 1 = ",
        context + 1));
  }
  try {
    torch::NoGradGuard no_grad;
    torch::Tensor all = WindowTensor(bytes, context + 1, model.device());  // (N, T + 1)
    const int64_t count = all.size(0);
    double total = 0;
    for (int64_t start = 0; start < count; start += kEvalBatch) {
      torch::Tensor batch = all.narrow(0, start, std::min(kEvalBatch, count - start));
      total += WindowLoss(model.module(), batch, form).item<double>() * batch.size(0);
    }
    return total / count;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("validation: ", e.what_without_backtrace()));
  }
}

}  // namespace linserve

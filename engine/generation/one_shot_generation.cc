#include "engine/generation/one_shot_generation.h"

#include <torch/types.h>

#include "engine/base/status_macros.h"
#include "engine/text/tokenizer.h"

namespace linserve {

absl::StatusOr<GenerateResult> Generate(LanguageModel& model, State& state,
                                        absl::Span<const int64_t> prompt,
                                        const SamplingParams& params) {
  LINSERVE_ASSIGN_OR_RETURN(std::vector<float> logits, model.Prefill(state, prompt));
  Generation generation(model.tokenizer(), params,
                        std::vector<int64_t>(prompt.begin(), prompt.end()));
  GenerateResult result;
  while (true) {
    Generation::Step step = generation.Next(logits);
    result.text += step.text;
    result.tokens.push_back(step.token);
    if (step.finish != FinishReason::kNone) {
      result.finish = step.finish;
      return result;
    }
    LINSERVE_ASSIGN_OR_RETURN(torch::Tensor next, model.Step(state, {step.token}));
    logits.assign(next.data_ptr<float>(), next.data_ptr<float>() + next.numel());
  }
}

}  // namespace linserve

#ifndef LINSERVE_ENGINE_ONE_SHOT_GENERATION_H_
#define LINSERVE_ENGINE_ONE_SHOT_GENERATION_H_

// A whole generation in one call over a model, for tools and tests. The
// server drives engine/generation/generation.h instead, one token at a time.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/generation/generation.h"
#include "engine/model/language_model.h"
#include "engine/generation/sampler.h"

namespace linserve {

struct GenerateResult {
  std::string text;             // complete UTF-8, cut before any stop sequence
  std::vector<int64_t> tokens;  // every sampled id, the last one included
  FinishReason finish = FinishReason::kNone;
};

// One request run to the end on one session, the non-streamed way: chunked
// prefill of `prompt` (already tokenized; BOS included when the session is
// new), then one recurrent step per sampled token. The last sampled token is
// not fed to the model: `state` stands after the prompt and every token but
// the last, which a continuing conversation feeds first. Not thread-safe
// (see LanguageModel).
absl::StatusOr<GenerateResult> Generate(LanguageModel& model, State& state,
                                        absl::Span<const int64_t> prompt,
                                        const SamplingParams& params);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_ONE_SHOT_GENERATION_H_

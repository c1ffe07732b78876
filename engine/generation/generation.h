#ifndef LINSERVE_ENGINE_GENERATION_H_
#define LINSERVE_ENGINE_GENERATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "engine/generation/sampler.h"
#include "engine/grammar/token_masks.h"
#include "engine/text/text_output.h"
#include "engine/text/tokenizer.h"

namespace linserve {

// Why a generation ended.
enum class FinishReason {
  kNone,    // still running
  kLength,  // max_new_tokens reached
  kStop,    // a stop sequence matched
  kEos,     // the model sampled EOS (and ignore_eos is off); never without an EOS id
  kGrammar, // the grammar's text is complete (kStop to a client)
};

const char* FinishReasonName(FinishReason reason);

// One request's decode loop minus the model: each step turns logits into a
// token (Sampler), the token into text (TextOutput) and decides whether the
// request is over (EOS, stop sequence, max_new_tokens). The caller feeds the
// returned token back to the model unless the generation has finished.
// Not thread-safe: one request, one thread at a time.
class Generation {
 public:
  // `params` should have passed ValidateSamplingParams. `prompt` is what the
  // penalties see before the first generated token (as Hugging Face's
  // input_ids).
  Generation(const Tokenizer& tokenizer, SamplingParams params, std::vector<int64_t> prompt);

  struct Step {
    int64_t token;        // the sampled id; -1 when none fits (constraint_failed())
    std::string text;     // complete UTF-8 that this token released (may be empty)
    FinishReason finish;  // kNone while the request goes on
  };

  // Samples the next token from one step's logits (one per vocabulary id),
  // never one of the tokenizer's never_sampled() ids. Must not be called once
  // finished().
  Step Next(absl::Span<const float> logits);
  // The same without a copy of the row: the mask and the penalties are
  // applied in place and undone before it returns, so the row ends as it
  // began. Rows of different generations may be sampled in parallel.
  Step NextInPlace(absl::Span<float> logits);

  // Constrains every later token to those whose bytes the grammar allows
  // next (the end of text only where the grammar may end); the generation
  // finishes with kGrammar as soon as the grammar allows nothing more. The
  // masks are shared with the other generations of the same grammar.
  void Constrain(std::shared_ptr<GrammarTokenMasks> grammar);
  bool constrained() const { return grammar_ != nullptr; }
  // Adds `bias` (token id, value; ids inside the vocabulary) to those logits
  // before every draw, as OpenAI's logit_bias; undone after it.
  void SetLogitBias(std::vector<std::pair<int64_t, float>> bias) { logit_bias_ = std::move(bias); }
  // Whether a constrained generation ended because no token fit (then
  // finish_reason() is kGrammar with the text incomplete, and the last step
  // sampled nothing: its token is -1).
  bool constraint_failed() const { return constraint_failed_; }
  // Whether that was the matcher's bound on parses (grammar_max_parses):
  // the grammar would go on, but only through more parses than allowed.
  bool parse_bound_hit() const { return parse_bound_hit_; }

  // Ends a generation from outside (cancellation): the text held back as a
  // possible stop prefix or an incomplete character.
  std::string Cancel();

  bool finished() const { return finish_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return finish_; }
  int32_t generated_tokens() const { return generated_; }
  // Prompt tokens followed by the generated ones.
  const std::vector<int64_t>& history() const { return history_; }
  Sampler& sampler() { return sampler_; }

 private:
  // Writes -inf over what the constraint forbids, the row saved to
  // masked_row_; false when it forbids every token.
  bool MaskByGrammar(absl::Span<float> logits);
  // The grammar's state after `token`; finishes the generation when it is done.
  void AdvanceGrammar(int64_t token, Step& step);

  const Tokenizer tokenizer_;
  const std::vector<int64_t> never_sampled_;
  std::vector<float> copy_;    // Next's row, reused across steps
  std::vector<float> masked_;  // the logits NextInPlace masked, to put back
  std::shared_ptr<GrammarTokenMasks> grammar_;  // null: unconstrained
  GrammarState grammar_state_;
  std::vector<float> masked_row_;  // the row before the grammar's mask
  std::vector<std::pair<int64_t, float>> logit_bias_;
  std::vector<float> unbiased_;  // the biased logits as they were
  bool constraint_failed_ = false;
  bool parse_bound_hit_ = false;
  const int32_t max_new_tokens_;
  const bool ignore_eos_;
  Sampler sampler_;
  TextOutput text_;
  std::vector<int64_t> history_;
  int32_t generated_ = 0;
  FinishReason finish_ = FinishReason::kNone;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GENERATION_H_

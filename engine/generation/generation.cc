#include "engine/generation/generation.h"

#include <limits>
#include <utility>

namespace linserve {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kNone:
      break;
  }
  return "none";
}

Generation::Generation(const Tokenizer& tokenizer, SamplingParams params,
                       std::vector<int64_t> prompt)
    : eos_id_(tokenizer.eos_id()),
      never_sampled_(tokenizer.never_sampled()),
      max_new_tokens_(params.max_new_tokens),
      ignore_eos_(params.ignore_eos),
      sampler_(params),
      text_(tokenizer, params.stop),
      history_(std::move(prompt)) {}

absl::Span<const float> Generation::Sampleable(absl::Span<const float> logits) {
  // Byte models have nothing to mask: no copy at all.
  if (never_sampled_.empty()) return logits;
  masked_logits_.assign(logits.begin(), logits.end());
  for (int64_t id : never_sampled_) {
    if (id < static_cast<int64_t>(masked_logits_.size())) {
      masked_logits_[id] = -std::numeric_limits<float>::infinity();
    }
  }
  return masked_logits_;
}

Generation::Step Generation::Next(absl::Span<const float> logits) {
  Step step{sampler_.Sample(Sampleable(logits), history_), "", FinishReason::kNone};
  history_.push_back(step.token);
  ++generated_;
  TextOutput::Piece piece = text_.PushToken(step.token);
  step.text = std::move(piece.text);
  if (piece.stopped) {
    step.finish = FinishReason::kStop;
  } else if (eos_id_ >= 0 && step.token == eos_id_ && !ignore_eos_) {
    step.finish = FinishReason::kEos;
  } else if (generated_ >= max_new_tokens_) {
    step.finish = FinishReason::kLength;
  }
  // A stop already flushed everything; the other ends release what is held.
  if (step.finish == FinishReason::kEos || step.finish == FinishReason::kLength) {
    step.text += text_.Finish();
  }
  finish_ = step.finish;
  return step;
}

std::string Generation::Cancel() { return text_.Finish(); }

}  // namespace linserve

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

Generation::Step Generation::Next(absl::Span<const float> logits) {
  copy_.assign(logits.begin(), logits.end());
  return NextInPlace(absl::MakeSpan(copy_));
}

Generation::Step Generation::NextInPlace(absl::Span<float> logits) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  masked_.clear();
  for (int64_t id : never_sampled_) {
    if (id >= static_cast<int64_t>(logits.size())) break;  // ascending
    masked_.push_back(logits[id]);
    logits[id] = kMinusInf;
  }
  Step step{sampler_.SampleInPlace(logits, history_), "", FinishReason::kNone};
  for (size_t i = 0; i < masked_.size(); ++i) logits[never_sampled_[i]] = masked_[i];
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

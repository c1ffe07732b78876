#include "engine/generation/generation.h"

#include <algorithm>
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
    case FinishReason::kGrammar:
      return "grammar";
    case FinishReason::kNone:
      break;
  }
  return "none";
}

Generation::Generation(const Tokenizer& tokenizer, SamplingParams params,
                       std::vector<int64_t> prompt)
    : tokenizer_(tokenizer),
      never_sampled_(tokenizer.never_sampled()),
      max_new_tokens_(params.max_new_tokens),
      ignore_eos_(params.ignore_eos),
      sampler_(params),
      text_(tokenizer, params.stop, params.skip_special_tokens),
      history_(std::move(prompt)) {}

Generation::Step Generation::Next(absl::Span<const float> logits) {
  copy_.assign(logits.begin(), logits.end());
  return NextInPlace(absl::MakeSpan(copy_));
}

void Generation::Constrain(std::shared_ptr<GrammarTokenMasks> grammar) {
  grammar_state_ = grammar->matcher().Start();
  grammar_ = std::move(grammar);
}

bool Generation::MaskByGrammar(absl::Span<float> logits) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  const TokenMask& allowed = grammar_->Allowed(grammar_state_);
  masked_row_.assign(logits.begin(), logits.end());
  const auto n = static_cast<int64_t>(logits.size());
  bool any = false;
  for (int64_t word = 0; word * 64 < n; ++word) {
    const uint64_t bits = word < static_cast<int64_t>(allowed.size()) ? allowed[word] : 0;
    if (bits == ~uint64_t{0}) {
      any = true;
      continue;
    }
    for (int64_t id = word * 64; id < std::min(n, word * 64 + 64); ++id) {
      if (!((bits >> (id & 63)) & 1)) {
        logits[id] = kMinusInf;
      } else {
        any = true;
      }
    }
  }
  return any;
}

void Generation::AdvanceGrammar(int64_t token, Step& step) {
  if (tokenizer_.IsEos(token)) return;
  GrammarMatcher& matcher = grammar_->matcher();
  if (!matcher.AdvanceAll(grammar_state_, tokenizer_.TokenBytes(token)) ||
      !GrammarMatcher::CanContinue(grammar_state_)) {
    // Done, or (the mask allowed only what fits) the matcher's bound was hit.
    constraint_failed_ = !GrammarMatcher::CanEnd(grammar_state_);
    if (step.finish == FinishReason::kNone || step.finish == FinishReason::kLength) {
      step.finish = FinishReason::kGrammar;
    }
  }
}

Generation::Step Generation::NextInPlace(absl::Span<float> logits) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  unbiased_.clear();
  for (const auto& [id, bias] : logit_bias_) {
    unbiased_.push_back(logits[id]);
    logits[id] += bias;
  }
  if (grammar_ && !MaskByGrammar(logits)) {
    // A dead end: nothing to sample. The row is put back as it came.
    std::copy(masked_row_.begin(), masked_row_.end(), logits.begin());
    for (size_t i = 0; i < unbiased_.size(); ++i) logits[logit_bias_[i].first] = unbiased_[i];
    constraint_failed_ = true;
    grammar_->DeadEnd(grammar_state_, &parse_bound_hit_);
    finish_ = FinishReason::kGrammar;
    return Step{-1, text_.Finish(), finish_};
  }
  masked_.clear();
  for (int64_t id : never_sampled_) {
    if (id >= static_cast<int64_t>(logits.size())) break;  // ascending
    masked_.push_back(logits[id]);
    logits[id] = kMinusInf;
  }
  Step step{sampler_.SampleInPlace(logits, history_), "", FinishReason::kNone};
  for (size_t i = 0; i < masked_.size(); ++i) logits[never_sampled_[i]] = masked_[i];
  if (grammar_) std::copy(masked_row_.begin(), masked_row_.end(), logits.begin());
  for (size_t i = 0; i < unbiased_.size(); ++i) logits[logit_bias_[i].first] = unbiased_[i];
  history_.push_back(step.token);
  ++generated_;
  TextOutput::Piece piece = text_.PushToken(step.token);
  step.text = std::move(piece.text);
  if (piece.stopped) {
    step.finish = FinishReason::kStop;
  } else if (tokenizer_.IsEos(step.token) && !ignore_eos_) {
    step.finish = FinishReason::kEos;
  } else if (generated_ >= max_new_tokens_) {
    step.finish = FinishReason::kLength;
  }
  if (grammar_ && step.finish != FinishReason::kStop) AdvanceGrammar(step.token, step);
  // A stop already flushed everything; the other ends release what is held.
  if (step.finish == FinishReason::kEos || step.finish == FinishReason::kLength ||
      step.finish == FinishReason::kGrammar) {
    step.text += text_.Finish();
  }
  finish_ = step.finish;
  return step;
}

std::string Generation::Cancel() { return text_.Finish(); }

}  // namespace linserve

#include "tests/engine/generation/reference_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace linserve {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Descending weight, then ascending id: a total order, so sorting is
// deterministic.
template <typename Candidate>
bool MoreProbable(const Candidate& a, const Candidate& b) {
  return a.weight > b.weight || (a.weight == b.weight && a.id < b.id);
}

// Applies the penalties using `counts` (all zero on entry, left all zero) as
// the per-token occurrence table, so the sampler can reuse it across calls.
void ApplyPenaltiesWithCounts(const SamplingParams& params, absl::Span<const int64_t> history,
                              absl::Span<float> logits, std::vector<int32_t>& counts) {
  if (params.repetition_penalty == 1.0f && params.presence_penalty == 0.0f &&
      params.frequency_penalty == 0.0f) {
    return;
  }
  const int64_t vocab = static_cast<int64_t>(logits.size());
  if (static_cast<int64_t>(counts.size()) < vocab) counts.resize(vocab, 0);
  for (int64_t token : history) {
    if (token >= 0 && token < vocab) ++counts[token];
  }
  // Second pass: the first occurrence of each token applies its penalty and
  // clears its count, which both de-duplicates and restores the all-zero table.
  for (int64_t token : history) {
    if (token < 0 || token >= vocab || counts[token] == 0) continue;
    float& logit = logits[token];
    logit = logit > 0.0f ? logit / params.repetition_penalty : logit * params.repetition_penalty;
    logit -= static_cast<float>(counts[token]) * params.frequency_penalty;
    logit -= params.presence_penalty;
    counts[token] = 0;
  }
}

}  // namespace

ReferenceSampler::ReferenceSampler(SamplingParams params) : params_(std::move(params)) {}

void ReferenceSampler::set_rng_state(const SamplerRngState& state) {
  params_.seed = state.seed;
  draws_ = state.draws;
}

int64_t ReferenceSampler::Sample(absl::Span<const float> logits, absl::Span<const int64_t> history) {
  BuildCandidates(logits, history);
  const double u = UniformDraw(params_.seed, draws_++);
  double total = 0.0;
  for (const Candidate& c : candidates_) total += c.weight;
  // Inverse CDF; every candidate has weight > 0, so whichever is hit, and the
  // last one that rounding may fall through to, has non-zero probability.
  const double target = u * total;
  double cumulative = 0.0;
  for (const Candidate& c : candidates_) {
    cumulative += c.weight;
    if (target < cumulative) return c.id;
  }
  return candidates_.back().id;
}

std::vector<TokenProbability> ReferenceSampler::Probabilities(absl::Span<const float> logits,
                                                     absl::Span<const int64_t> history) {
  BuildCandidates(logits, history);
  SortCandidates();
  double total = 0.0;
  for (const Candidate& c : candidates_) total += c.weight;
  std::vector<TokenProbability> result;
  result.reserve(candidates_.size());
  for (const Candidate& c : candidates_) result.push_back({c.id, c.weight / total});
  return result;
}

void ReferenceSampler::BuildCandidates(absl::Span<const float> logits, absl::Span<const int64_t> history) {
  logits_.assign(logits.begin(), logits.end());
  ApplyPenaltiesWithCounts(params_, history, absl::MakeSpan(logits_), counts_);
  candidates_.clear();
  sorted_ = true;

  // Strict comparisons skip NaN; the lowest id wins ties.
  float max_logit = -kInf;
  int32_t argmax = 0;
  for (size_t i = 0; i < logits_.size(); ++i) {
    if (logits_[i] > max_logit) {
      max_logit = logits_[i];
      argmax = static_cast<int32_t>(i);
    }
  }
  if (params_.temperature == 0.0f || max_logit == -kInf) {
    candidates_.push_back({1.0, argmax});
    return;
  }
  if (max_logit == kInf) {
    // +inf outweighs everything finite: share the mass among the +inf ids.
    for (size_t i = 0; i < logits_.size(); ++i) {
      if (logits_[i] == kInf) candidates_.push_back({1.0, static_cast<int32_t>(i)});
    }
  } else {
    // Subtracting the max before dividing keeps a tiny temperature from
    // overflowing; exp's argument is <= 0 and exactly 0 for the top token.
    const double temperature = params_.temperature;
    for (size_t i = 0; i < logits_.size(); ++i) {
      if (!(logits_[i] > -kInf)) continue;  // -inf or NaN
      const double weight = std::exp((static_cast<double>(logits_[i]) - max_logit) / temperature);
      if (weight > 0.0) candidates_.push_back({weight, static_cast<int32_t>(i)});
    }
  }
  sorted_ = candidates_.size() <= 1;
  KeepTopK();
  KeepTopP();
  KeepMinP();
}

void ReferenceSampler::SortCandidates() {
  if (sorted_) return;
  std::sort(candidates_.begin(), candidates_.end(), MoreProbable<Candidate>);
  sorted_ = true;
}

// Exactly k survive; ties at the boundary go to the lowest ids.
void ReferenceSampler::KeepTopK() {
  const size_t k = static_cast<size_t>(params_.top_k);
  if (k == 0 || k >= candidates_.size()) return;
  std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(),
                    MoreProbable<Candidate>);
  candidates_.resize(k);
  sorted_ = true;
}

// The smallest most-probable prefix whose mass reaches top_p of the total.
void ReferenceSampler::KeepTopP() {
  if (params_.top_p >= 1.0f || candidates_.size() <= 1) return;
  SortCandidates();
  double total = 0.0;
  for (const Candidate& c : candidates_) total += c.weight;
  const double threshold = static_cast<double>(params_.top_p) * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += candidates_[i].weight;
    if (cumulative >= threshold) {
      candidates_.resize(i + 1);
      return;
    }
  }
}

// p < min_p * p_max  <=>  weight < min_p * max weight: normalisation cancels,
// so running after top_k/top_p gives the same set as on the full distribution.
void ReferenceSampler::KeepMinP() {
  if (params_.min_p <= 0.0f || candidates_.size() <= 1) return;
  double max_weight = 0.0;
  for (const Candidate& c : candidates_) max_weight = std::max(max_weight, c.weight);
  const double threshold = static_cast<double>(params_.min_p) * max_weight;
  candidates_.erase(
      std::remove_if(candidates_.begin(), candidates_.end(),
                     [threshold](const Candidate& c) { return c.weight < threshold; }),
      candidates_.end());
}

}  // namespace linserve

#include "engine/generation/sampler.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The shortest text that reads back as `value`, so that a value just past a
// bound does not print as the bound itself (as 6 significant digits would).
std::string FormatFloat(float value) {
  char buffer[32];
  const std::to_chars_result end = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, end.ptr);
}

// "field = value is outside [lo, hi]" (or "(lo, hi]"); NaN fails both tests.
absl::Status CheckFloat(const char* field, float value, float lo, bool lo_open, float hi) {
  const bool above_lo = lo_open ? value > lo : value >= lo;
  if (above_lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " = ", FormatFloat(value), " is outside ",
                                                 lo_open ? "(" : "[", FormatFloat(lo), ", ",
                                                 FormatFloat(hi), "]"));
}

absl::Status CheckInt(const char* field, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " = ", value, " is outside [", lo, ", ", hi, "]"));
}

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

absl::Status ValidateSamplingParams(const SamplingParams& params, const SamplingLimits& limits) {
  LINSERVE_RETURN_IF_ERROR(CheckFloat("temperature", params.temperature, 0.0f, false, 100.0f));
  LINSERVE_RETURN_IF_ERROR(CheckInt("top_k", params.top_k, 0, limits.vocab_size));
  LINSERVE_RETURN_IF_ERROR(CheckFloat("top_p", params.top_p, 0.0f, true, 1.0f));
  LINSERVE_RETURN_IF_ERROR(CheckFloat("min_p", params.min_p, 0.0f, false, 1.0f));
  LINSERVE_RETURN_IF_ERROR(
      CheckFloat("repetition_penalty", params.repetition_penalty, 0.0f, true, 10.0f));
  LINSERVE_RETURN_IF_ERROR(
      CheckFloat("presence_penalty", params.presence_penalty, -2.0f, false, 2.0f));
  LINSERVE_RETURN_IF_ERROR(
      CheckFloat("frequency_penalty", params.frequency_penalty, -2.0f, false, 2.0f));
  LINSERVE_RETURN_IF_ERROR(
      CheckInt("max_new_tokens", params.max_new_tokens, 1, limits.max_new_tokens_cap));
  if (params.stop.size() > static_cast<size_t>(limits.max_stop_sequences)) {
    return absl::InvalidArgumentError(absl::StrCat("stop has ", params.stop.size(),
                                                   " sequences; at most ",
                                                   limits.max_stop_sequences, " are allowed"));
  }
  for (size_t i = 0; i < params.stop.size(); ++i) {
    const std::string& stop = params.stop[i];
    if (stop.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop[", i, "] is empty; a stop sequence needs at least 1 byte"));
    }
    if (stop.size() > static_cast<size_t>(limits.max_stop_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("stop[", i, "] is ", stop.size(),
                                                     " bytes; at most ", limits.max_stop_bytes,
                                                     " are allowed"));
    }
  }
  return absl::OkStatus();
}

void ApplyPenalties(const SamplingParams& params, absl::Span<const int64_t> history,
                    absl::Span<float> logits) {
  std::vector<int32_t> counts(logits.size(), 0);
  ApplyPenaltiesWithCounts(params, history, logits, counts);
}

double UniformDraw(uint64_t seed, uint64_t draw) {
  // SplitMix64 (Steele, Lea & Flood, "Fast Splittable Pseudorandom Number
  // Generators", OOPSLA 2014; constants of Vigna's splitmix64.c): the
  // (draw + 1)-th output of the generator started at state `seed`. Its state
  // advances by a constant, so output n is computed directly from (seed, n).
  uint64_t z = seed + (draw + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;  // the top 53 bits
}

Sampler::Sampler(SamplingParams params) : params_(std::move(params)) {}

void Sampler::set_rng_state(const SamplerRngState& state) {
  params_.seed = state.seed;
  draws_ = state.draws;
}

int64_t Sampler::Sample(absl::Span<const float> logits, absl::Span<const int64_t> history) {
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

std::vector<TokenProbability> Sampler::Probabilities(absl::Span<const float> logits,
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

void Sampler::BuildCandidates(absl::Span<const float> logits, absl::Span<const int64_t> history) {
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

void Sampler::SortCandidates() {
  if (sorted_) return;
  std::sort(candidates_.begin(), candidates_.end(), MoreProbable<Candidate>);
  sorted_ = true;
}

// Exactly k survive; ties at the boundary go to the lowest ids.
void Sampler::KeepTopK() {
  const size_t k = static_cast<size_t>(params_.top_k);
  if (k == 0 || k >= candidates_.size()) return;
  std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(),
                    MoreProbable<Candidate>);
  candidates_.resize(k);
  sorted_ = true;
}

// The smallest most-probable prefix whose mass reaches top_p of the total.
void Sampler::KeepTopP() {
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
void Sampler::KeepMinP() {
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

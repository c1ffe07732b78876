#include "engine/generation/sampler.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/cpu/cpu_kernels.h"
#include "engine/generation/sampling_kernel.h"

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

// One distinct token's penalties, given how often it occurs in the history.
void Penalise(const SamplingParams& params, int64_t token, int32_t count, absl::Span<float> logits,
              std::vector<std::pair<int64_t, float>>* saved) {
  float& logit = logits[token];
  if (saved != nullptr) saved->emplace_back(token, logit);
  logit = logit > 0.0f ? logit / params.repetition_penalty : logit * params.repetition_penalty;
  logit -= static_cast<float>(count) * params.frequency_penalty;
  logit -= params.presence_penalty;
}

// Applies the penalties to each distinct token of the history once, with its
// count. A history of up to kSortedHistory tokens is counted by sorting a
// copy (`scratch`), which stays in the first-level cache: a table of counts
// per id (256 KB at 65,536 ids, one per sampler) missed the cache at every
// token once 32 rows' tables shared it with the weights, about 30 us a row.
// A longer history uses the table, `counts` (all zero on entry, left all
// zero), whose pass is linear where the sort is not. Each penalised id's
// logit before the change goes to `saved`, if given.
void ApplyPenaltiesWithCounts(const SamplingParams& params, absl::Span<const int64_t> history,
                              absl::Span<float> logits, std::vector<int32_t>& counts,
                              std::vector<int64_t>& scratch,
                              std::vector<std::pair<int64_t, float>>* saved) {
  constexpr size_t kSortedHistory = 2048;
  if (params.repetition_penalty == 1.0f && params.presence_penalty == 0.0f &&
      params.frequency_penalty == 0.0f) {
    return;
  }
  const int64_t vocab = static_cast<int64_t>(logits.size());
  if (history.size() <= kSortedHistory) {
    scratch.clear();
    for (int64_t token : history) {
      if (token >= 0 && token < vocab) scratch.push_back(token);
    }
    std::sort(scratch.begin(), scratch.end());
    for (size_t i = 0; i < scratch.size();) {
      size_t end = i + 1;
      while (end < scratch.size() && scratch[end] == scratch[i]) ++end;
      Penalise(params, scratch[i], static_cast<int32_t>(end - i), logits, saved);
      i = end;
    }
    return;
  }
  if (static_cast<int64_t>(counts.size()) < vocab) counts.resize(vocab, 0);
  for (int64_t token : history) {
    if (token >= 0 && token < vocab) ++counts[token];
  }
  // Second pass: the first occurrence of each token applies its penalty and
  // clears its count, which both de-duplicates and restores the all-zero table.
  for (int64_t token : history) {
    if (token < 0 || token >= vocab || counts[token] == 0) continue;
    Penalise(params, token, counts[token], logits, saved);
    counts[token] = 0;
  }
}

// The sampling passes of the kernel family in force.
struct SamplingKernels {
  float (*max)(const float*, int64_t);
  void (*weights)(const SamplingWeightsArgs&);
  int64_t (*select)(const float*, int64_t, float, int32_t*);
  SamplingMass (*mass_at_least)(const float*, int64_t, float, double*);
  int64_t (*select_between)(const float*, int64_t, float, float, bool, int32_t*, float*);
};

const SamplingKernels& Kernels() {
  static const SamplingKernels kernels = [] {
    switch (ActiveCpuKernels()) {
      case CpuKernels::kAmx:
      case CpuKernels::kAvx512:
        return SamplingKernels{SamplingMaxAvx512, SamplingWeightsAvx512, SamplingSelectAvx512,
                               SamplingMassAtLeastAvx512, SamplingSelectBetweenAvx512};
      case CpuKernels::kAvx2:
        return SamplingKernels{SamplingMaxAvx2, SamplingWeightsAvx2, SamplingSelectAvx2,
                               SamplingMassAtLeastAvx2, SamplingSelectBetweenAvx2};
      case CpuKernels::kPortable:
        break;
    }
    return SamplingKernels{SamplingMaxPortable, SamplingWeightsPortable, SamplingSelectPortable,
                           SamplingMassAtLeastPortable, SamplingSelectBetweenPortable};
  }();
  return kernels;
}

// Where top-k and top-p look, most selective first: the ids whose weight is
// at least a power of two of the top token's (which is 1). The first that
// holds the top k, or a mass that reaches top_p, is taken; the last resort is
// every positive weight. Each try is one vectorized pass over the weights.
constexpr float kSelectThresholds[] = {0x1p-1f, 0x1p-3f, 0x1p-6f, 0x1p-10f, 0x1p-15f, 0x1p-22f,
                                       std::numeric_limits<float>::denorm_min()};
constexpr int kSelectTries = sizeof(kSelectThresholds) / sizeof(kSelectThresholds[0]);
constexpr float kAnyPositive = std::numeric_limits<float>::denorm_min();

uint32_t BitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

float FloatOf(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Descending weight, then ascending id: a total order.
template <typename Candidate>
bool MoreProbable(const Candidate& a, const Candidate& b) {
  return a.weight > b.weight || (a.weight == b.weight && a.index < b.index);
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
  std::vector<int32_t> counts;
  std::vector<int64_t> scratch;
  ApplyPenaltiesWithCounts(params, history, logits, counts, scratch, nullptr);
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
  copy_.assign(logits.begin(), logits.end());
  return SampleInPlace(absl::MakeSpan(copy_), history);
}

int64_t Sampler::SampleInPlace(absl::Span<float> logits, absl::Span<const int64_t> history) {
  Patch(logits, history);
  const Kept kept = Filter(logits);
  const int64_t token = Draw(kept, UniformDraw(params_.seed, draws_++));
  Unpatch(logits);
  return token;
}

std::vector<TokenProbability> Sampler::Probabilities(absl::Span<const float> logits,
                                                     absl::Span<const int64_t> history) {
  copy_.assign(logits.begin(), logits.end());
  Patch(absl::MakeSpan(copy_), history);
  const Kept kept = Filter(copy_);
  std::vector<TokenProbability> result;
  if (kept.single) {
    result.push_back({kept.token, 1.0});
    return result;
  }
  if (kept.threshold) {
    for (size_t id = 0; id < weights_.size(); ++id) {
      if (weights_[id] >= kept.above && weights_[id] > 0.0f) {
        result.push_back({static_cast<int64_t>(id), weights_[id]});
      }
    }
    for (int32_t id : band_) result.push_back({id, weights_[id]});
  } else {
    for (size_t i = 0; i < selected_.size(); ++i) {
      if (keep_[i]) result.push_back({selected_[i], weights_[selected_[i]]});
    }
  }
  double total = 0.0;
  for (const TokenProbability& p : result) total += p.probability;
  for (TokenProbability& p : result) p.probability /= total;
  std::sort(result.begin(), result.end(), [](const TokenProbability& a, const TokenProbability& b) {
    return a.probability > b.probability || (a.probability == b.probability && a.token < b.token);
  });
  return result;
}

void Sampler::Patch(absl::Span<float> logits, absl::Span<const int64_t> history) {
  saved_.clear();
  ApplyPenaltiesWithCounts(params_, history, logits, counts_, history_scratch_, &saved_);
}

void Sampler::Unpatch(absl::Span<float> logits) {
  for (const auto& [id, logit] : saved_) logits[id] = logit;
  saved_.clear();
}

Sampler::Kept Sampler::Filter(absl::Span<const float> logits) {
  const SamplingKernels& kernels = Kernels();
  const auto n = static_cast<int64_t>(logits.size());
  const float max_logit = kernels.max(logits.data(), n);
  Kept kept;
  if (params_.temperature == 0.0f || max_logit == -kInf) {
    // Greedy, or no distribution at all (every logit -inf or NaN: id 0).
    kept.single = true;
    if (max_logit > -kInf) {
      kept.token = std::find(logits.begin(), logits.end(), max_logit) - logits.begin();
    }
    return kept;
  }
  if (max_logit == kInf) return FilterInfinite(logits);

  const bool top_k = params_.top_k > 0 && params_.top_k < n;
  const bool top_p = params_.top_p < 1.0f;
  weights_.resize(n);
  block_sums_.resize((n + kSamplingBlock - 1) / kSamplingBlock);
  SamplingWeightsArgs args;
  args.logits = logits.data();
  args.n = n;
  args.max_logit = max_logit;
  args.temperature = params_.temperature;
  // min_p keeps p >= min_p p_max, and the top token's weight is exactly 1.
  // Filtered, it applies after top-k and top-p, which need the whole mass.
  args.floor = top_k || top_p ? 0.0f : params_.min_p;
  args.weights = weights_.data();
  args.block_sums = block_sums_.data();
  kernels.weights(args);
  band_.clear();
  if (!top_k && !top_p) {
    kept.threshold = true;
    kept.above = kAnyPositive;
    kept.block_sums = &block_sums_;
    return kept;
  }

  double total = 0.0;
  for (double sum : block_sums_) total += sum;
  if (top_p && !top_k && SearchTopP(params_.top_p * total, total, kept)) return kept;
  for (int t = 0;; ++t) {
    const bool last = t + 1 == kSelectTries;
    SelectAtLeast(kSelectThresholds[t]);
    auto count = static_cast<int64_t>(order_.size());
    if (top_k && count < params_.top_k && !last) continue;
    if (top_k) count = KeepTopK(count);
    if (top_p) {
      double mass = 0.0;
      for (int64_t i = 0; i < count; ++i) mass += order_[i].weight;
      // After top-k, top_p is a share of what top-k kept.
      const double threshold = params_.top_p * (top_k ? mass : total);
      if (mass < threshold && !last) continue;
      count = KeepTopP(count, threshold);
    }
    return KeepFirst(count);
  }
}

Sampler::Kept Sampler::KeepFirst(int64_t count) {
  keep_.assign(selected_.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    if (order_[i].weight >= params_.min_p) keep_[order_[i].index] = 1;
  }
  return Kept{};
}

// Top-p alone, for rows whose nucleus is wide (a flat distribution keeps
// thousands of ids at top_p 0.3). It brackets the boundary weight in a range
// [lo, hi) with the mass at or above lo reaching the threshold and the mass at
// or above hi short of it, by vectorized passes over the row that only count
// and sum (BracketTopP). It then gathers the range's ids and weights (one
// pass) and halves the range's bit patterns on those alone, until at most
// kBand ids lie in it. Every id at or above hi is kept; of the band, only its
// few ids are sorted, and kept most probable first until the mass reaches the
// threshold. The sums agree with a sorted walk's but for rounding; should the
// band's sum fall a rounding short, this gives up and the selection decides.
bool Sampler::SearchTopP(double threshold, double total, Kept& kept) {
  constexpr int64_t kBand = 64;
  const SamplingKernels& kernels = Kernels();
  const float* weights = weights_.data();
  const auto n = static_cast<int64_t>(weights_.size());
  Bracket range = BracketTopP(threshold, total);
  if (range.lo == 0) return false;

  // The mass at or above a bit pattern inside the range is the mass at or
  // above its top plus what is gathered at or above the pattern.
  if (static_cast<int64_t>(ids_.size()) < n) ids_.resize(n);
  if (static_cast<int64_t>(gathered_.size()) < n) gathered_.resize(n);
  // Dense where the range holds an id per 32 of the row or more.
  const bool dense = (range.at_lo.count - range.at_hi.count) * 32 >= n;
  const int64_t gathered = kernels.select_between(weights, n, FloatOf(range.lo), FloatOf(range.hi),
                                                  dense, ids_.data(), gathered_.data());
  const uint32_t top = range.hi;
  const SamplingMass above_top = range.at_hi;
  while (range.at_lo.count - range.at_hi.count > kBand && range.hi - range.lo > 1) {
    const uint32_t mid = range.lo + (range.hi - range.lo) / 2;
    SamplingMass at = kernels.mass_at_least(gathered_.data(), gathered, FloatOf(mid), nullptr);
    at.count += above_top.count;
    at.mass += above_top.mass;
    range.Narrow(mid, at, threshold);
  }
  // The kept mass per block, what a draw walks: kept_sums_ holds it at or
  // above the top (the row's pass at it); the gathered weights in [hi, top)
  // join their blocks, found by their places in gathered_ (a pass over the
  // gathered weights, not the row).
  const float high = FloatOf(range.hi);
  if (static_cast<int64_t>(positions_.size()) < gathered) positions_.resize(gathered);
  if (range.hi != top) {
    const int64_t joining = kernels.select_between(gathered_.data(), gathered, high,
                                                   FloatOf(top), /*dense=*/true,
                                                   positions_.data(), nullptr);
    for (int64_t k = 0; k < joining; ++k) {
      const int32_t at = positions_[k];
      kept_sums_[ids_[at] / kSamplingBlock] += gathered_[at];
    }
  }
  // The band: the gathered weights in [lo, hi).
  const int64_t in_band = kernels.select_between(gathered_.data(), gathered, FloatOf(range.lo),
                                                 high, /*dense=*/true, positions_.data(), nullptr);
  band_.clear();
  order_.clear();
  for (int64_t k = 0; k < in_band; ++k) {
    order_.push_back({gathered_[positions_[k]], static_cast<int32_t>(k)});
    band_.push_back(ids_[positions_[k]]);
  }
  std::sort(order_.begin(), order_.end(), MoreProbable<Candidate>);
  double reached = range.at_hi.mass;
  size_t take = 0;
  while (take < order_.size() && reached < threshold) reached += order_[take++].weight;
  if (reached < threshold) {
    band_.clear();
    return false;
  }
  // min-p drops what weighs less than min_p of the top token (weight 1).
  band_kept_.clear();
  for (size_t i = 0; i < take; ++i) {
    if (order_[i].weight >= params_.min_p) band_kept_.push_back(band_[order_[i].index]);
  }
  std::sort(band_kept_.begin(), band_kept_.end());
  band_.swap(band_kept_);
  kept.threshold = true;
  kept.above = std::max(high, params_.min_p);
  if (kept.above > high) kernels.mass_at_least(weights, n, kept.above, kept_sums_.data());
  for (int32_t id : band_) kept_sums_[id / kSamplingBlock] += weights[id];
  kept.block_sums = &kept_sums_;
  return true;
}

// Each probe is one pass over the row; kept_sums_ ends with the block sums of
// the probe at hi. Where the threshold is under kWide (a nucleus that may be a
// few ids: a trained model's rows) the octaves of the top weight come first,
// most selective first. Where it is kWide or more, every weight being at most
// the top's 1, the nucleus holds at least that many ids, so a sample of the
// row sees a good many of them: the boundary is guessed from it and checked a
// quarter octave either side, two passes where halving octaves took five or
// more. A guess that misses still narrows the range, and the octaves go on
// from where it left the range open.
Sampler::Bracket Sampler::BracketTopP(double threshold, double total) {
  constexpr double kWide = 256.0;
  constexpr uint32_t kGuessSpread = uint32_t{1} << 21;  // a quarter octave of bit patterns
  constexpr float kLowestOctave = 0x1p-125f;
  const uint32_t above_all = BitsOf(1.0f) + 1;
  const SamplingKernels& kernels = Kernels();
  const float* weights = weights_.data();
  const auto n = static_cast<int64_t>(weights_.size());
  Bracket range;
  range.hi = above_all;
  const size_t blocks = block_sums_.size();
  kept_sums_.assign(blocks, 0.0);
  probe_sums_.resize(blocks);
  auto probe = [&](uint32_t bits) {
    if (bits <= range.lo || bits >= range.hi) return;  // decided already
    const SamplingMass at = kernels.mass_at_least(weights, n, FloatOf(bits), probe_sums_.data());
    if (range.Narrow(bits, at, threshold)) kept_sums_.swap(probe_sums_);
  };
  if (threshold >= kWide) {
    const uint32_t guess = SampledBoundary(threshold / total);
    if (guess > kGuessSpread) {
      probe(guess - kGuessSpread);
      if (range.lo != 0) probe(guess + kGuessSpread);
    }
  }
  // Down from the top while the range is open above; then on down from hi.
  for (float t = 1.0f; range.hi == above_all && t >= kLowestOctave; t *= 0.5f) probe(BitsOf(t));
  for (float t = FloatOf(range.hi) * 0.5f; range.lo == 0 && t >= kLowestOctave; t *= 0.5f) {
    probe(BitsOf(t));
  }
  return range;
}

// Where the boundary lies in every kSampleStride-th weight: the bit pattern at
// or above which the sample's mass reaches `share` of the sample's whole
// mass, to a sixteenth of an octave (a quarter of the guess's spread either
// side). 0 where the sample is all 0. Its passes run over n / kSampleStride
// weights.
uint32_t Sampler::SampledBoundary(double share) {
  constexpr int64_t kSampleStride = 16;
  constexpr uint32_t kPrecision = uint32_t{1} << 19;
  const SamplingKernels& kernels = Kernels();
  sample_.clear();
  for (size_t i = kSampleStride / 2; i < weights_.size(); i += kSampleStride) {
    sample_.push_back(weights_[i]);
  }
  const auto m = static_cast<int64_t>(sample_.size());
  const double target = share * kernels.mass_at_least(sample_.data(), m, kAnyPositive, nullptr).mass;
  if (!(target > 0.0)) return 0;
  uint32_t lo = 0, hi = BitsOf(1.0f) + 1;
  while (hi - lo > kPrecision) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (kernels.mass_at_least(sample_.data(), m, FloatOf(mid), nullptr).mass >= target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// +inf outweighs everything finite: the mass is shared among the +inf ids,
// equally, so their order is their ids'.
Sampler::Kept Sampler::FilterInfinite(absl::Span<const float> logits) {
  const auto n = static_cast<int64_t>(logits.size());
  weights_.assign(n, 0.0f);
  selected_.clear();
  for (int64_t id = 0; id < n; ++id) {
    if (logits[id] == kInf) {
      weights_[id] = 1.0f;
      selected_.push_back(static_cast<int32_t>(id));
    }
  }
  auto count = static_cast<int64_t>(selected_.size());
  if (params_.top_k > 0) count = std::min<int64_t>(count, params_.top_k);
  if (params_.top_p < 1.0f) {
    const double threshold = static_cast<double>(params_.top_p) * static_cast<double>(count);
    int64_t reach = 1;
    while (static_cast<double>(reach) < threshold) ++reach;
    count = reach;
  }
  keep_.assign(selected_.size(), 0);
  std::fill(keep_.begin(), keep_.begin() + count, 1);
  return Kept{};
}

void Sampler::SelectAtLeast(float threshold) {
  const auto n = static_cast<int64_t>(weights_.size());
  if (static_cast<int64_t>(ids_.size()) < n) ids_.resize(n);
  const int64_t count = Kernels().select(weights_.data(), n, threshold, ids_.data());
  selected_.assign(ids_.begin(), ids_.begin() + count);
  order_.clear();
  for (size_t i = 0; i < selected_.size(); ++i) {
    order_.push_back({weights_[selected_[i]], static_cast<int32_t>(i)});
  }
}

// Exactly k survive, at the front of order_; ties at the boundary go to the
// lowest ids.
int64_t Sampler::KeepTopK(int64_t count) {
  const int64_t k = params_.top_k;
  if (k >= count) return count;
  std::nth_element(order_.begin(), order_.begin() + (k - 1), order_.begin() + count,
                   MoreProbable<Candidate>);
  return k;
}

// The smallest most-probable prefix whose mass reaches `threshold`, moved to
// the front of order_ by quickselect on mass: each round partitions the
// undecided range around a pivot and keeps the side where the threshold is
// crossed, so the work is linear in the candidates rather than a sort's
// n log n. The sums run in another order than a sorted walk: a boundary
// within rounding of the threshold may fall one token apart.
int64_t Sampler::KeepTopP(int64_t count, double threshold) {
  constexpr int64_t kSortBelow = 16;
  auto more = MoreProbable<Candidate>;
  const auto begin = order_.begin();
  int64_t lo = 0, hi = count;
  double reached = 0.0;  // the mass of order_[0, lo), all more probable than the rest
  while (hi - lo > kSortBelow) {
    Candidate& a = order_[lo];
    Candidate& b = order_[lo + (hi - lo) / 2];
    Candidate& c = order_[hi - 1];
    // The median of three as the pivot.
    const Candidate pivot = more(a, b) ? (more(b, c) ? b : (more(a, c) ? c : a))
                                       : (more(a, c) ? a : (more(b, c) ? c : b));
    const auto split = std::partition(begin + lo, begin + hi,
                                      [&](const Candidate& x) { return more(x, pivot); });
    std::iter_swap(split, std::find_if(split, begin + hi, [&](const Candidate& x) {
                     return x.index == pivot.index;
                   }));
    const int64_t at = split - begin;
    double upper = 0.0;
    for (int64_t i = lo; i < at; ++i) upper += order_[i].weight;
    if (reached + upper >= threshold) {
      hi = at;
      continue;
    }
    reached += upper + pivot.weight;
    if (reached >= threshold) return at + 1;
    lo = at + 1;
  }
  std::sort(begin + lo, begin + hi, more);
  for (int64_t i = lo; i < hi; ++i) {
    reached += order_[i].weight;
    if (reached >= threshold) return i + 1;
  }
  return hi;  // rounding left the threshold just out of reach: keep them all
}

// Inverse CDF in id order. Every kept token has weight > 0, so whichever is
// hit, and the last one that rounding may fall through to, has non-zero
// probability.
int64_t Sampler::Draw(const Kept& kept, double u) const {
  if (kept.single) return kept.token;
  if (kept.threshold) {
    const std::vector<double>& sums = *kept.block_sums;
    double total = 0.0;
    for (double sum : sums) total += sum;
    const double target = u * total;
    double below = 0.0;
    for (size_t block = 0; block < sums.size(); ++block) {
      if (!(target < below + sums[block])) {
        below += sums[block];
        continue;
      }
      const size_t begin = block * kSamplingBlock;
      const size_t end = std::min(weights_.size(), begin + kSamplingBlock);
      auto band = std::lower_bound(band_.begin(), band_.end(), static_cast<int32_t>(begin));
      size_t last = begin;
      for (size_t id = begin; id < end; ++id) {
        const bool in_band = band != band_.end() && static_cast<size_t>(*band) == id;
        if (in_band) ++band;
        if (!in_band && !(weights_[id] >= kept.above && weights_[id] > 0.0f)) continue;
        below += weights_[id];
        last = id;
        if (target < below) return static_cast<int64_t>(id);
      }
      return static_cast<int64_t>(last);
    }
    // Unreachable while the top token is kept; it is a token of non-zero
    // probability all the same.
    return std::max_element(weights_.begin(), weights_.end()) - weights_.begin();
  }
  double total = 0.0;
  for (size_t i = 0; i < selected_.size(); ++i) {
    if (keep_[i]) total += weights_[selected_[i]];
  }
  const double target = u * total;
  double below = 0.0;
  int64_t last = selected_.empty() ? 0 : selected_.front();  // unreachable: the top token is kept
  for (size_t i = 0; i < selected_.size(); ++i) {
    if (!keep_[i]) continue;
    below += weights_[selected_[i]];
    last = selected_[i];
    if (target < below) return last;
  }
  return last;
}

}  // namespace linserve

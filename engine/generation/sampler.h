#ifndef LINSERVE_ENGINE_SAMPLER_H_
#define LINSERVE_ENGINE_SAMPLER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/generation/sampling_kernel.h"

namespace linserve {

// Per-request sampling options, applied by Sampler below.
struct SamplingParams {
  float temperature = 1.0f;         // 0 => greedy (argmax, ties -> lowest id)
  int32_t top_k = 0;                // 0 => off
  float top_p = 1.0f;               // 1 => off; keep the smallest set whose probability >= top_p
  float min_p = 0.0f;               // 0 => off; drop tokens with p < min_p * p_max
  float repetition_penalty = 1.0f;  // CTRL/HF: logit>0 ? logit/r : logit*r, tokens in history
  float presence_penalty = 0.0f;    // OpenAI style: subtract once if token appeared
  float frequency_penalty = 0.0f;   // subtract count * penalty
  uint64_t seed = 0;
  int32_t max_new_tokens = 256;
  std::vector<std::string> stop;  // stop sequences, matched on bytes
  bool ignore_eos = false;
  // Special added tokens of a Hugging Face tokenizer ("<|im_start|>") are
  // left out of the text (as vLLM's default); false shows them. Non-special
  // added tokens ("<think>") always show.
  bool skip_special_tokens = true;
};

// Server-wide bounds that ValidateSamplingParams checks requests against.
struct SamplingLimits {
  int32_t max_new_tokens_cap = 4096;
  int32_t max_stop_sequences = 8;
  int32_t max_stop_bytes = 256;  // per stop sequence
  int32_t vocab_size = 258;      // top_k's upper bound
};

// InvalidArgument naming the field and its bound, e.g.
// "top_p = 1.5 is outside (0, 1]". NaN and infinities are out of every range.
absl::Status ValidateSamplingParams(const SamplingParams& params, const SamplingLimits& limits);

// Repetition, then frequency and presence penalties, in place, for every
// distinct token of `history` inside the vocabulary (ids outside it are
// ignored). For a token seen c > 0 times:
//   logit = logit > 0 ? logit / r : logit * r;  logit -= c * frequency;  logit -= presence.
// A pure function of its arguments; Sampler::Sample runs exactly this step.
void ApplyPenalties(const SamplingParams& params, absl::Span<const int64_t> history,
                    absl::Span<float> logits);

// The whole random state of a Sampler: draw n (0-based) is a pure function of
// (seed, n), so saving these two numbers and restoring them continues the
// token stream bit-exactly.
struct SamplerRngState {
  uint64_t seed = 0;
  uint64_t draws = 0;  // uniform draws made so far: one per Sample call
};

// The uniform double in [0, 1) that draw number `draw` of `seed` yields.
double UniformDraw(uint64_t seed, uint64_t draw);

// One token of the distribution a Sampler draws from.
struct TokenProbability {
  int64_t token;
  double probability;
};

// Turns one step's logits into a token: penalties -> temperature -> top_k ->
// top_p -> min_p -> sample (the order of Hugging Face and vLLM). The result
// depends only on the params, the RNG state and the arguments, never on other
// sessions, the CPU or the thread. Not thread-safe: one session's sampler is
// used by one thread; samplers of different sessions run in parallel.
//
// Built for 65,536-token rows (docs/DESIGN.md, "Sampling"): the penalties
// patch the row in place and undo it after, a float exponential vectorized
// for the CPU writes the one array of weights, and top-k and top-p find their
// boundary by thresholds and selection, never by sorting the vocabulary. The
// draw is the inverse CDF of the kept tokens in id order.
class Sampler {
 public:
  // `params` should have passed ValidateSamplingParams.
  explicit Sampler(SamplingParams params);

  // `logits` has one entry per vocabulary id. `history` is what the penalties
  // look at: the request's prompt tokens followed by the tokens generated so
  // far (as Hugging Face does with input_ids). Every call consumes exactly one
  // draw, greedy included, so rng_state().draws counts the tokens sampled.
  // The result never has zero probability under the filtered distribution:
  // -inf and NaN logits are never chosen while another id is. Should every
  // logit be -inf or NaN there is no distribution, and id 0 is returned.
  //
  int64_t Sample(absl::Span<const float> logits, absl::Span<const int64_t> history);
  // The same without a copy of the row: works on it in place and leaves it as
  // it found it, bit for bit.
  int64_t SampleInPlace(absl::Span<float> logits, absl::Span<const int64_t> history);

  // The filtered, normalised distribution Sample would draw from, most
  // probable first (ties: lowest id first). Consumes no draw.
  std::vector<TokenProbability> Probabilities(absl::Span<const float> logits,
                                              absl::Span<const int64_t> history);

  SamplerRngState rng_state() const { return {params_.seed, draws_}; }
  // Continues the stream of the sampler the state was taken from; the seed
  // replaces params().seed.
  void set_rng_state(const SamplerRngState& state);
  const SamplingParams& params() const { return params_; }

 private:
  // A token that top-k or top-p considers.
  struct Candidate {
    float weight;
    int32_t index;  // into selected_
  };
  // What Filter leaves to draw from.
  struct Kept {
    bool single = false;  // one token, `token`, has all the mass
    int64_t token = 0;
    // Every id whose weight_ is at least `above`, and the ids in band_;
    // `block_sums` hold their mass per kSamplingBlock ids.
    bool threshold = false;
    float above = 0.0f;
    const std::vector<double>* block_sums = nullptr;
    // Otherwise the ids selected_[i] with keep_[i] set.
  };

  // Penalties, in place; saved_ remembers what to put back.
  void Patch(absl::Span<float> logits, absl::Span<const int64_t> history);
  void Unpatch(absl::Span<float> logits);
  // The filtered distribution of the patched row.
  Kept Filter(absl::Span<const float> logits);
  Kept FilterInfinite(absl::Span<const float> logits);
  void SelectAtLeast(float threshold);
  // The first `prefix` of order_ after it: the top_k, then the top_p.
  int64_t KeepTopK(int64_t count);
  int64_t KeepTopP(int64_t count, double total);
  // A range of weights [lo, hi) (as bit patterns) whose mass at or above lo
  // reaches top-p's threshold and at or above hi falls short of it; lo is 0
  // where no weight's does.
  struct Bracket {
    uint32_t lo = 0;
    uint32_t hi = 0;
    SamplingMass at_lo;
    SamplingMass at_hi;
    // Narrows the range by `at`, the mass at or above `bits`; true where
    // `bits` became hi.
    bool Narrow(uint32_t bits, const SamplingMass& at, double threshold) {
      if (at.mass >= threshold) {
        lo = bits;
        at_lo = at;
        return false;
      }
      hi = bits;
      at_hi = at;
      return true;
    }
  };
  // Top-p alone by searching for its boundary weight; false where the sums
  // left it undecided (the selection decides then). `total` is the row's mass.
  bool SearchTopP(double threshold, double total, Kept& kept);
  Bracket BracketTopP(double threshold, double total);
  uint32_t SampledBoundary(double share);
  // The first `count` of order_ are kept, less those min-p drops.
  Kept KeepFirst(int64_t count);
  int64_t Draw(const Kept& kept, double u) const;

  SamplingParams params_;
  uint64_t draws_ = 0;
  // Scratch reused across calls, so that a warm step allocates nothing.
  std::vector<float> copy_;          // the const Sample's row
  std::vector<int32_t> counts_;      // per id, all zero between calls (long histories)
  std::vector<int64_t> history_scratch_;  // a short history, sorted
  std::vector<std::pair<int64_t, float>> saved_;  // patched ids and their logits
  std::vector<float> weights_;       // per id
  std::vector<double> block_sums_;   // per kSamplingBlock ids of weights_
  std::vector<int32_t> selected_;    // ids top-k and top-p look at, ascending
  std::vector<Candidate> order_;     // selected_, partitioned by probability
  std::vector<uint8_t> keep_;        // per selected_
  std::vector<int32_t> band_;        // SearchTopP's ids below its threshold, ascending
  std::vector<int32_t> band_kept_;   // scratch: the band's kept ids, swapped into band_
  std::vector<double> kept_sums_;    // SearchTopP's kept mass per block
  std::vector<double> probe_sums_;   // its passes' block sums
  std::vector<int32_t> ids_;         // scratch for n ids, never shrunk (no zero fill per call)
  std::vector<float> gathered_;      // SearchTopP's weights in its range, by id
  std::vector<int32_t> positions_;   // the band's places in gathered_
  std::vector<float> sample_;        // SampledBoundary's sample of the row
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_SAMPLER_H_

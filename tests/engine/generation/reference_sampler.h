#ifndef LINSERVE_TESTS_ENGINE_GENERATION_REFERENCE_SAMPLER_H_
#define LINSERVE_TESTS_ENGINE_GENERATION_REFERENCE_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "engine/generation/sampler.h"

namespace linserve {

// The sampler as it was before it was rebuilt for large vocabularies,
// kept verbatim (double exp, full copies, sorts) as the reference the tests
// hold the new one to. It turns one step's logits into a token: penalties -> temperature -> top_k ->
// top_p -> min_p -> sample (the order of Hugging Face and vLLM). The result
// depends only on the params, the RNG state and the arguments, never on other
// sessions. Not thread-safe: one session's sampler is used by one thread.
class ReferenceSampler {
 public:
  // `params` should have passed ValidateSamplingParams.
  explicit ReferenceSampler(SamplingParams params);

  // `logits` has one entry per vocabulary id. `history` is what the penalties
  // look at: the request's prompt tokens followed by the tokens generated so
  // far (as Hugging Face does with input_ids). Every call consumes exactly one
  // draw, greedy included, so rng_state().draws counts the tokens sampled.
  // The result never has zero probability under the filtered distribution:
  // -inf and NaN logits are never chosen while another id is. Should every
  // logit be -inf or NaN there is no distribution, and id 0 is returned.
  int64_t Sample(absl::Span<const float> logits, absl::Span<const int64_t> history);

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
  // A surviving token and its unnormalised probability.
  struct Candidate {
    double weight;
    int32_t id;
  };

  // Fills candidates_ with the filtered distribution (unnormalised weights).
  void BuildCandidates(absl::Span<const float> logits, absl::Span<const int64_t> history);
  void SortCandidates();
  void KeepTopK();
  void KeepTopP();
  void KeepMinP();

  SamplingParams params_;
  uint64_t draws_ = 0;
  // Scratch reused across calls, so that a warm step allocates nothing.
  std::vector<float> logits_;
  std::vector<int32_t> counts_;
  std::vector<Candidate> candidates_;
  bool sorted_ = false;  // candidates_ is in descending weight order
};

}  // namespace linserve

#endif  // LINSERVE_TESTS_ENGINE_GENERATION_REFERENCE_SAMPLER_H_

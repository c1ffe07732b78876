#ifndef LINSERVE_ENGINE_SAMPLING_KERNEL_H_
#define LINSERVE_ENGINE_SAMPLING_KERNEL_H_

// The sampler's passes over a whole vocabulary row (engine/generation/
// sampler.h), one set per kernel family (engine/cpu/cpu_kernels.h), each in a
// file of its own compiled for its instruction set from
// sampling_kernel.inc. No LibTorch and no standard-library templates in those
// files: an inline function compiled there for AVX-512 could otherwise be the
// copy the linker keeps for the whole program.
//
// Every family computes the same bits: the files are compiled with
// -ffp-contract=off (no fused multiply-add anywhere), the exponential is a
// fixed sequence of IEEE multiplies and adds, and each sum runs in 16 lanes
// (lane j adds the values j, j + 16, j + 32, ... of its block in order) that
// are then added in lane order. So a seeded draw picks the same token on
// every CPU.

#include <cstdint>

namespace linserve {

// Values per block of SamplingWeightsArgs::block_sums.
inline constexpr int64_t kSamplingBlock = 256;

struct SamplingWeightsArgs {
  const float* logits = nullptr;
  int64_t n = 0;
  float max_logit = 0.0f;    // finite, the largest logit
  float temperature = 1.0f;  // > 0
  float floor = 0.0f;        // weights below it are stored as 0 (min_p)
  float* weights = nullptr;  // n outputs
  double* block_sums = nullptr;  // one per kSamplingBlock values, the last may be short
};

// The largest of x[0, n), NaN skipped; -inf when there is none.
float SamplingMaxAvx512(const float* x, int64_t n);
float SamplingMaxAvx2(const float* x, int64_t n);
float SamplingMaxPortable(const float* x, int64_t n);

// weights[i] = exp((logits[i] - max_logit) * (1 / temperature)), 0 for -inf
// and NaN logits, for arguments below -87 (under float's normal range) and
// for weights below the floor; and each block's sum (16 float lanes of 16
// values, added in double).
void SamplingWeightsAvx512(const SamplingWeightsArgs& args);
void SamplingWeightsAvx2(const SamplingWeightsArgs& args);
void SamplingWeightsPortable(const SamplingWeightsArgs& args);

// How many of weights[0, n) are >= threshold, and their sum, summed as the
// block sums of SamplingWeights are; with block_sums, each block's sum of them
// too.
struct SamplingMass {
  int64_t count = 0;
  double mass = 0.0;
};
SamplingMass SamplingMassAtLeastAvx512(const float* weights, int64_t n, float threshold,
                                       double* block_sums);
SamplingMass SamplingMassAtLeastAvx2(const float* weights, int64_t n, float threshold,
                                     double* block_sums);
SamplingMass SamplingMassAtLeastPortable(const float* weights, int64_t n, float threshold,
                                         double* block_sums);

// Writes the ids i with weights[i] >= threshold to ids, ascending, and
// returns how many there are (ids has room for n).
int64_t SamplingSelectAvx512(const float* weights, int64_t n, float threshold, int32_t* ids);
int64_t SamplingSelectAvx2(const float* weights, int64_t n, float threshold, int32_t* ids);
int64_t SamplingSelectPortable(const float* weights, int64_t n, float threshold, int32_t* ids);

// The same for the ids with lo <= weights[i] < hi (weights >= 0, lo <= hi),
// and, with values, their weights to values (room for n). `dense` where a
// good share of the blocks of 16 are expected to hold one (a pass without a
// branch per block, which would mispredict), else a pass that skips the empty
// blocks.
int64_t SamplingSelectBetweenAvx512(const float* weights, int64_t n, float lo, float hi,
                                    bool dense, int32_t* ids, float* values);
int64_t SamplingSelectBetweenAvx2(const float* weights, int64_t n, float lo, float hi,
                                  bool dense, int32_t* ids, float* values);
int64_t SamplingSelectBetweenPortable(const float* weights, int64_t n, float lo, float hi,
                                      bool dense, int32_t* ids, float* values);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_SAMPLING_KERNEL_H_

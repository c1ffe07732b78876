#ifndef LINSERVE_BENCH_SAMPLING_MEASURE_H_
#define LINSERVE_BENCH_SAMPLING_MEASURE_H_

// linserve-engine-bench's sampling section: one row of logits turned into a
// token by the sampler (engine/generation/sampler.h) and by the one it
// replaced (tests/engine/generation/reference_sampler.h), side by side.

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace linserve {

struct SamplingRow {
  std::string setting;     // e.g. "temperature 1, top_p 0.3, penalties 0.5"
  std::string logits;      // "peaked" (a trained model's shape), "flat" or "model"
  double reference_us = 0;  // median per row
  double sampler_us = 0;
};

// Every setting on both kinds of row of `vocab` logits, each with a history of
// 256 tokens for the penalties; medians of `repeats` rows. With a model
// directory, also on that model's own logits ("model": `repeats` decode
// steps after a short prompt), whatever its vocabulary.
std::vector<SamplingRow> MeasureSampling(int64_t vocab, int32_t repeats,
                                         const std::string& model_dir);

void PrintSampling(const std::vector<SamplingRow>& rows, int64_t vocab, int32_t repeats);
nlohmann::json SamplingJson(const std::vector<SamplingRow>& rows, int64_t vocab);

}  // namespace linserve

#endif  // LINSERVE_BENCH_SAMPLING_MEASURE_H_

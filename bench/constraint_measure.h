#ifndef LINSERVE_BENCH_CONSTRAINT_MEASURE_H_
#define LINSERVE_BENCH_CONSTRAINT_MEASURE_H_

// linserve-engine-bench's constrained-decoding section: batch-1 decode of a
// model with and without a JSON schema's grammar, side by side.

#include <string>

#include "nlohmann/json.hpp"

namespace linserve {

struct ConstraintRow {
  double free_ms = 0;         // per token, unconstrained (model step + sampling)
  double cold_ms = 0;         // per token, the first constrained answer (masks computed)
  double warm_ms = 0;         // per token, the constrained answers after it
  double free_sampling_ms = 0;  // of free_ms, cold_ms, warm_ms: the sampling (and the mask)
  double cold_sampling_ms = 0;
  double warm_sampling_ms = 0;
  int answers = 0;            // constrained answers generated
  int tokens = 0;             // of them, tokens
  double mask_miss_ms = 0;    // mean time of a mask computed (a state seen first)
  int masks = 0;              // states whose masks were computed
};

// `tokens` tokens unconstrained, then constrained answers (a 10-field schema
// with a nested object, an enum and an array) until as many tokens; the
// cache of masks is shared by the answers, as the server's is.
ConstraintRow MeasureConstrainedDecode(const std::string& model_dir, int tokens);

void PrintConstraint(const ConstraintRow& row, const std::string& model_dir);
nlohmann::json ConstraintJson(const ConstraintRow& row);

}  // namespace linserve

#endif  // LINSERVE_BENCH_CONSTRAINT_MEASURE_H_

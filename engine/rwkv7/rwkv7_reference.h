#ifndef LINSERVE_ENGINE_RWKV7_REFERENCE_H_
#define LINSERVE_ENGINE_RWKV7_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "engine/rwkv7/rwkv7_config.h"

namespace linserve {

// RWKV-7 token by token in float64, written as plainly as BlinkDL's
// rwkv_v7_numpy.py: one token, one head, one matrix row at a time, and
// sharing no code with the fast forms (engine/rwkv7/rwkv7.h), so that a mistake
// there (a per-head one included) shows as a disagreement here. Slow: tests
// only. Feeds `tokens` from the zero state and returns the logits after each
// one, (T, V).
std::vector<std::vector<double>> Rwkv7ReferenceLogits(const Rwkv7Checkpoint& checkpoint,
                                                      absl::Span<const int64_t> tokens);
// The same from a state whose WKV matrices are `initial_wkv` (per layer, H
// N x N matrices, row by value, column by key: H N N values each) and whose
// token-shift vectors are zero: a state-tuned initial state.
std::vector<std::vector<double>> Rwkv7ReferenceLogits(
    const Rwkv7Checkpoint& checkpoint, absl::Span<const int64_t> tokens,
    const std::vector<std::vector<double>>& initial_wkv);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_RWKV7_REFERENCE_H_

#include "server/scheduling/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace linserve {

SampledToken DescribeToken(absl::Span<const float> logits, int64_t token, int32_t top_n,
                           const Tokenizer& tokenizer) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float x : logits) max_logit = std::max<double>(max_logit, x);
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
  const double log_normaliser = max_logit + std::log(sum);
  auto describe = [&](int64_t id) {
    const bool inside = id >= 0 && id < static_cast<int64_t>(logits.size());
    const double logprob = inside ? logits[id] - log_normaliser
                                  : -std::numeric_limits<double>::infinity();
    return TokenLogprob{id, tokenizer.TokenBytes(id), static_cast<float>(logprob)};
  };

  SampledToken out;
  out.token = describe(token);
  const int64_t n = std::min<int64_t>(top_n, logits.size());
  if (n > 0) {
    std::vector<int64_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int64_t a, int64_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int64_t i = 0; i < n; ++i) out.top.push_back(describe(ids[i]));
  }
  return out;
}

}  // namespace linserve

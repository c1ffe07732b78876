#include "client/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace linserve {

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  auto rank = [&](double p) {
    const size_t r = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
    return values[std::min(n, std::max<size_t>(r, 1)) - 1];
  };
  d.count = static_cast<int64_t>(n);
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(n);
  d.p50 = rank(0.50);
  d.p90 = rank(0.90);
  d.p99 = rank(0.99);
  d.max = values.back();
  return d;
}

nlohmann::json ToJson(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50},
          {"p90", d.p90},     {"p99", d.p99},   {"max", d.max}};
}

}  // namespace linserve

#ifndef LINSERVE_CLIENT_STATS_H_
#define LINSERVE_CLIENT_STATS_H_

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace linserve {

// A sample summarised as the load test reports it.
struct Distribution {
  int64_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

// Percentiles by the nearest-rank method (the value at rank ceil(p * n)), so
// every reported figure is one that was measured. An empty sample is all 0.
Distribution Summarize(std::vector<double> values);

nlohmann::json ToJson(const Distribution& d);

}  // namespace linserve

#endif  // LINSERVE_CLIENT_STATS_H_

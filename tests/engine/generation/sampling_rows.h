#ifndef LINSERVE_TESTS_ENGINE_GENERATION_SAMPLING_ROWS_H_
#define LINSERVE_TESTS_ENGINE_GENERATION_SAMPLING_ROWS_H_

// Rows of logits the sampler tests and linserve-engine-bench's sampling
// section share: "flat" ones are N(0, 1); "peaked" ones, like a trained
// model's, have 30 ids raised by 8 to 14 above N(0, 3).

#include <cstdint>
#include <random>
#include <vector>

namespace linserve {

inline std::vector<float> RandomLogitsRow(int64_t vocab, bool peaked, std::mt19937_64& rng) {
  // Drawn in double: the float distribution goes through long double logs,
  // ten times slower.
  std::normal_distribution<double> normal(0.0, peaked ? 3.0 : 1.0);
  std::vector<float> row(vocab);
  for (float& x : row) x = static_cast<float>(normal(rng));
  if (peaked) {
    std::uniform_int_distribution<int64_t> id(0, vocab - 1);
    for (int i = 0; i < 30; ++i) row[id(rng)] += 8.0f + static_cast<float>(i % 7);
  }
  return row;
}

}  // namespace linserve

#endif  // LINSERVE_TESTS_ENGINE_GENERATION_SAMPLING_ROWS_H_

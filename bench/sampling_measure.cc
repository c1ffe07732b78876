#include "bench/sampling_measure.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_format.h"
#include "bench/bench_table.h"
#include "engine/cpu/cpu_kernels.h"
#include "engine/generation/sampler.h"
#include "tests/engine/generation/reference_sampler.h"

namespace linserve {
namespace {

struct Setting {
  const char* name;
  float temperature;
  int32_t top_k;
  float top_p;
  float penalty;  // presence and frequency
};

// Greedy, plain temperature, BlinkDL's chat settings for RWKV (the issue's
// figure), and a top-k as llama.cpp's default.
constexpr Setting kSettings[] = {
    {"greedy", 0.0f, 0, 1.0f, 0.0f},
    {"temperature 1", 1.0f, 0, 1.0f, 0.0f},
    {"temperature 1, top_p 0.3, penalties 0.5", 1.0f, 0, 0.3f, 0.5f},
    {"temperature 0.8, top_k 40, top_p 0.95", 0.8f, 40, 0.95f, 0.0f},
};

std::vector<float> Row(int64_t vocab, bool peaked, std::mt19937_64& rng) {
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

template <typename S>
double MedianMicros(S& sampler, const std::vector<std::vector<float>>& rows,
                    const std::vector<int64_t>& history) {
  std::vector<double> times;
  for (const std::vector<float>& row : rows) {
    const auto start = std::chrono::steady_clock::now();
    volatile int64_t token = sampler.Sample(row, history);
    (void)token;
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

}  // namespace

std::vector<SamplingRow> MeasureSampling(int64_t vocab, int32_t repeats) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::vector<int64_t> history(256);
  for (int64_t& t : history) t = id(rng);
  std::vector<SamplingRow> out;
  for (bool peaked : {true, false}) {
    std::vector<std::vector<float>> rows;
    for (int32_t i = 0; i < repeats; ++i) rows.push_back(Row(vocab, peaked, rng));
    for (const Setting& s : kSettings) {
      SamplingParams params;
      params.temperature = s.temperature;
      params.top_k = s.top_k;
      params.top_p = s.top_p;
      params.presence_penalty = s.penalty;
      params.frequency_penalty = s.penalty;
      params.seed = 7;
      Sampler sampler(params);
      ReferenceSampler reference(params);
      // Both copy the row (the server's in-place form saves that copy too).
      MedianMicros(sampler, rows, history);  // warm the scratch
      SamplingRow row{s.name, peaked ? "peaked" : "flat"};
      row.reference_us = MedianMicros(reference, rows, history);
      row.sampler_us = MedianMicros(sampler, rows, history);
      out.push_back(row);
    }
  }
  return out;
}

void PrintSampling(const std::vector<SamplingRow>& rows, int64_t vocab, int32_t repeats) {
  absl::PrintF(
      "7. Sampling one row of %d logits, with a 256-token history, one thread (%s kernels): "
      "median of %d rows, microseconds. peaked: N(0, 3) with 30 ids raised by 8-14, like a "
      "trained model; flat: N(0, 1). reference: the sampler before it was rebuilt (double exp, "
      "copies, a sort for top-p)\n",
      vocab, CpuKernelsName(ActiveCpuKernels()), repeats);
  Table table({"setting", "logits", "reference us", "sampler us", "reference/sampler"});
  for (const SamplingRow& row : rows) {
    table.Add({row.setting, row.logits, absl::StrFormat("%.1f", row.reference_us),
               absl::StrFormat("%.1f", row.sampler_us), Ratio(row.reference_us, row.sampler_us)});
  }
  table.Print();
  absl::PrintF("   target: top_p 0.3 + penalties <= 60 us\n\n");
}

nlohmann::json SamplingJson(const std::vector<SamplingRow>& rows, int64_t vocab) {
  nlohmann::json j;
  j["vocab"] = vocab;
  j["rows"] = nlohmann::json::array();
  for (const SamplingRow& row : rows) {
    j["rows"].push_back({{"setting", row.setting},
                         {"logits", row.logits},
                         {"reference_us", row.reference_us},
                         {"sampler_us", row.sampler_us}});
  }
  return j;
}

}  // namespace linserve

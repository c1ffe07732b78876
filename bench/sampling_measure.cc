#include "bench/sampling_measure.h"

#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>

#include "absl/strings/str_format.h"
#include "bench/bench_table.h"
#include "engine/cpu/cpu_kernels.h"
#include "engine/generation/sampler.h"
#include "engine/model/language_model.h"
#include "tests/engine/generation/reference_sampler.h"
#include "tests/engine/generation/sampling_rows.h"

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

// The sampler as the server runs it: in place on the step's row (the copy
// made for it here is not timed). The reference copies the row itself.
int64_t SampleOnce(Sampler& sampler, std::vector<float>& row, const std::vector<int64_t>& history) {
  return sampler.SampleInPlace(absl::MakeSpan(row), history);
}
int64_t SampleOnce(ReferenceSampler& sampler, std::vector<float>& row,
                   const std::vector<int64_t>& history) {
  return sampler.Sample(row, history);
}

template <typename S>
double MedianMicros(S& sampler, const std::vector<std::vector<float>>& rows,
                    const std::vector<int64_t>& history) {
  std::vector<double> times;
  std::vector<float> copy;
  for (const std::vector<float>& row : rows) {
    copy = row;
    const auto start = std::chrono::steady_clock::now();
    volatile int64_t token = SampleOnce(sampler, copy, history);
    (void)token;
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// `count` rows of the model's logits: decode steps after a short prompt,
// each feeding the previous row's most probable token.
std::vector<std::vector<float>> ModelRows(const std::string& dir, int32_t count) {
  absl::StatusOr<std::unique_ptr<LanguageModel>> model = LanguageModel::Load(dir, LoadOptions{});
  if (!model.ok()) {
    std::fprintf(stderr, "--sampling_model: %s\n", model.status().ToString().c_str());
    std::exit(2);
  }
  State state = (*model)->NewState();
  absl::StatusOr<std::vector<float>> row = (*model)->Prefill(
      state, (*model)->tokenizer().Encode("The quick brown fox", /*starts_text=*/true));
  std::vector<std::vector<float>> rows;
  while (row.ok() && static_cast<int32_t>(rows.size()) < count) {
    rows.push_back(*row);
    const int64_t next = std::max_element(row->begin(), row->end()) - row->begin();
    absl::StatusOr<torch::Tensor> logits = (*model)->Step(state, {next});
    if (!logits.ok()) break;
    const float* data = logits->data_ptr<float>();
    row = std::vector<float>(data, data + logits->numel());
  }
  return rows;
}

}  // namespace

std::vector<SamplingRow> MeasureSampling(int64_t vocab, int32_t repeats,
                                         const std::string& model_dir) {
  std::mt19937_64 rng(11);
  std::vector<SamplingRow> out;
  for (const char* kind : {"peaked", "flat", "model"}) {
    std::vector<std::vector<float>> rows;
    const std::string name = kind;
    if (name == "model") {
      if (model_dir.empty()) continue;
      rows = ModelRows(model_dir, repeats);
    } else {
      for (int32_t i = 0; i < repeats; ++i) rows.push_back(RandomLogitsRow(vocab, name == "peaked", rng));
    }
    if (rows.empty()) continue;
    const auto row_vocab = static_cast<int64_t>(rows[0].size());
    std::uniform_int_distribution<int64_t> id(0, row_vocab - 1);
    std::vector<int64_t> history(256);
    for (int64_t& t : history) t = id(rng);
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
      MedianMicros(sampler, rows, history);  // warm the scratch
      SamplingRow row{s.name, name};
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
      "trained model; flat: N(0, 1); model: the --sampling_model's own decode steps. "
      "sampler: in place on the row, as the server runs it; reference: the sampler before it was "
      "rebuilt (double exp, copies, a sort for top-p)\n",
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

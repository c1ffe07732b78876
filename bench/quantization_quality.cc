// linserve-quantization-quality: what 8- and 4-bit weights cost in quality,
// side by side in one run, each weight format against the float32 model.
//
// Two tables:
//   1. A trained RWKV-7 (default: the fixture, which is byte-level),
//      teacher-forced over a text it was not trained on: at every position
//      the KL divergence of the format's next-token distribution from
//      float32's (mean and 99th percentile), top-1 agreement, and the
//      logits' relative error.
//   2. Random weights at published shapes (0.1b, 0.4b of
//      bench/rwkv7_measure.h): the logits' relative error over a few
//      positions of random tokens. Random weights say nothing of a trained
//      model's sensitivity; they show the rounding at full size.
//
//   OPENBLAS_NUM_THREADS=1 linserve-quantization-quality \
//     [--model=../shared/data/rwkv7/tiny-rwkv7-fp32.pth] [--text=../shared/data/rwkv7/README.md] \
//     [--positions=1024] [--formats=bfloat16,int8:32,int8:64,int4:32,int4:64] \
//     [--random_shapes=0.1b] [--random_positions=32]

#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_table.h"
#include "bench/rwkv7_measure.h"
#include "engine/model/language_model.h"
#include "engine/rwkv7/rwkv7_model.h"

ABSL_FLAG(std::string, model, "../shared/data/rwkv7/tiny-rwkv7-fp32.pth",
          "a trained RWKV-7 (anything Rwkv7Model::Load takes); empty skips table 1");
ABSL_FLAG(std::string, text, "../shared/data/rwkv7/README.md",
          "the text it is teacher-forced over (the default: English and code the fixture was "
          "not trained on, which does not change with the checkout)");
ABSL_FLAG(int64_t, positions, 1024, "positions of the text scored");
ABSL_FLAG(std::string, formats, "bfloat16,int8:32,int8:64,int4:32,int4:64",
          "weight formats set against float32, comma-separated (bench/rwkv7_measure.h)");
ABSL_FLAG(std::string, random_shapes, "0.1b", "random-weight shapes for table 2; empty skips it");
ABSL_FLAG(int64_t, random_positions, 32, "positions of random tokens in table 2");

namespace linserve {
namespace {

LoadOptions OptionsFor(const Rwkv7Format& format) {
  LoadOptions options;
  options.dtype = format.dtype;
  options.quantization = format.quantization;
  options.quantization_group = format.group;
  return options;
}

// The logits after each of `tokens`, fed one at a time from a fresh state:
// (T, V) float32.
torch::Tensor TeacherForced(LanguageModel& model, const std::vector<int64_t>& tokens) {
  State state = model.NewState(1);
  std::vector<torch::Tensor> rows;
  for (int64_t token : tokens) {
    rows.push_back(model.Step(state, {token}).value().squeeze(0).clone());
  }
  return torch::stack(rows);
}

struct Agreement {
  double mean_kl = 0, p99_kl = 0, top1 = 0, relative_error = 0;
};

// How far `logits` (T, V) are from `reference`'s, row by row, in float64.
Agreement Compare(const torch::Tensor& reference, const torch::Tensor& logits) {
  const torch::Tensor ref = reference.to(torch::kFloat64), got = logits.to(torch::kFloat64);
  const torch::Tensor log_p = torch::log_softmax(ref, -1), log_q = torch::log_softmax(got, -1);
  const torch::Tensor kl = (log_p.exp() * (log_p - log_q)).sum(-1);  // (T)
  Agreement a;
  a.mean_kl = kl.mean().item<double>();
  std::vector<double> sorted(kl.data_ptr<double>(), kl.data_ptr<double>() + kl.numel());
  std::sort(sorted.begin(), sorted.end());
  a.p99_kl = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
  a.top1 = ref.argmax(-1).eq(got.argmax(-1)).to(torch::kFloat64).mean().item<double>();
  a.relative_error = ((got - ref).norm() / ref.norm()).item<double>();
  return a;
}

std::vector<Rwkv7Format> Formats() {
  std::vector<Rwkv7Format> formats;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_formats), ',', absl::SkipWhitespace())) {
    absl::StatusOr<Rwkv7Format> format =
        ParseRwkv7Format(std::string(name), Rwkv7Model::DefaultDtype(torch::kCPU));
    if (!format.ok()) {
      std::cerr << "--formats: " << format.status().message() << std::endl;
      std::exit(2);
    }
    formats.push_back(*format);
  }
  return formats;
}

int TrainedTable(const std::vector<Rwkv7Format>& formats) {
  const std::string path = absl::GetFlag(FLAGS_model);
  std::ifstream file(absl::GetFlag(FLAGS_text), std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) {
    std::cerr << "cannot read --text=" << absl::GetFlag(FLAGS_text) << std::endl;
    return 1;
  }
  LoadOptions float32;
  float32.dtype = torch::kFloat32;
  absl::StatusOr<std::unique_ptr<Rwkv7Model>> reference = Rwkv7Model::Load(path, float32);
  if (!reference.ok()) {
    std::cerr << reference.status() << std::endl;
    return 1;
  }
  std::vector<int64_t> tokens = (*reference)->tokenizer().Encode(text.str(), /*starts_text=*/true);
  tokens.resize(std::min<int64_t>(tokens.size(), absl::GetFlag(FLAGS_positions)));
  std::cerr << "float32: " << tokens.size() << " positions" << std::endl;
  const torch::Tensor expected = TeacherForced(**reference, tokens);

  Table table({"format", "mean KL", "p99 KL", "top-1 agreement", "logits rel. error"});
  for (const Rwkv7Format& format : formats) {
    std::cerr << Rwkv7FormatName(format) << std::endl;
    absl::StatusOr<std::unique_ptr<Rwkv7Model>> model = Rwkv7Model::Load(path, OptionsFor(format));
    if (!model.ok()) {
      std::cerr << model.status() << std::endl;
      return 1;
    }
    const Agreement a = Compare(expected, TeacherForced(**model, tokens));
    table.Add({Rwkv7FormatName(format), absl::StrFormat("%.2e", a.mean_kl),
               absl::StrFormat("%.2e", a.p99_kl), absl::StrFormat("%.2f%%", 100 * a.top1),
               absl::StrFormat("%.4f", a.relative_error)});
  }
  absl::PrintF("1. %s teacher-forced over %d positions of %s, against float32 (KL in nats)\n",
               path, tokens.size(), absl::GetFlag(FLAGS_text));
  table.Print();
  absl::PrintF("   targets: int8 mean KL <= 0.005, int4 <= 0.05\n\n");
  return 0;
}

int RandomTable(const std::vector<Rwkv7Format>& formats) {
  Table table({"shape", "format", "logits rel. error", "top-1 agreement"});
  for (absl::string_view shape_name :
       absl::StrSplit(absl::GetFlag(FLAGS_random_shapes), ',', absl::SkipWhitespace())) {
    absl::StatusOr<Rwkv7Config> shape = Rwkv7BenchShape(std::string(shape_name));
    if (!shape.ok()) {
      std::cerr << "--random_shapes: " << shape.status().message() << std::endl;
      return 2;
    }
    std::vector<int64_t> tokens;
    torch::manual_seed(7);
    const torch::Tensor random =
        torch::randint(shape->vocab_size, {absl::GetFlag(FLAGS_random_positions)}, torch::kInt64);
    for (int64_t i = 0; i < random.numel(); ++i) tokens.push_back(random[i].item<int64_t>());
    std::cerr << shape_name << " float32" << std::endl;
    torch::Tensor expected;
    {
      LoadOptions float32;
      float32.dtype = torch::kFloat32;
      expected = TeacherForced(*Rwkv7Model::Create(*shape, /*seed=*/1, float32).value(), tokens);
    }
    for (const Rwkv7Format& format : formats) {
      std::cerr << shape_name << " " << Rwkv7FormatName(format) << std::endl;
      const Agreement a = Compare(
          expected,
          TeacherForced(*Rwkv7Model::Create(*shape, /*seed=*/1, OptionsFor(format)).value(),
                        tokens));
      table.Add({std::string(shape_name), Rwkv7FormatName(format),
                 absl::StrFormat("%.4f", a.relative_error),
                 absl::StrFormat("%.1f%%", 100 * a.top1)});
    }
  }
  absl::PrintF("2. Random weights, %d positions of random tokens, against float32\n",
               absl::GetFlag(FLAGS_random_positions));
  table.Print();
  return 0;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "quality of 8- and 4-bit weights against float32: a trained RWKV-7 teacher-forced over a "
      "text, and random weights at published shapes");
  absl::ParseCommandLine(argc, argv);
  torch::NoGradGuard no_grad;
  const std::vector<linserve::Rwkv7Format> formats = linserve::Formats();
  if (!absl::GetFlag(FLAGS_model).empty()) {
    if (int rc = linserve::TrainedTable(formats); rc != 0) return rc;
  }
  if (!absl::GetFlag(FLAGS_random_shapes).empty()) return linserve::RandomTable(formats);
  return 0;
}

// linserve-rwkv7-random-model: writes a model directory of RWKV-7 with random
// weights at a benchmark shape (bench/rwkv7_measure.h: 0.1b, 0.4b or tiny),
// stored in bfloat16, with the World tokenizer when the vocabulary is
// 65,536. What bench/e2e.sh serves to measure the server at a real
// vocabulary without committing hundreds of megabytes.
//
//   linserve-rwkv7-random-model [--shape=0.1b] [--vocab_size=N] [--format=pth] DIR

#include <torch/types.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/rwkv7_measure.h"
#include "engine/formats/pth_writer.h"
#include "engine/formats/safetensors.h"
#include "engine/rwkv7/rwkv7_config.h"

ABSL_FLAG(std::string, shape, "0.1b", "0.1b, 0.4b or tiny");
ABSL_FLAG(uint64_t, seed, 1, "seed of the random weights");
ABSL_FLAG(int64_t, vocab_size, 0, "the vocabulary, if not the shape's (65,536 gives the World tokenizer)");
ABSL_FLAG(std::string, format, "safetensors",
          "safetensors (model.safetensors) or pth (model.pth, as torch.save writes it, the "
          "format every published RWKV-7 comes in)");

int main(int argc, char** argv) {
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::fprintf(stderr, "usage: linserve-rwkv7-random-model [--shape=0.1b] DIR\n");
    return 2;
  }
  absl::StatusOr<linserve::Rwkv7Config> shape =
      linserve::Rwkv7BenchShape(absl::GetFlag(FLAGS_shape));
  if (!shape.ok()) {
    std::fprintf(stderr, "--shape: %s\n", std::string(shape.status().message()).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_vocab_size) > 0) shape->vocab_size = absl::GetFlag(FLAGS_vocab_size);
  const std::filesystem::path dir(args[1]);
  std::filesystem::create_directories(dir);
  linserve::TensorMap weights = linserve::RandomRwkv7Weights(*shape, absl::GetFlag(FLAGS_seed));
  for (auto& [name, tensor] : weights) tensor = tensor.to(torch::kBFloat16);
  absl::Status written;
  if (absl::GetFlag(FLAGS_format) == "pth") {
    linserve::PthWriteOptions options;
    options.archive_name = "model";
    std::ofstream out(dir / "model.pth", std::ios::binary);
    out << linserve::SerializePth(weights, options);
    if (!out) written = absl::InternalError("cannot write " + (dir / "model.pth").string());
  } else if (absl::GetFlag(FLAGS_format) == "safetensors") {
    written = linserve::WriteSafetensorsFile((dir / "model.safetensors").string(), weights);
  } else {
    std::fprintf(stderr, "--format: safetensors or pth\n");
    return 2;
  }
  if (!written.ok()) {
    std::fprintf(stderr, "%s\n", written.ToString().c_str());
    return 1;
  }
  std::ofstream(dir / "config.json") << R"({"architecture": "rwkv7"})" << "\n";
  return 0;
}

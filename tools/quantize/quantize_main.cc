// linserve-quantize: a model's big matrices quantized once, into a file a
// server loads as it is (engine/rwkv7/rwkv7_quantized_file.h,
// engine/qwen35/qwen35_quantized_file.h): each start then reads about half
// (int8) or a third (int4) of the bfloat16 bytes and quantizes nothing.
//
//   linserve-quantize IN OUT --dtype=int8|int4 [--group_size=32|64]
//
// IN is an RWKV-7 model as --model takes it (a .pth, a safetensors file or
// a model directory) or a Qwen3.5 model directory.
//  - RWKV-7: OUT is the file, or a directory (existing, or named with a
//    trailing '/') that gets model.safetensors and a config.json naming the
//    architecture, the weights and the tokenizer.
//  - Qwen3.5: OUT is a directory. It gets model.safetensors and a copy of
//    IN's other files (config.json, generation_config.json, the tokenizer,
//    the chat template), but not IN's shards or their index.
// The model reports the float weights' fingerprint, so sessions move
// between servers of IN and OUT.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/model/language_model.h"
#include "engine/qwen35/qwen35_model.h"
#include "engine/qwen35/qwen35_quantized_file.h"
#include "engine/rwkv7/rwkv7_model.h"
#include "engine/rwkv7/rwkv7_quantized_file.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, dtype, "", "the big matrices' format: int8 or int4");
ABSL_FLAG(int32_t, group_size, 0, "inputs per scale, 32 or 64 (0: the format's default)");

namespace linserve {
namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] = "linserve-quantize IN OUT --dtype=int8|int4 [--group_size=32|64]";

// Bytes of IN's weights: the file, or a directory's weights files.
uint64_t WeightsBytes(const fs::path& in) {
  std::error_code error;
  if (!fs::is_directory(in, error)) {
    const uint64_t size = fs::file_size(in, error);
    return error ? 0 : size;
  }
  uint64_t total = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(in, error)) {
    const fs::path& file = entry.path();
    if (file.extension() == ".pth" || file.extension() == ".pt" ||
        file.extension() == ".safetensors") {
      const uint64_t size = fs::file_size(file, error);
      if (!error) total += size;
    }
  }
  return total;
}

// An RWKV-7 OUT's config.json: what is there already, with the
// architecture, the weights file and the tokenizer set; written whole or
// not at all.
absl::Status WriteRwkv7Config(const fs::path& dir, const Rwkv7Model& model) {
  const fs::path path = dir / "config.json";
  nlohmann::json config = nlohmann::json::object();
  std::error_code error;
  if (fs::exists(path, error)) {
    std::ifstream in(path);
    config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a JSON object"));
    }
  }
  config["architecture"] = "rwkv7";
  config["weights"] = "model.safetensors";
  config["tokenizer"] = {{"type", model.tokenizer().name()}};
  const fs::path temp = dir / "config.json.tmp";
  {
    std::ofstream out(temp);
    out << config.dump(2) << "\n";
    if (!out.flush()) {
      return absl::UnavailableError(absl::StrCat("cannot write ", temp.string()));
    }
  }
  fs::rename(temp, path, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot rename ", temp.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

// A Qwen3.5 OUT's files beside the weights: IN's regular files but its
// weights and their index (OUT's model.safetensors replaces them).
absl::Status CopyQwen35Files(const fs::path& in, const fs::path& out) {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(in, error)) {
    const fs::path& file = entry.path();
    if (!fs::is_regular_file(file, error) || file.extension() == ".safetensors" ||
        file.filename() == "model.safetensors.index.json") {
      continue;
    }
    fs::copy_file(file, out / file.filename(), fs::copy_options::overwrite_existing, error);
    if (error) {
      return absl::UnavailableError(
          absl::StrCat("cannot copy ", file.string(), ": ", error.message()));
    }
  }
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot list ", in.string(), ": ", error.message()));
  }
  // Shards of an earlier quantization of another model must not sit beside
  // the new file: the reader would not look at them, but a person would.
  fs::remove(out / "model.safetensors.index.json", error);
  return absl::OkStatus();
}

// "24 layers of 1024, vocabulary 248320".
std::string ShapeOf(const LanguageModel& model) {
  if (const auto* rwkv7 = dynamic_cast<const Rwkv7Model*>(&model)) {
    const Rwkv7Config& shape = rwkv7->config();
    return absl::StrFormat("%d layers of %d, vocabulary %d", shape.n_layers, shape.d_model,
                           shape.vocab_size);
  }
  const Qwen35Config& shape = dynamic_cast<const Qwen35Model&>(model).config();
  return absl::StrFormat("%d layers of %d (%d full attention), vocabulary %d",
                         shape.num_hidden_layers, shape.hidden_size, shape.full_attention_layers(),
                         shape.vocab_size);
}

std::string Megabytes(uint64_t bytes) { return absl::StrFormat("%.1f MB", bytes / 1e6); }

int Run(const std::string& in, const std::string& out) {
  auto fail = [](const absl::Status& status) {
    std::fprintf(stderr, "linserve-quantize: %s\n", status.ToString().c_str());
    return 1;
  };
  LoadOptions options;
  if (absl::Status dtype = ApplyDtypeFlag(absl::GetFlag(FLAGS_dtype), options); !dtype.ok()) {
    return fail(dtype);
  }
  if (options.quantization == WeightQuantization::kNone) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--dtype must be int8 or int4, not '", absl::GetFlag(FLAGS_dtype), "'")));
  }
  options.quantization_group = absl::GetFlag(FLAGS_group_size);

  std::error_code error;
  const bool to_directory = fs::is_directory(out, error) || (!out.empty() && out.back() == '/');
  if (to_directory) {
    fs::create_directories(out, error);
    if (fs::equivalent(in, out, error)) {
      return fail(absl::InvalidArgumentError(
          "OUT is IN's directory: write the quantized model beside it, not over it"));
    }
  }
  const fs::path file = to_directory ? fs::path(out) / "model.safetensors" : fs::path(out);
  if (fs::equivalent(in, file, error)) {
    return fail(absl::InvalidArgumentError("OUT is IN: write the quantized model elsewhere"));
  }

  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::unique_ptr<LanguageModel>> model = LanguageModel::Load(in, options);
  if (!model.ok()) return fail(model.status());
  const Clock::time_point loaded = Clock::now();
  if (const auto* rwkv7 = dynamic_cast<const Rwkv7Model*>(model->get())) {
    if (absl::Status written = WriteQuantizedRwkv7File(*rwkv7, file.string()); !written.ok()) {
      return fail(written);
    }
    if (to_directory) {
      if (absl::Status written = WriteRwkv7Config(out, *rwkv7); !written.ok()) {
        return fail(written);
      }
    }
  } else if (const auto* qwen35 = dynamic_cast<const Qwen35Model*>(model->get())) {
    if (!to_directory) {
      return fail(absl::InvalidArgumentError(
          "a Qwen3.5 model is a directory: name OUT with a trailing '/'"));
    }
    if (absl::Status written = WriteQuantizedQwen35File(*qwen35, file.string()); !written.ok()) {
      return fail(written);
    }
    if (absl::Status copied = CopyQwen35Files(in, out); !copied.ok()) return fail(copied);
  } else {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "the ", (*model)->architecture(),
        " architecture has no file quantized beforehand (rwkv7 and qwen3_5 have): serve it "
        "with --dtype=int8 or int4, which quantizes at load")));
  }
  const Clock::time_point done = Clock::now();

  const uint64_t before = WeightsBytes(in);
  const uint64_t after = fs::file_size(file, error);
  const nlohmann::json info = (*model)->ConfigJson();
  std::printf("linserve-quantize: %s (%s) -> %s (%s, %.1f%% of it)\n", in.c_str(),
              Megabytes(before).c_str(), file.string().c_str(), Megabytes(after).c_str(),
              before > 0 ? 100.0 * after / before : 0.0);
  std::printf(
      "  %s in groups of %d, %s; %s\n", (*model)->WeightFormatName().c_str(),
      info["quantization_group"].get<int>(),
      dynamic_cast<const Rwkv7Model*>(model->get()) != nullptr
          ? absl::StrCat("low-rank matrices ", ComputeDtypeName((*model)->compute_dtype())).c_str()
          : "every matrix, the embedding and the head included",
      ShapeOf(**model).c_str());
  std::printf("  loaded and quantized in %.2f s, written in %.2f s\n",
              std::chrono::duration<double>(loaded - start).count(),
              std::chrono::duration<double>(done - loaded).count());
  std::printf("  fingerprint %s (the float weights': sessions move between the two)\n",
              (*model)->Fingerprint().c_str());
  return 0;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(linserve::kUsage);
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 3) {
    std::fprintf(stderr, "usage: %s\n", linserve::kUsage);
    return 2;
  }
  return linserve::Run(args[1], args[2]);
}

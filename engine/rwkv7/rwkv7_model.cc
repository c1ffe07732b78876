#include "engine/rwkv7/rwkv7_model.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <torch/types.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/cpu_bf16_product.h"
#include "engine/model/fingerprint.h"
#include "engine/formats/pth_reader.h"
#include "engine/rwkv7/rwkv7_quantized_file.h"
#include "engine/rwkv7/rwkv7_tuned_state.h"
#include "engine/text/hf_model_files.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

constexpr char kConfigFile[] = "config.json";
constexpr char kSafetensorsFile[] = "model.safetensors";
constexpr int64_t kWorldVocabSize = 65536;
constexpr int64_t kByteVocabSize = 256;

bool IsPth(const fs::path& file) {
  return file.extension() == ".pth" || file.extension() == ".pt";
}

// config.json of a model directory; an empty object when there is none.
absl::StatusOr<nlohmann::json> ReadConfig(const fs::path& dir) {
  const fs::path path = dir / kConfigFile;
  std::error_code error;
  if (!fs::exists(path, error)) return nlohmann::json::object();
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open"));
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a JSON object"));
  }
  return json;
}

// The weights file of a model directory: config.json's "weights", or the
// only *.pth or model.safetensors there.
absl::StatusOr<fs::path> WeightsFile(const fs::path& dir, const nlohmann::json& config) {
  if (auto it = config.find("weights"); it != config.end()) {
    if (!it->is_string() || it->get<std::string>().empty() ||
        fs::path(it->get<std::string>()).has_parent_path()) {
      return absl::InvalidArgumentError(absl::StrCat(
          (dir / kConfigFile).string(), ": 'weights' must name a file in the model directory"));
    }
    return dir / it->get<std::string>();
  }
  std::vector<fs::path> found;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const fs::path& file = entry.path();
    if (IsPth(file) || file.filename() == kSafetensorsFile) found.push_back(file);
  }
  if (error) return absl::NotFoundError(absl::StrCat(dir.string(), ": ", error.message()));
  if (found.empty()) {
    return absl::NotFoundError(
        absl::StrCat("model '", dir.string(), "' holds no *.pth and no ", kSafetensorsFile));
  }
  if (found.size() > 1) {
    std::vector<std::string> names;
    for (const fs::path& file : found) names.push_back(file.filename().string());
    std::sort(names.begin(), names.end());
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", dir.string(), "' holds several weights files (", absl::StrJoin(names, ", "),
        "); name one as \"weights\" in config.json"));
  }
  return found[0];
}

absl::StatusOr<TensorMap> ReadWeights(const fs::path& file) {
  absl::StatusOr<TensorMap> tensors;
  if (IsPth(file)) {
    tensors = ReadPthFile(file.string());
  } else {
    absl::StatusOr<SafetensorsContents> contents = ReadSafetensorsFile(file.string());
    if (contents.ok()) {
      tensors = std::move(contents->tensors);
    } else {
      tensors = contents.status();
    }
  }
  if (!tensors.ok()) {
    return absl::Status(tensors.status().code(),
                        absl::StrCat(file.string(), ": ", tensors.status().message()));
  }
  return tensors;
}

// `dir`: the model directory, empty for a bare weights file. Its
// tokenizer.json, when config.json names no tokenizer, makes a Hugging Face
// tokenizer.
absl::StatusOr<Tokenizer> MakeTokenizer(const nlohmann::json& config, int64_t vocab_size,
                                        const std::string& where, const std::string& dir = "",
                                        const HfTokenizerOptions& hf_options = {}) {
  std::string type;
  if (!config.contains("tokenizer") && !dir.empty() && HasHfTokenizer(dir)) {
    return LoadHfTokenizerDirectory(dir, vocab_size, hf_options);
  }
  if (auto it = config.find("tokenizer"); it != config.end()) {
    auto t = it->is_object() ? it->find("type") : it->end();
    if (!it->is_object() || t == it->end() || !t->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": 'tokenizer' must be {\"type\": \"rwkv_world\"} or {\"type\": \"bytes\"}"));
    }
    type = t->get<std::string>();
  } else if (vocab_size == kWorldVocabSize) {
    type = "rwkv_world";
  } else if (vocab_size == kByteVocabSize) {
    type = "bytes";
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": a vocabulary of ", vocab_size,
        " is neither the World tokenizer's (65536) nor bytes (256); say which tokenizer in "
        "config.json: {\"architecture\": \"rwkv7\", \"tokenizer\": {\"type\": ...}}"));
  }
  if (type == "rwkv_world") return Tokenizer::World(Tokenizer::BuiltInWorldVocabulary(), vocab_size);
  if (type == "bytes" || type == "byte") return Tokenizer::Bytes(vocab_size);
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": tokenizer type '", type, "' is not \"rwkv_world\" or \"bytes\""));
}

// Refuses a dtype this LibTorch cannot multiply on `device` (float16 on the
// CPU in LibTorch 1.13), before any weight is converted.
absl::Status CheckDtype(torch::ScalarType dtype, const torch::Device& device) {
  if (dtype != torch::kFloat32 && dtype != torch::kBFloat16 && dtype != torch::kFloat16) {
    return absl::InvalidArgumentError(
        absl::StrCat("rwkv7: dtype ", c10::toString(dtype), " is not float32, bfloat16 or float16"));
  }
  try {
    torch::Tensor one = torch::ones({2, 2}, torch::TensorOptions(dtype).device(device));
    torch::linear(one, one);
    torch::mv(one, one[0]);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat("rwkv7: dtype ", ComputeDtypeName(dtype),
                                                   " has no matrix products on ", device.str(),
                                                   " in this LibTorch"));
  }
  return absl::OkStatus();
}

nlohmann::json ArchitectureJson(const Rwkv7Config& config) {
  nlohmann::json json = Rwkv7ConfigToJson(config);
  json["architecture"] = "rwkv7";
  return json;
}

}  // namespace

std::string Rwkv7Fingerprint(const Rwkv7Config& config, const TensorMap& weights) {
  return FloatWeightsFingerprint(ArchitectureJson(config), weights);
}

torch::ScalarType Rwkv7Model::DefaultDtype(const torch::Device& device) {
  if (device.is_cuda()) return torch::kBFloat16;
  // bfloat16 is the fast dtype where the packed AVX-512 BF16 product runs;
  // elsewhere it is widened to float32 on every product.
  static const bool fast_bfloat16 = HasCpuBf16Product();
  return fast_bfloat16 ? torch::kBFloat16 : torch::kFloat32;
}

absl::StatusOr<State> Rwkv7Model::StateFromTuningFile(std::string_view bytes) const {
  LINSERVE_ASSIGN_OR_RETURN(TunedState tuned, ParseRwkv7TunedState(bytes, config_));
  return TunedStateToState(tuned, *this);
}

Rwkv7Model::Rwkv7Model(const Rwkv7Config& config, Rwkv7 module, Tokenizer tokenizer,
                       std::string fingerprint)
    : config_(config),
      module_(std::move(module)),
      tokenizer_(std::move(tokenizer)),
      state_layout_{Rwkv7StateSpec(config), config.n_layers},
      fingerprint_(std::move(fingerprint)) {
  module_->eval();
}

absl::StatusOr<std::unique_ptr<Rwkv7Model>> Rwkv7Model::Build(const Rwkv7Checkpoint& checkpoint,
                                                              Tokenizer tokenizer,
                                                              const LoadOptions& options) {
  Rwkv7Options module_options;
  module_options.dtype = options.dtype.value_or(DefaultDtype(options.device));
  LINSERVE_RETURN_IF_ERROR(CheckDtype(module_options.dtype, options.device));
  LINSERVE_RETURN_IF_ERROR(CheckQuantizationOptions(options));
  module_options.quantization = options.quantization;
  module_options.quantization_group = options.quantization_group != 0
                                          ? options.quantization_group
                                          : DefaultQuantizationGroup(options.quantization);
  try {
    Rwkv7 module(checkpoint.config, module_options);
    module->LoadWeights(checkpoint.weights);
    module->to(options.device);
    module->PackForCpu();
    std::string fingerprint = Rwkv7Fingerprint(checkpoint.config, checkpoint.weights);
    return std::unique_ptr<Rwkv7Model>(new Rwkv7Model(checkpoint.config, std::move(module),
                                                      std::move(tokenizer),
                                                      std::move(fingerprint)));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("rwkv7: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::unique_ptr<Rwkv7Model>> Rwkv7Model::FromTensors(const TensorMap& tensors,
                                                                    Tokenizer tokenizer,
                                                                    const LoadOptions& options) {
  LINSERVE_ASSIGN_OR_RETURN(Rwkv7Checkpoint checkpoint, ReadRwkv7Checkpoint(tensors));
  return Build(checkpoint, std::move(tokenizer), options);
}

absl::StatusOr<std::unique_ptr<Rwkv7Model>> Rwkv7Model::FromLoadedModule(
    Rwkv7 module, const nlohmann::json& config, std::string fingerprint,
    const std::string& where) {
  LINSERVE_RETURN_IF_ERROR(CheckDtype(module->options().dtype, module->device()));
  const Rwkv7Config shape = module->config();
  LINSERVE_ASSIGN_OR_RETURN(Tokenizer tokenizer, MakeTokenizer(config, shape.vocab_size, where));
  return std::unique_ptr<Rwkv7Model>(
      new Rwkv7Model(shape, std::move(module), std::move(tokenizer), std::move(fingerprint)));
}

absl::StatusOr<std::unique_ptr<Rwkv7Model>> Rwkv7Model::Load(const std::string& path,
                                                             const LoadOptions& options) {
  std::error_code error;
  nlohmann::json config = nlohmann::json::object();
  if (fs::is_directory(path, error)) {
    LINSERVE_ASSIGN_OR_RETURN(config, ReadConfig(path));
  }
  return Load(path, config, options);
}

absl::StatusOr<std::unique_ptr<Rwkv7Model>> Rwkv7Model::Load(const std::string& path,
                                                             const nlohmann::json& config,
                                                             const LoadOptions& options) {
  std::error_code error;
  const bool is_dir = fs::is_directory(path, error);
  if (!config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", path, "': config is not an object"));
  }
  if (auto it = config.find("architecture"); it != config.end() && *it != "rwkv7") {
    return absl::InvalidArgumentError(absl::StrCat("model '", path, "': 'architecture' is ",
                                                   it->dump(), ", expected \"rwkv7\""));
  }
  fs::path weights_file = path;
  if (is_dir) {
    LINSERVE_ASSIGN_OR_RETURN(weights_file, WeightsFile(path, config));
  } else if (!fs::is_regular_file(path, error)) {
    return absl::NotFoundError(absl::StrCat("model '", path, "' is neither a directory nor a file"));
  }
  // A file quantized beforehand is served as it is.
  if (!IsPth(weights_file) && IsQuantizedRwkv7File(weights_file.string())) {
    return LoadQuantizedRwkv7File(weights_file.string(), config, options);
  }
  LINSERVE_ASSIGN_OR_RETURN(TensorMap tensors, ReadWeights(weights_file));
  absl::StatusOr<Rwkv7Checkpoint> checkpoint = ReadRwkv7Checkpoint(tensors);
  if (!checkpoint.ok()) {
    return absl::Status(checkpoint.status().code(),
                        absl::StrCat(weights_file.string(), ": ", checkpoint.status().message()));
  }
  tensors.clear();  // the checkpoint holds what it needs
  const std::string where = is_dir ? absl::StrCat("model '", path, "'") : weights_file.string();
  LINSERVE_ASSIGN_OR_RETURN(Tokenizer tokenizer,
                            MakeTokenizer(config, checkpoint->config.vocab_size, where,
                                          is_dir ? path : std::string(), options.tokenizer));
  return Build(*checkpoint, std::move(tokenizer), options);
}

absl::StatusOr<std::unique_ptr<Rwkv7Model>> Rwkv7Model::Create(const Rwkv7Config& shape,
                                                               uint64_t seed,
                                                               const LoadOptions& options) {
  Rwkv7Checkpoint checkpoint{shape, RandomRwkv7Weights(shape, seed)};
  absl::StatusOr<Tokenizer> tokenizer =
      MakeTokenizer(nlohmann::json::object(), shape.vocab_size, "Rwkv7Model::Create");
  return Build(checkpoint, tokenizer.ok() ? *std::move(tokenizer) : Tokenizer::Bytes(shape.vocab_size),
               options);
}

nlohmann::json Rwkv7Model::ConfigJson() const {
  nlohmann::json json = ArchitectureJson(config_);
  json["tokenizer"] = {{"type", tokenizer_.name()}};
  json["dtype"] = ComputeDtypeName(compute_dtype());
  if (weight_quantization() != WeightQuantization::kNone) {
    json["weight_format"] = WeightQuantizationName(weight_quantization());
    json["quantization_group"] = module_->options().quantization_group;
  }
  json["chunk_size"] = module_->options().chunk_size;
  return json;
}

torch::Tensor Rwkv7Model::ForwardPrefill(const torch::Tensor& tokens, State& state) {
  return module_->ForwardPrefill(tokens, state);
}

torch::Tensor Rwkv7Model::ForwardDecode(const torch::Tensor& tokens, State& state) {
  return module_->ForwardStep(tokens, state);
}

}  // namespace linserve

#include "engine/rwkv7/rwkv7_quantized_file.h"

#include <torch/types.h>

#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/base/error_text.h"
#include "engine/base/status_macros.h"
#include "engine/cpu/cpu_bf16_product.h"
#include "engine/cpu/quantized_linear.h"
#include "engine/model/language_model.h"
#include "engine/model/quantized_file.h"
#include "engine/rwkv7/rwkv7.h"
#include "engine/rwkv7/rwkv7_model.h"

namespace linserve {
namespace {

// The module the file describes, with its weights. The module decides which
// matrices are quantized and every other parameter's dtype; the file must
// agree, so nothing is converted on the way in.
absl::StatusOr<Rwkv7> BuildModule(const QuantizedRwkv7Info& info, const TensorMap& plain,
                                  const std::map<std::string, QuantizedWeight>& quantized) {
  Rwkv7Options options;
  options.dtype = info.compute_dtype;
  options.quantization = info.quantization;
  options.quantization_group = info.group;
  try {
    Rwkv7 module(info.config, options);
    const std::vector<std::string> names = module->QuantizedMatrixNames();
    TensorMap parameters;
    for (const auto& item : module->named_parameters()) parameters[item.key()] = item.value();
    const std::vector<std::string> problems = QuantizedModuleProblems(
        std::set<std::string>(names.begin(), names.end()), quantized, plain, parameters);
    LINSERVE_RETURN_IF_ERROR(QuantizedFileProblems(problems));
    module->LoadWeights(plain, quantized);
    module->PackForCpu();
    return module;
  } catch (const c10::Error& e) {
    return InvalidArgument(e.what_without_backtrace());
  }
}

// A file's module and what its metadata says.
struct ModuleFile {
  Rwkv7 module{nullptr};
  QuantizedRwkv7Info info;
};

absl::StatusOr<ModuleFile> ReadModule(const SafetensorsContents& contents,
                                      const LoadOptions& options) {
  ModuleFile file;
  LINSERVE_ASSIGN_OR_RETURN(file.info, ReadQuantizedRwkv7Metadata(contents.metadata));
  // Before the hash: a refusal needs no pass over gigabytes.
  LINSERVE_RETURN_IF_ERROR(CheckQuantizedRwkv7Asked(options, file.info));
  const std::string sha256 = QuantizedRwkv7DataSha256(contents.tensors);
  if (sha256 != file.info.data_sha256) {
    return absl::DataLossError(absl::StrCat("data_sha256 mismatch: the metadata says ",
                                            file.info.data_sha256, ", the tensors hash to ", sha256,
                                            " (a corrupt or edited file)"));
  }
  TensorMap plain;
  std::map<std::string, QuantizedWeight> quantized;
  LINSERVE_RETURN_IF_ERROR(
      SplitQuantizedTensors(contents.tensors, Rwkv7TensorShapes(file.info.config),
                            file.info.quantization, file.info.group, plain, quantized));
  LINSERVE_ASSIGN_OR_RETURN(file.module, BuildModule(file.info, plain, quantized));
  return file;
}

// A parameter as the file stores it. PackForCpu lays the low-rank matrices,
// the only float matrices a quantized module keeps, out for the bfloat16
// product from their transpose (Rwkv7TimeMixImpl::PackLowRankForCpu): the
// layout (out/16, in/2, 16, 2) is a permutation, undone exactly here.
absl::StatusOr<torch::Tensor> AsStored(const std::string& name, const torch::Tensor& parameter,
                                       const std::vector<int64_t>& shape) {
  torch::Tensor stored = parameter;
  if (IsPackedBf16(parameter)) {
    const torch::Tensor packed_from =  // (out, in) of the product: the matrix's transpose
        parameter.permute({0, 2, 1, 3}).reshape({parameter.size(0) * 16, parameter.size(1) * 2});
    stored = packed_from.t().contiguous();
  }
  if (stored.sizes() != c10::IntArrayRef(shape)) {
    return absl::InternalError(absl::StrCat("rwkv7: parameter '", name, "' is ",
                                            QuantizedFileTensorLabel(parameter), ", expected ",
                                            QuantizedFileShapeLabel(shape)));
  }
  return stored;
}

absl::StatusOr<SafetensorsContents> FileContents(const Rwkv7Model& model) {
  if (model.weight_quantization() == WeightQuantization::kNone) {
    return absl::FailedPreconditionError(
        "rwkv7: the model holds no quantized matrices: load it with int8 or int4 weights");
  }
  const Rwkv7Impl& module = *model.module();
  const std::map<std::string, std::vector<int64_t>> shapes = Rwkv7TensorShapes(model.config());
  const std::map<std::string, QuantizedWeight> quantized = module.QuantizedMatrices();
  TensorMap plain;
  for (const auto& item : module.named_parameters()) {
    if (quantized.count(item.key())) continue;
    auto shape = shapes.find(item.key());
    if (shape == shapes.end()) {
      return absl::InternalError(
          absl::StrCat("rwkv7: parameter '", item.key(), "' is not a checkpoint tensor"));
    }
    LINSERVE_ASSIGN_OR_RETURN(plain[item.key()], AsStored(item.key(), item.value(), shape->second));
  }
  SafetensorsContents contents;
  contents.tensors = QuantizedFileTensors(quantized, plain);
  QuantizedRwkv7Info info;
  info.quantization = model.weight_quantization();
  info.group = module.options().quantization_group;
  info.compute_dtype = model.compute_dtype();
  info.config = model.config();
  info.fingerprint = model.Fingerprint();
  info.tokenizer = model.tokenizer().name();
  info.data_sha256 = QuantizedRwkv7DataSha256(contents.tensors);
  contents.metadata = QuantizedRwkv7Metadata(info);
  return contents;
}

}  // namespace

std::string QuantizedRwkv7DataSha256(const TensorMap& tensors) {
  return QuantizedFileDataSha256(tensors);
}

bool IsQuantizedRwkv7File(const std::string& path) {
  return SafetensorsFormatOf(path) == kQuantizedRwkv7Format;
}

absl::StatusOr<std::string> SerializeQuantizedRwkv7(const Rwkv7Model& model) {
  LINSERVE_ASSIGN_OR_RETURN(const SafetensorsContents contents, FileContents(model));
  return SerializeSafetensors(contents.tensors, contents.metadata);
}

absl::Status WriteQuantizedRwkv7File(const Rwkv7Model& model, const std::string& path) {
  LINSERVE_ASSIGN_OR_RETURN(const SafetensorsContents contents, FileContents(model));
  return WriteSafetensorsFile(path, contents.tensors, contents.metadata);
}

absl::StatusOr<std::unique_ptr<Rwkv7Model>> ParseQuantizedRwkv7(std::string_view bytes,
                                                                const nlohmann::json& config,
                                                                const LoadOptions& options,
                                                                const std::string& where) {
  auto located = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat(where, ": ", status.message()));
  };
  absl::StatusOr<SafetensorsContents> contents = ParseSafetensors(bytes);
  if (!contents.ok()) return located(contents.status());
  absl::StatusOr<ModuleFile> file = ReadModule(*contents, options);
  if (!file.ok()) return located(file.status());
  // config.json's tokenizer wins over the file's.
  nlohmann::json tokenizer_config = config.is_object() ? config : nlohmann::json::object();
  if (!tokenizer_config.contains("tokenizer")) {
    tokenizer_config["tokenizer"] = {{"type", file->info.tokenizer}};
  }
  return Rwkv7Model::FromLoadedModule(std::move(file->module), tokenizer_config,
                                      file->info.fingerprint, where);
}

absl::StatusOr<std::unique_ptr<Rwkv7Model>> LoadQuantizedRwkv7File(const std::string& path,
                                                                   const nlohmann::json& config,
                                                                   const LoadOptions& options) {
  LINSERVE_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  return ParseQuantizedRwkv7(file->bytes(), config, options, path);
}

}  // namespace linserve

#include "engine/qwen35/qwen35_quantized_file.h"

#include <torch/types.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/base/error_text.h"
#include "engine/base/status_macros.h"
#include "engine/formats/safetensors.h"
#include "engine/model/language_model.h"
#include "engine/model/quantized_file.h"
#include "engine/qwen35/qwen35.h"
#include "engine/qwen35/qwen35_model.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

// The metadata keys of format version 1; any other is refused, so that a
// field a later version adds is never silently ignored.
constexpr const char* kMetadataKeys[] = {"format",     "format_version", "quantization",
                                         "group_size", "config",         "source_fingerprint",
                                         "data_sha256"};

struct FileInfo {
  WeightQuantization quantization = WeightQuantization::kNone;
  int64_t group = 0;
  std::string fingerprint;
  std::string data_sha256;
};

std::string Describe(const FileInfo& info) {
  return absl::StrCat(WeightQuantizationName(info.quantization), " weights in groups of ",
                      info.group);
}

SafetensorsMetadata Metadata(const FileInfo& info, const Qwen35Config& config) {
  return {{"format", kQuantizedQwen35Format},
          {"format_version", kQuantizedQwen35FormatVersion},
          {"quantization", WeightQuantizationName(info.quantization)},
          {"group_size", std::to_string(info.group)},
          {"config", Qwen35ConfigToJson(config).dump()},
          {"source_fingerprint", info.fingerprint},
          {"data_sha256", info.data_sha256}};
}

// The fields, each checked; the config against the directory's.
absl::StatusOr<FileInfo> ReadMetadata(const SafetensorsMetadata& metadata,
                                      const Qwen35Config& config) {
  auto field = [&](const char* key) -> absl::StatusOr<std::string> {
    auto it = metadata.find(key);
    if (it == metadata.end()) return InvalidArgument("metadata has no '", key, "'");
    return it->second;
  };
  LINSERVE_ASSIGN_OR_RETURN(const std::string format, field("format"));
  if (format != kQuantizedQwen35Format) {
    return InvalidArgument("metadata 'format' is ", QuotedExcerpt(format), ", expected '",
                           kQuantizedQwen35Format, "'");
  }
  LINSERVE_ASSIGN_OR_RETURN(const std::string version, field("format_version"));
  if (version != kQuantizedQwen35FormatVersion) {
    return InvalidArgument("format_version ", QuotedExcerpt(version),
                           " is not one this build reads (", kQuantizedQwen35FormatVersion,
                           "); quantize the float model again with this build's linserve-quantize");
  }
  for (const auto& entry : metadata) {
    if (std::find_if(std::begin(kMetadataKeys), std::end(kMetadataKeys),
                     [&](const char* k) { return entry.first == k; }) == std::end(kMetadataKeys)) {
      return InvalidArgument("metadata key ", QuotedExcerpt(entry.first),
                             " is not one of format version ", kQuantizedQwen35FormatVersion);
    }
  }
  FileInfo info;
  LINSERVE_ASSIGN_OR_RETURN(const std::string quantization, field("quantization"));
  LINSERVE_ASSIGN_OR_RETURN(info.quantization, ParseQuantizationField(quantization));
  LINSERVE_ASSIGN_OR_RETURN(const std::string group, field("group_size"));
  LINSERVE_ASSIGN_OR_RETURN(info.group, ParseGroupSizeField(group));
  LINSERVE_ASSIGN_OR_RETURN(const std::string shape, field("config"));
  const nlohmann::json file_config =
      nlohmann::json::parse(shape, nullptr, /*allow_exceptions=*/false);
  if (file_config.is_discarded() || !file_config.is_object()) {
    return InvalidArgument("metadata 'config' is not a JSON object");
  }
  // The directory's config.json sizes the tensors; the file must have been
  // written for the same shape. The end ids and the context length are the
  // directory's to change: they say nothing of the weights.
  const nlohmann::json dir_config = Qwen35ConfigToJson(config);
  for (const auto& [key, value] : dir_config.items()) {
    if (key == "eos_token_id" || key == "max_position_embeddings") continue;
    auto it = file_config.find(key);
    if (it == file_config.end() || *it != value) {
      return InvalidArgument("metadata 'config': '", key, "' is ",
                             it == file_config.end() ? "missing" : QuotedExcerpt(it->dump()),
                             " in the file, but config.json makes it ", QuotedExcerpt(value.dump()),
                             ": the file was quantized from another model");
    }
  }
  for (const auto& item : file_config.items()) {
    if (!dir_config.contains(item.key())) {
      return InvalidArgument("metadata 'config': unknown key ", QuotedExcerpt(item.key()));
    }
  }
  LINSERVE_ASSIGN_OR_RETURN(info.fingerprint, field("source_fingerprint"));
  LINSERVE_RETURN_IF_ERROR(CheckHexDigestField("source_fingerprint", info.fingerprint));
  LINSERVE_ASSIGN_OR_RETURN(info.data_sha256, field("data_sha256"));
  LINSERVE_RETURN_IF_ERROR(CheckHexDigestField("data_sha256", info.data_sha256));
  return info;
}

// The module the file describes, with its weights: the module decides
// which matrices are quantized and every other parameter's dtype, and the
// file must agree, so nothing is converted on the way in.
absl::StatusOr<Qwen35> BuildModule(const Qwen35Config& config, const FileInfo& info,
                                   const TensorMap& plain,
                                   const std::map<std::string, QuantizedWeight>& quantized,
                                   const LoadOptions& options) {
  LoadOptions asked = options;
  asked.quantization = info.quantization;
  asked.quantization_group = info.group;
  LINSERVE_ASSIGN_OR_RETURN(const Qwen35Options module_options, Qwen35ModuleOptions(asked));
  try {
    Qwen35 module(config, module_options);
    std::set<std::string> expected;
    for (const std::string& name : module->QuantizedMatrixNames()) {
      // A tied head is the embedding's codes.
      if (name != "lm_head.weight" || !config.tie_word_embeddings) expected.insert(name);
    }
    TensorMap parameters;
    for (const auto& item : module->named_parameters()) parameters[item.key()] = item.value();
    const std::vector<std::string> problems =
        QuantizedModuleProblems(expected, quantized, plain, parameters);
    LINSERVE_RETURN_IF_ERROR(QuantizedFileProblems(problems));
    module->LoadWeights(plain, quantized);
    module->PackForCpu();
    return module;
  } catch (const c10::Error& e) {
    return InvalidArgument(e.what_without_backtrace());
  }
}

absl::StatusOr<SafetensorsContents> FileContents(const Qwen35Model& model) {
  if (model.weight_quantization() == WeightQuantization::kNone) {
    return absl::FailedPreconditionError(
        "qwen3_5: the model holds no quantized matrices: load it with int8 or int4 weights");
  }
  const Qwen35Config& config = model.config();
  const Qwen35Impl& module = *model.module();
  std::map<std::string, QuantizedWeight> quantized = module.QuantizedMatrices();
  if (config.tie_word_embeddings) quantized.erase("lm_head.weight");  // the embedding's codes
  const std::map<std::string, std::vector<int64_t>> shapes = Qwen35TensorShapes(config);
  TensorMap plain;
  for (const auto& item : module.named_parameters()) {
    if (item.value().numel() == 0) continue;  // quantized
    auto shape = shapes.find(item.key());
    if (shape == shapes.end() || item.value().sizes() != c10::IntArrayRef(shape->second)) {
      return absl::InternalError(absl::StrCat("qwen3_5: parameter '", item.key(), "' is ",
                                              QuantizedFileTensorLabel(item.value()),
                                              ", not a checkpoint tensor's shape"));
    }
    plain[item.key()] = item.value();
  }
  SafetensorsContents contents;
  contents.tensors = QuantizedFileTensors(quantized, plain);
  FileInfo info;
  info.quantization = model.weight_quantization();
  info.group = module.options().quantization_group;
  info.fingerprint = model.Fingerprint();
  info.data_sha256 = QuantizedFileDataSha256(contents.tensors);
  contents.metadata = Metadata(info, config);
  return contents;
}

}  // namespace

bool IsQuantizedQwen35Directory(const std::string& dir) {
  return SafetensorsFormatOf((std::filesystem::path(dir) / "model.safetensors").string()) ==
         kQuantizedQwen35Format;
}

absl::StatusOr<std::string> SerializeQuantizedQwen35(const Qwen35Model& model) {
  LINSERVE_ASSIGN_OR_RETURN(const SafetensorsContents contents, FileContents(model));
  return SerializeSafetensors(contents.tensors, contents.metadata);
}

absl::Status WriteQuantizedQwen35File(const Qwen35Model& model, const std::string& path) {
  LINSERVE_ASSIGN_OR_RETURN(const SafetensorsContents contents, FileContents(model));
  return WriteSafetensorsFile(path, contents.tensors, contents.metadata);
}

absl::StatusOr<std::unique_ptr<Qwen35Model>> ParseQuantizedQwen35(std::string_view bytes,
                                                                  const Qwen35Config& config,
                                                                  Tokenizer tokenizer,
                                                                  const LoadOptions& options,
                                                                  const std::string& where) {
  auto located = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat(where, ": ", status.message()));
  };
  absl::StatusOr<SafetensorsContents> contents = ParseSafetensors(bytes);
  if (!contents.ok()) return located(contents.status());
  absl::StatusOr<FileInfo> info = ReadMetadata(contents->metadata, config);
  if (!info.ok()) return located(info.status());
  // Before the hash: a refusal needs no pass over gigabytes.
  if (absl::Status asked = CheckQuantizedFileAsked(options, info->quantization, info->group,
                                                   "the file holds " + Describe(*info));
      !asked.ok()) {
    return located(asked);
  }
  const std::string sha256 = QuantizedFileDataSha256(contents->tensors);
  if (sha256 != info->data_sha256) {
    return located(absl::DataLossError(absl::StrCat("data_sha256 mismatch: the metadata says ",
                                                    info->data_sha256, ", the tensors hash to ",
                                                    sha256, " (a corrupt or edited file)")));
  }
  TensorMap plain;
  std::map<std::string, QuantizedWeight> quantized;
  if (absl::Status split = SplitQuantizedTensors(contents->tensors, Qwen35TensorShapes(config),
                                                 info->quantization, info->group, plain, quantized);
      !split.ok()) {
    return located(split);
  }
  contents->tensors.clear();  // plain and quantized hold what is needed
  absl::StatusOr<Qwen35> module = BuildModule(config, *info, plain, quantized, options);
  if (!module.ok()) return located(module.status());
  return Qwen35Model::FromLoadedModule(config, std::move(*module), std::move(tokenizer),
                                       info->fingerprint);
}

absl::StatusOr<std::unique_ptr<Qwen35Model>> LoadQuantizedQwen35File(const std::string& path,
                                                                     const Qwen35Config& config,
                                                                     Tokenizer tokenizer,
                                                                     const LoadOptions& options) {
  LINSERVE_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  return ParseQuantizedQwen35(file->bytes(), config, std::move(tokenizer), options, path);
}

}  // namespace linserve

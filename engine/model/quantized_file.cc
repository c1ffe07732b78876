#include "engine/model/quantized_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/error_text.h"
#include "engine/base/sha256.h"
#include "engine/base/status_macros.h"
#include "engine/formats/byte_source.h"
#include "engine/model/language_model.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

// The safetensors reader's bound on a header: past it the file is not one.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
// Problems listed in one message at most: a wholly wrong file is one error.
constexpr size_t kMaxReported = 6;

// safetensors' names for the dtypes these files hold.
std::string DtypeLabel(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kUInt8:
      return "U8";
    case torch::kFloat16:
      return "F16";
    case torch::kBFloat16:
      return "BF16";
    case torch::kFloat32:
      return "F32";
    default:
      return c10::toString(dtype);
  }
}

// The codes' and scales' dtypes and sizes for `shape`; empty when they fit.
std::string CheckQuantizedTensors(const std::string& name, const QuantizedShape& shape,
                                  const torch::Tensor& codes, const torch::Tensor& scales) {
  const std::string what = absl::StrCat(WeightQuantizationName(shape.kind), " [", shape.out, ", ",
                                        shape.in, "] in groups of ", shape.group);
  if (codes.scalar_type() != torch::kUInt8 || codes.dim() != 1 ||
      codes.numel() != shape.code_bytes()) {
    return absl::StrCat("tensor '", name, kQuantizedCodesSuffix, "' is ",
                        QuantizedFileTensorLabel(codes), ", expected U8[", shape.code_bytes(),
                        "] for ", what);
  }
  const std::vector<int64_t> scale_shape = {shape.panels(), shape.groups(), 16};
  if (scales.scalar_type() != torch::kFloat16 || scales.sizes() != c10::IntArrayRef(scale_shape)) {
    return absl::StrCat("tensor '", name, kQuantizedScalesSuffix, "' is ",
                        QuantizedFileTensorLabel(scales), ", expected F16",
                        QuantizedFileShapeLabel(scale_shape), " for ", what);
  }
  return "";
}

}  // namespace

std::string QuantizedFileShapeLabel(c10::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string QuantizedFileTensorLabel(const torch::Tensor& tensor) {
  return DtypeLabel(tensor.scalar_type()) + QuantizedFileShapeLabel(tensor.sizes());
}

absl::Status QuantizedFileProblems(const std::vector<std::string>& problems) {
  if (problems.empty()) return absl::OkStatus();
  const size_t shown = std::min(problems.size(), kMaxReported);
  return InvalidArgument(
      absl::StrJoin(problems.begin(), problems.begin() + shown, "; "),
      problems.size() > shown ? absl::StrCat("; and ", problems.size() - shown, " more") : "");
}

std::string SafetensorsFormatOf(const std::string& path) {
  absl::StatusOr<std::unique_ptr<ByteSource>> source = OpenFileByteSource(path);
  if (!source.ok() || (*source)->size() < 8) return "";
  absl::StatusOr<std::string> length = (*source)->ReadString(0, 8);
  if (!length.ok()) return "";
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i)
    header_bytes = header_bytes << 8 | static_cast<uint8_t>((*length)[i]);
  if (header_bytes > kMaxHeaderBytes || header_bytes > (*source)->size() - 8) return "";
  absl::StatusOr<std::string> header = (*source)->ReadString(8, header_bytes);
  if (!header.ok()) return "";
  const nlohmann::json json = nlohmann::json::parse(*header, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return "";
  auto metadata = json.find("__metadata__");
  if (metadata == json.end() || !metadata->is_object()) return "";
  auto format = metadata->find("format");
  return format != metadata->end() && format->is_string() ? format->get<std::string>() : "";
}

std::string QuantizedFileDataSha256(const TensorMap& tensors) {
  Sha256 sha;
  for (const auto& [name, tensor] : tensors) {
    const torch::Tensor values = tensor.contiguous();
    const std::string header = name + '\0' + QuantizedFileTensorLabel(values) + '\0';
    sha.Update(header);
    sha.Update(std::string_view(static_cast<const char*>(values.data_ptr()),
                                values.numel() * values.element_size()));
  }
  return absl::BytesToHexString(sha.Digest());
}

absl::Status SplitQuantizedTensors(const TensorMap& tensors,
                                   const std::map<std::string, std::vector<int64_t>>& shapes,
                                   WeightQuantization kind, int64_t group, TensorMap& plain,
                                   std::map<std::string, QuantizedWeight>& quantized) {
  std::vector<std::string> problems;
  for (const auto& [name, shape] : shapes) {
    auto self = tensors.find(name);
    auto codes = tensors.find(name + kQuantizedCodesSuffix);
    auto scales = tensors.find(name + kQuantizedScalesSuffix);
    if (codes == tensors.end() && scales == tensors.end()) {
      if (self == tensors.end()) {
        problems.push_back(absl::StrCat("missing tensor '", name, "' (",
                                        QuantizedFileShapeLabel(shape), " by the config)"));
      } else if (self->second.sizes() != c10::IntArrayRef(shape)) {
        problems.push_back(
            absl::StrCat("tensor '", name, "' is ", QuantizedFileTensorLabel(self->second),
                         ", but the config makes it ", QuantizedFileShapeLabel(shape)));
      } else {
        plain.emplace(name, self->second);
      }
      continue;
    }
    if (self != tensors.end()) {
      problems.push_back(absl::StrCat("tensor '", name, "' is there both as itself and quantized"));
    } else if (codes == tensors.end() || scales == tensors.end()) {
      problems.push_back(absl::StrCat(
          "missing tensor '", name,
          codes == tensors.end() ? kQuantizedCodesSuffix : kQuantizedScalesSuffix, "'"));
    } else if (shape.size() != 2) {
      problems.push_back(absl::StrCat("tensor '", name, "' is quantized, but is not a matrix"));
    } else {
      QuantizedWeight weight;
      weight.shape = {shape[0], shape[1], group, kind};
      std::string problem =
          CheckQuantizedTensors(name, weight.shape, codes->second, scales->second);
      if (problem.empty()) {
        weight.codes = codes->second;
        weight.scales =
            scales->second.view(torch::kInt16);  // the half bits, as the kernels take them
        problem = CheckQuantizedWeight(weight);
        if (!problem.empty()) problem = absl::StrCat("quantized '", name, "': ", problem);
      }
      if (problem.empty()) {
        quantized.emplace(name, std::move(weight));
      } else {
        problems.push_back(std::move(problem));
      }
    }
  }
  for (const auto& [name, tensor] : tensors) {
    std::string base = name;
    for (const std::string suffix : {kQuantizedCodesSuffix, kQuantizedScalesSuffix}) {
      if (absl::EndsWith(base, suffix)) base.resize(base.size() - suffix.size());
    }
    if (!shapes.count(base)) {
      problems.push_back(absl::StrCat("unexpected tensor ", QuotedExcerpt(name), " ",
                                      QuantizedFileTensorLabel(tensor)));
    }
  }
  return QuantizedFileProblems(problems);
}

TensorMap QuantizedFileTensors(const std::map<std::string, QuantizedWeight>& quantized,
                               const TensorMap& plain) {
  TensorMap tensors = plain;
  for (const auto& [name, weight] : quantized) {
    tensors[name + kQuantizedCodesSuffix] = weight.codes;
    tensors[name + kQuantizedScalesSuffix] = weight.scales.view(torch::kFloat16);
  }
  return tensors;
}

std::vector<std::string> QuantizedModuleProblems(
    const std::set<std::string>& expected, const std::map<std::string, QuantizedWeight>& quantized,
    const TensorMap& plain, const TensorMap& parameters) {
  std::vector<std::string> problems;
  for (const std::string& name : expected) {
    if (!quantized.count(name)) {
      problems.push_back(absl::StrCat("tensor '", name, "' is not quantized (", name,
                                      kQuantizedCodesSuffix, ", ", name, kQuantizedScalesSuffix,
                                      ")"));
    }
  }
  for (const auto& [name, weight] : quantized) {
    if (!expected.count(name)) {
      problems.push_back(absl::StrCat("tensor '", name, "' is quantized, but is kept in float"));
    }
  }
  for (const auto& [name, parameter] : parameters) {
    auto it = plain.find(name);
    if (it != plain.end() && it->second.scalar_type() != parameter.scalar_type()) {
      problems.push_back(absl::StrCat("tensor '", name, "' is ",
                                      QuantizedFileTensorLabel(it->second), ", expected ",
                                      DtypeLabel(parameter.scalar_type())));
    }
  }
  return problems;
}

absl::Status CheckQuantizedFileAsked(const LoadOptions& options, WeightQuantization quantization,
                                     int64_t group, const std::string& holds) {
  if (!options.device.is_cpu()) {
    return InvalidArgument(holds, ", which are for the CPU, not ", options.device.str());
  }
  if (options.quantization == WeightQuantization::kNone && options.dtype.has_value()) {
    return InvalidArgument(
        holds, ", but ", ComputeDtypeName(*options.dtype),
        " weights were asked for: serve it without a dtype, or serve the float model");
  }
  if (options.quantization != WeightQuantization::kNone && options.quantization != quantization) {
    return InvalidArgument(
        holds, ", but ", WeightQuantizationName(options.quantization),
        " was asked for: serve it without a dtype, or quantize the float model to ",
        WeightQuantizationName(options.quantization));
  }
  if (options.quantization_group != 0 && options.quantization_group != group) {
    return InvalidArgument(holds, ", but groups of ", options.quantization_group,
                           " were asked for");
  }
  return absl::OkStatus();
}

absl::StatusOr<WeightQuantization> ParseQuantizationField(const std::string& value) {
  if (value == "int8") return WeightQuantization::kInt8;
  if (value == "int4") return WeightQuantization::kInt4;
  return InvalidArgument("metadata 'quantization' is ", QuotedExcerpt(value),
                         ", expected int8 or int4");
}

absl::StatusOr<int64_t> ParseGroupSizeField(const std::string& value) {
  if (value == "32") return 32;
  if (value == "64") return 64;
  return InvalidArgument("metadata 'group_size' is ", QuotedExcerpt(value), ", expected 32 or 64");
}

absl::Status CheckHexDigestField(const std::string& field, const std::string& value) {
  const bool hex = value.size() == 64 && std::all_of(value.begin(), value.end(), [](char c) {
                     return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                   });
  if (hex) return absl::OkStatus();
  return InvalidArgument("metadata '", field, "' is ", QuotedExcerpt(value),
                         ", expected 64 lowercase hex digits");
}

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  LINSERVE_ASSIGN_OR_RETURN(const OpenedFile file, OpenRegularFile(path));
  void* data = nullptr;
  const size_t size = static_cast<size_t>(file.size);
  if (size > 0) {
    data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (data == MAP_FAILED) {
      const int error = errno;
      close(file.fd);
      return absl::ErrnoToStatus(error, absl::StrCat("cannot map '", path, "'"));
    }
    // Read front to back, each byte once.
    madvise(data, size, MADV_SEQUENTIAL);
    madvise(data, size, MADV_WILLNEED);
  }
  close(file.fd);
  return std::unique_ptr<MappedFile>(new MappedFile(data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(data_, size_);
}

std::string_view MappedFile::bytes() const {
  return data_ == nullptr ? std::string_view() : std::string_view(static_cast<char*>(data_), size_);
}

}  // namespace linserve

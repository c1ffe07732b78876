#include "engine/rwkv7/rwkv7_quantized_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/sha256.h"
#include "engine/base/status_macros.h"
#include "engine/cpu/cpu_bf16_product.h"
#include "engine/cpu/quantized_linear.h"
#include "engine/formats/byte_source.h"
#include "engine/model/language_model.h"
#include "engine/rwkv7/rwkv7.h"
#include "engine/rwkv7/rwkv7_model.h"

namespace linserve {
namespace {

constexpr char kCodesSuffix[] = ".codes";
constexpr char kScalesSuffix[] = ".scales";
// The safetensors reader's bound on a header: past it the file is not one.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
// Problems listed in one message at most: a wholly wrong file is one error.
constexpr size_t kMaxReported = 6;
// Keeps messages readable when a hostile file holds huge strings.
constexpr size_t kMaxQuoted = 80;

std::string Quoted(const std::string& text) {
  return absl::StrCat("'", text.substr(0, kMaxQuoted), text.size() > kMaxQuoted ? "...'" : "'");
}

template <typename... Args>
absl::Status Invalid(const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(args...));
}

// safetensors' names for the dtypes this format holds.
std::string DtypeLabel(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kUInt8: return "U8";
    case torch::kFloat16: return "F16";
    case torch::kBFloat16: return "BF16";
    case torch::kFloat32: return "F32";
    default: return c10::toString(dtype);
  }
}

std::string ShapeLabel(c10::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string TensorLabel(const torch::Tensor& tensor) {
  return DtypeLabel(tensor.scalar_type()) + ShapeLabel(tensor.sizes());
}

absl::Status Problems(const std::vector<std::string>& problems) {
  if (problems.empty()) return absl::OkStatus();
  const size_t shown = std::min(problems.size(), kMaxReported);
  return Invalid(absl::StrJoin(problems.begin(), problems.begin() + shown, "; "),
                 problems.size() > shown ? absl::StrCat("; and ", problems.size() - shown, " more")
                                         : "");
}

// The codes' and scales' dtypes and sizes for `shape`; empty when they fit.
std::string CheckQuantizedTensors(const std::string& name, const QuantizedShape& shape,
                                  const torch::Tensor& codes, const torch::Tensor& scales) {
  const std::string what = absl::StrCat(WeightQuantizationName(shape.kind), " [", shape.out, ", ",
                                        shape.in, "] in groups of ", shape.group);
  if (codes.scalar_type() != torch::kUInt8 || codes.dim() != 1 ||
      codes.numel() != shape.code_bytes()) {
    return absl::StrCat("tensor '", name, kCodesSuffix, "' is ", TensorLabel(codes),
                        ", expected U8[", shape.code_bytes(), "] for ", what);
  }
  const std::vector<int64_t> scale_shape = {shape.panels(), shape.groups(), 16};
  if (scales.scalar_type() != torch::kFloat16 || scales.sizes() != c10::IntArrayRef(scale_shape)) {
    return absl::StrCat("tensor '", name, kScalesSuffix, "' is ", TensorLabel(scales),
                        ", expected F16", ShapeLabel(scale_shape), " for ", what);
  }
  return "";
}

// The file's tensors against the config: every canonical tensor once, as
// itself or as codes and scales, nothing else; shapes as the config makes
// them, codes and scales as the quantization makes them, scales finite.
absl::Status SplitTensors(const TensorMap& tensors, const QuantizedRwkv7Info& info, TensorMap& plain,
                          std::map<std::string, QuantizedWeight>& quantized) {
  const std::map<std::string, std::vector<int64_t>> shapes = Rwkv7TensorShapes(info.config);
  std::vector<std::string> problems;
  for (const auto& [name, shape] : shapes) {
    auto self = tensors.find(name);
    auto codes = tensors.find(name + kCodesSuffix);
    auto scales = tensors.find(name + kScalesSuffix);
    if (codes == tensors.end() && scales == tensors.end()) {
      if (self == tensors.end()) {
        problems.push_back(absl::StrCat("missing tensor '", name, "' (", ShapeLabel(shape),
                                        " by the config)"));
      } else if (self->second.sizes() != c10::IntArrayRef(shape)) {
        problems.push_back(absl::StrCat("tensor '", name, "' is ", TensorLabel(self->second),
                                        ", but the config makes it ", ShapeLabel(shape)));
      } else {
        plain.emplace(name, self->second);
      }
      continue;
    }
    if (self != tensors.end()) {
      problems.push_back(absl::StrCat("tensor '", name, "' is there both as itself and quantized"));
    } else if (codes == tensors.end() || scales == tensors.end()) {
      problems.push_back(absl::StrCat("missing tensor '", name,
                                      codes == tensors.end() ? kCodesSuffix : kScalesSuffix, "'"));
    } else if (shape.size() != 2) {
      problems.push_back(absl::StrCat("tensor '", name, "' is quantized, but is not a matrix"));
    } else {
      QuantizedWeight weight;
      weight.shape = {shape[0], shape[1], info.group, info.quantization};
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
    for (const std::string suffix : {kCodesSuffix, kScalesSuffix}) {
      if (absl::EndsWith(base, suffix)) base.resize(base.size() - suffix.size());
    }
    if (!shapes.count(base)) {
      problems.push_back(
          absl::StrCat("unexpected tensor ", Quoted(name), " ", TensorLabel(tensor)));
    }
  }
  return Problems(problems);
}

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
    std::vector<std::string> problems;
    const std::vector<std::string> names = module->QuantizedMatrixNames();
    const std::set<std::string> expected(names.begin(), names.end());
    for (const std::string& name : names) {
      if (!quantized.count(name)) {
        problems.push_back(absl::StrCat("tensor '", name, "' is not quantized (", name,
                                        kCodesSuffix, ", ", name, kScalesSuffix, ")"));
      }
    }
    for (const auto& [name, weight] : quantized) {
      if (!expected.count(name)) {
        problems.push_back(absl::StrCat("tensor '", name, "' is quantized, but is kept in float"));
      }
    }
    for (const auto& item : module->named_parameters()) {
      auto it = plain.find(item.key());
      if (it != plain.end() && it->second.scalar_type() != item.value().scalar_type()) {
        problems.push_back(absl::StrCat("tensor '", item.key(), "' is ", TensorLabel(it->second),
                                        ", expected ", DtypeLabel(item.value().scalar_type())));
      }
    }
    LINSERVE_RETURN_IF_ERROR(Problems(problems));
    module->LoadWeights(plain, quantized);
    module->PackForCpu();
    return module;
  } catch (const c10::Error& e) {
    return Invalid(e.what_without_backtrace());
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
  LINSERVE_RETURN_IF_ERROR(SplitTensors(contents.tensors, file.info, plain, quantized));
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
                                            TensorLabel(parameter), ", expected ",
                                            ShapeLabel(shape)));
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
  SafetensorsContents contents;
  for (const auto& [name, weight] : quantized) {
    contents.tensors[name + kCodesSuffix] = weight.codes;
    contents.tensors[name + kScalesSuffix] = weight.scales.view(torch::kFloat16);
  }
  for (const auto& item : module.named_parameters()) {
    if (quantized.count(item.key())) continue;
    auto shape = shapes.find(item.key());
    if (shape == shapes.end()) {
      return absl::InternalError(
          absl::StrCat("rwkv7: parameter '", item.key(), "' is not a checkpoint tensor"));
    }
    LINSERVE_ASSIGN_OR_RETURN(contents.tensors[item.key()],
                              AsStored(item.key(), item.value(), shape->second));
  }
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

// A file mapped read-only: the parser copies each tensor out of it, so the
// file is read once and never held in a buffer of its own. The writer
// replaces files by renaming, so a mapped file does not change under it.
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open '", path, "'"));
    struct stat st;
    if (fstat(fd, &st) != 0) {
      const int error = errno;
      close(fd);
      return absl::ErrnoToStatus(error, absl::StrCat("cannot stat '", path, "'"));
    }
    if (!S_ISREG(st.st_mode)) {
      close(fd);
      return Invalid("'", path, "' is not a regular file");
    }
    void* data = nullptr;
    const size_t size = static_cast<size_t>(st.st_size);
    if (size > 0) {
      data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (data == MAP_FAILED) {
        const int error = errno;
        close(fd);
        return absl::ErrnoToStatus(error, absl::StrCat("cannot map '", path, "'"));
      }
      // Read front to back, each byte once.
      madvise(data, size, MADV_SEQUENTIAL);
      madvise(data, size, MADV_WILLNEED);
    }
    close(fd);
    return std::unique_ptr<MappedFile>(new MappedFile(data, size));
  }
  ~MappedFile() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const {
    return data_ == nullptr ? std::string_view()
                            : std::string_view(static_cast<char*>(data_), size_);
  }

 private:
  MappedFile(void* data, size_t size) : data_(data), size_(size) {}
  void* data_;
  size_t size_;
};

}  // namespace

std::string QuantizedRwkv7DataSha256(const TensorMap& tensors) {
  Sha256 sha;
  for (const auto& [name, tensor] : tensors) {
    const torch::Tensor values = tensor.contiguous();
    const std::string header = name + '\0' + TensorLabel(values) + '\0';
    sha.Update(header);
    sha.Update(std::string_view(static_cast<const char*>(values.data_ptr()),
                                values.numel() * values.element_size()));
  }
  return absl::BytesToHexString(sha.Digest());
}

bool IsQuantizedRwkv7File(const std::string& path) {
  absl::StatusOr<std::unique_ptr<ByteSource>> source = OpenFileByteSource(path);
  if (!source.ok() || (*source)->size() < 8) return false;
  absl::StatusOr<std::string> length = (*source)->ReadString(0, 8);
  if (!length.ok()) return false;
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i)
    header_bytes = header_bytes << 8 | static_cast<uint8_t>((*length)[i]);
  if (header_bytes > kMaxHeaderBytes || header_bytes > (*source)->size() - 8) return false;
  absl::StatusOr<std::string> header = (*source)->ReadString(8, header_bytes);
  if (!header.ok()) return false;
  const nlohmann::json json = nlohmann::json::parse(*header, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return false;
  auto metadata = json.find("__metadata__");
  if (metadata == json.end() || !metadata->is_object()) return false;
  auto format = metadata->find("format");
  return format != metadata->end() && *format == kQuantizedRwkv7Format;
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

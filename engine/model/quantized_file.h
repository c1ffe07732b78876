#ifndef LINSERVE_ENGINE_MODEL_QUANTIZED_FILE_H_
#define LINSERVE_ENGINE_MODEL_QUANTIZED_FILE_H_

// What the files of models quantized beforehand (linserve-quantize) share,
// whatever the family: a safetensors file whose metadata names its format,
// each quantized matrix N as "N.codes" (U8, the kernels' panel layout) and
// "N.scales" (F16, (panels, groups, 16)), every other tensor under its own
// name, and a SHA-256 over all of them. The family's own file
// (engine/rwkv7/rwkv7_quantized_file.h, engine/qwen35/qwen35_quantized_file.h)
// says which matrices are quantized and what its metadata holds.
//
// Thread-safe: no shared state.

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cpu/quantized_linear.h"
#include "engine/formats/safetensors.h"

namespace linserve {

struct LoadOptions;

inline constexpr char kQuantizedCodesSuffix[] = ".codes";
inline constexpr char kQuantizedScalesSuffix[] = ".scales";

// The metadata's "format" of the safetensors file at `path`; "" when it has
// none, or is not a readable safetensors file (the ordinary loader then
// says what is wrong). Reads only the header.
std::string SafetensorsFormatOf(const std::string& path);

// SHA-256, in hex, over every tensor in name order (byte-wise): its name, a
// NUL, its dtype and shape as "U8[1024]" or "F16[2,1,16]", a NUL, its bytes.
// Names and shapes are covered, so moved or swapped data is caught, not only
// flipped bits.
std::string QuantizedFileDataSha256(const TensorMap& tensors);

// "U8[1024]", "F32[3,4]": a tensor as errors name it.
std::string QuantizedFileTensorLabel(const torch::Tensor& tensor);
// "[3,4]": a shape as QuantizedFileTensorLabel writes it.
std::string QuantizedFileShapeLabel(c10::IntArrayRef shape);

// A file's tensors against the canonical `shapes`: every canonical tensor
// once, as itself (into `plain`) or as codes and scales of `kind` in groups
// of `group` (into `quantized`), nothing else; shapes as given, codes and
// scales as the quantization makes them, scales finite. InvalidArgument
// naming the first few problems. Which matrices must be quantized is the
// family's to check.
absl::Status SplitQuantizedTensors(const TensorMap& tensors,
                                   const std::map<std::string, std::vector<int64_t>>& shapes,
                                   WeightQuantization kind, int64_t group, TensorMap& plain,
                                   std::map<std::string, QuantizedWeight>& quantized);

// Each quantized matrix as its codes and scales, beside `plain`.
TensorMap QuantizedFileTensors(const std::map<std::string, QuantizedWeight>& quantized,
                               const TensorMap& plain);

// The metadata fields every format has, parsed and checked: InvalidArgument
// naming the field and what it may be.
absl::StatusOr<WeightQuantization> ParseQuantizationField(const std::string& value);
absl::StatusOr<int64_t> ParseGroupSizeField(const std::string& value);
// 64 lowercase hex digits (a fingerprint, a SHA-256).
absl::Status CheckHexDigestField(const std::string& field, const std::string& value);

// The split tensors against the module they load into: every name in
// `expected` quantized and nothing else, and each plain tensor of its
// parameter's dtype (`parameters`: the module's, by name), so that nothing
// is converted on the way in. The problems found, in words.
std::vector<std::string> QuantizedModuleProblems(
    const std::set<std::string>& expected, const std::map<std::string, QuantizedWeight>& quantized,
    const TensorMap& plain, const TensorMap& parameters);

// A file is served as it was quantized or not at all: InvalidArgument
// starting with `holds` ("the file holds int8 weights in groups of 64") and
// naming what was asked, unless `options` asks for this quantization and
// group (or leaves them open, with no dtype) on the CPU.
absl::Status CheckQuantizedFileAsked(const LoadOptions& options, WeightQuantization quantization,
                                     int64_t group, const std::string& holds);

// InvalidArgument listing the first few `problems`; OK when there are none.
absl::Status QuantizedFileProblems(const std::vector<std::string>& problems);

// A file mapped read-only: a reader copies each tensor out of it, so the
// file is read once and never held in a buffer of its own. The writer
// replaces files by renaming, so a mapped file does not change under it (a
// file cut short in place by another program would stop the process with
// SIGBUS).
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const;

 private:
  MappedFile(void* data, size_t size) : data_(data), size_(size) {}
  void* data_;
  size_t size_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_MODEL_QUANTIZED_FILE_H_

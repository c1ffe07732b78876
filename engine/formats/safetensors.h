#ifndef LINSERVE_ENGINE_SAFETENSORS_H_
#define LINSERVE_ENGINE_SAFETENSORS_H_

// The Hugging Face safetensors format, read and written without the Rust
// library: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
// (padded with spaces), then the raw little-endian, row-major tensor bytes.
// Each header key names a tensor as {"dtype", "shape", "data_offsets"}, with
// offsets relative to the first byte after the header; the optional key
// "__metadata__" maps strings to strings.
//
// Error codes, one rule for the whole codec:
//   DataLoss         the bytes are not a valid safetensors file (truncated,
//                    corrupt header, inconsistent offsets); messages about a
//                    short file start with "safetensors: truncated:".
//   InvalidArgument  the file is valid but is not what the caller asked for
//                    (CheckTensors), or the caller handed in something that
//                    cannot be written (WriteSafetensorsFile).
//   errno-derived    the file system failed (NotFound, PermissionDenied, ...).
//
// All functions are thread-safe: they share no state.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace linserve {

// Ordered so that serialization and error reports are deterministic.
using TensorMap = std::map<std::string, at::Tensor>;
using SafetensorsMetadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  TensorMap tensors;
  SafetensorsMetadata metadata;
};

// Parses a whole file held in memory. The tensors come back on the CPU,
// contiguous, and owning their memory, so `bytes` may be freed afterwards.
// Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL; at most 64
// dimensions. Built for hostile input: the header is checked as it streams
// through the JSON parser and refused at the first thing out of place, so
// memory follows what the file validly declares (at worst about 12 times the
// header size, for a header of nothing but empty tensors or tiny metadata
// entries). Every inconsistency is a DataLoss error naming the tensor.
// Unlike the reference reader it tolerates unused gaps between tensors; it
// rejects overlapping ones, and BOOL bytes other than 0 and 1.
absl::StatusOr<SafetensorsContents> ParseSafetensors(std::string_view bytes);

// The same checks, but each tensor whose data is aligned to its element size
// is a view of `bytes` (not owning: `bytes` must outlive it, and nothing may
// write through it); the others are copies. For reading a file in place,
// e.g. checking it before deciding to keep it.
absl::StatusOr<SafetensorsContents> ParseSafetensorsInPlace(std::string_view bytes);

// Serializes tensors (moved to the CPU and made contiguous first) in name
// order, the header padded with spaces to a multiple of 8 bytes like the
// reference writer, so equal inputs give identical bytes. The reference
// writer orders tensors by dtype first; readers use the offsets, so both
// layouts read the same.
// Precondition: every tensor is defined, strided and of a supported dtype; no
// tensor is named "__metadata__"; names and metadata are valid UTF-8.
// Violations throw c10::Error; WriteSafetensorsFile reports them as a Status.
std::string SerializeSafetensors(const TensorMap& tensors,
                                 const SafetensorsMetadata& metadata = {});

absl::StatusOr<SafetensorsContents> ReadSafetensorsFile(const std::string& path);

// Writes atomically, so that a crash leaves either the old file or the new
// one: a temporary file in the same directory, fsync, rename over `path`,
// fsync of the directory. Streams tensor bytes rather than building the
// whole file in memory.
absl::Status WriteSafetensorsFile(const std::string& path, const TensorMap& tensors,
                                  const SafetensorsMetadata& metadata = {});

// What a loader expects of one tensor.
struct TensorSpec {
  std::vector<int64_t> shape;
  c10::ScalarType dtype;
};

// Checks parsed tensors against the names a model expects. Every mismatch
// (missing, unknown, wrong dtype, wrong shape) is reported, a few at most,
// in one InvalidArgument error, each naming the tensor with what was expected
// and what was found, e.g.
//   safetensors: missing tensor 'blocks.0.attn.qkv.weight' (expected F32 [768, 256])
//   safetensors: tensor 'x' has shape [3, 4], expected [4, 3]
absl::Status CheckTensors(const TensorMap& tensors,
                          const std::map<std::string, TensorSpec>& expected);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_SAFETENSORS_H_

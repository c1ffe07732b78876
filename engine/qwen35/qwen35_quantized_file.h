#ifndef LINSERVE_ENGINE_QWEN35_QUANTIZED_FILE_H_
#define LINSERVE_ENGINE_QWEN35_QUANTIZED_FILE_H_

// A Qwen3.5 model whose big matrices were quantized once, beforehand
// (linserve-quantize), so that a server starts on 8- or 4-bit weights
// without the float shards and without quantizing again: the 0.8B shape's
// int8 file is 0.52 of the bfloat16 shards (777 against 1,509 MB), its int4
// file 0.28, and a server is ready 2.5x (int8) and 4x (int4) sooner than
// when it quantizes the shards at start (README, "Serving Qwen3.5").
//
// It is a model directory as a real checkpoint is (config.json,
// generation_config.json, the tokenizer, the chat template), with one
// model.safetensors in place of the shards and their index. That file
// (engine/model/quantized_file.h says what every such file shares):
//   N.codes, N.scales   for every matrix N the module stores quantized
//                       (Qwen35Impl::QuantizedMatrixNames: embed_tokens.weight,
//                       every projection and MLP matrix, lm_head.weight when
//                       the head is untied; a tied head is the embedding's
//                       codes, stored once);
//   every other canonical tensor (Qwen35TensorShapes: the norms, the
//                       convolution, dt_bias, A_log) as the module holds it,
//                       F32.
// Metadata (strings):
//   format              "linserve-quantized-qwen3_5"; format_version "1"
//   quantization        "int8" or "int4"; group_size "32" or "64"
//   config              Qwen35ConfigToJson of the shape: config.json beside
//                       the file must describe the same one
//   source_fingerprint  the float weights' fingerprint (Qwen35Fingerprint),
//                       which the model reports, so sessions move between
//                       servers of the float and the quantized model
//   data_sha256         QuantizedFileDataSha256 of the tensors
// No compute dtype: every matrix is quantized, and the rest is float32
// whatever the dtype, so a file written on a machine with bfloat16
// products serves on one without.
//
// Reading checks every field, tensor, shape, size and scale before the
// model is built, and an error names the field or tensor and what was
// expected: DataLoss when the bytes are not a valid safetensors file or do
// not hash to data_sha256; InvalidArgument for anything else out of place,
// and for a load asking another format than the file holds. Thread-safe: no
// shared state.

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/qwen35/qwen35_config.h"
#include "engine/text/tokenizer.h"

namespace linserve {

class Qwen35Model;
struct LoadOptions;

inline constexpr char kQuantizedQwen35Format[] = "linserve-quantized-qwen3_5";
inline constexpr char kQuantizedQwen35FormatVersion[] = "1";

// True when `dir`'s model.safetensors is a file of this format (reads only
// its header).
bool IsQuantizedQwen35Directory(const std::string& dir);

// The file of a model loaded with a quantization: its quantized matrices as
// they are held, the rest as the module holds it. FailedPrecondition for a
// model without one.
absl::StatusOr<std::string> SerializeQuantizedQwen35(const Qwen35Model& model);
// The same written to `path` atomically (WriteSafetensorsFile), streamed:
// the quantized matrices are not copied.
absl::Status WriteQuantizedQwen35File(const Qwen35Model& model, const std::string& path);

// Reads, checks and builds a model from bytes of this format. `config` is
// the directory's (config.json with generation_config.json), which must be
// the file's shape. `options` must ask for the file's own format or leave it
// open (no quantization and no dtype); the KV cache's options are the
// server's. `where` starts each error.
absl::StatusOr<std::unique_ptr<Qwen35Model>> ParseQuantizedQwen35(std::string_view bytes,
                                                                  const Qwen35Config& config,
                                                                  Tokenizer tokenizer,
                                                                  const LoadOptions& options,
                                                                  const std::string& where);
// The same from a file, mapped rather than read into a buffer.
absl::StatusOr<std::unique_ptr<Qwen35Model>> LoadQuantizedQwen35File(const std::string& path,
                                                                     const Qwen35Config& config,
                                                                     Tokenizer tokenizer,
                                                                     const LoadOptions& options);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_QWEN35_QUANTIZED_FILE_H_

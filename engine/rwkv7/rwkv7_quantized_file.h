#ifndef LINSERVE_ENGINE_RWKV7_QUANTIZED_FILE_H_
#define LINSERVE_ENGINE_RWKV7_QUANTIZED_FILE_H_

// An RWKV-7 model whose big matrices were quantized once, beforehand
// (linserve-quantize), so that a server starts on 8- or 4-bit weights without
// the float file and without quantizing again: loading is reading, and the
// file is about half (int8) or a third (int4) of the bfloat16 one (0.1B
// shape: 203 and 116 MB against 382 MB).
//
// The file is safetensors (engine/formats/safetensors.h). Tensors:
//   N.codes    U8 (code_bytes)            for every matrix N that Rwkv7Impl
//   N.scales   F16 (panels, groups, 16)   stores quantized (QuantizedMatrixNames:
//              emb.weight, head.weight, each block's att.receptance|key|value|
//              output.weight and ffn.key|value.weight), in the layout of
//              engine/cpu/quantized_kernel.h (the scales are its half bits);
//   every other canonical tensor (engine/rwkv7/rwkv7_config.h) under its own
//   name in the module's dtype: F32 vectors and r_k, the low-rank matrices
//   (att.w1 ... att.g2) in compute_dtype.
// Metadata (strings):
//   format              "linserve-quantized-rwkv7"; format_version "1"
//   quantization        "int8" or "int4"; group_size "32" or "64"
//   compute_dtype       the low-rank matrices' dtype: float32, bfloat16, float16
//   config              the shape as JSON (Rwkv7ConfigToJson): codes do not
//                       say which (out, in) they hold
//   source_fingerprint  the float model's fingerprint (Rwkv7Fingerprint), 64
//                       hex digits: the model reports it, so sessions move
//                       between servers of the float and the quantized file
//                       (taken on the file's word: the float weights are
//                       not there to hash)
//   tokenizer           "rwkv_world" or "byte" (a model directory's
//                       config.json, when it names one, wins)
//   data_sha256         SHA-256, in hex, over every tensor in name order
//                       (byte-wise): its name, a NUL, its dtype and shape as
//                       "U8[1024]" or "F16[2,1,16]", a NUL, its bytes. Names
//                       and shapes are covered, so moved or swapped data is
//                       caught, not only flipped bits.
//
// Reading checks every field, tensor, shape, size and scale before the
// model is built, and an error names the field or tensor and what was
// expected. Error codes: DataLoss when the bytes are not a valid safetensors
// file or do not hash to data_sha256; InvalidArgument for anything else out
// of place, and for a load asking another format than the file holds;
// errno-derived ones when the file system fails. Thread-safe: no shared
// state.

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/formats/safetensors.h"
#include "engine/rwkv7/rwkv7_quantized_metadata.h"
#include "nlohmann/json.hpp"

namespace linserve {

class Rwkv7Model;
struct LoadOptions;

// True when `path` is a safetensors file whose metadata names the format
// (kQuantizedRwkv7Format). Reads only the header; false for anything else,
// an unreadable or broken file included (the ordinary loader then says what
// is wrong).
bool IsQuantizedRwkv7File(const std::string& path);

// The file of a model loaded with a quantization (LoadOptions::quantization):
// its quantized matrices as they are held, the rest as the module holds it.
// FailedPrecondition for a model without one.
absl::StatusOr<std::string> SerializeQuantizedRwkv7(const Rwkv7Model& model);
// The same written to `path` atomically (WriteSafetensorsFile), streamed:
// the quantized matrices are not copied.
absl::Status WriteQuantizedRwkv7File(const Rwkv7Model& model, const std::string& path);

// Reads, checks and builds a model from a file of this format. `config` is
// the model directory's config.json ({} for none). `options` must ask for
// the file's own format or leave it open: quantization kNone with no dtype
// serves what the file holds; another quantization, group or dtype, or a
// device other than the CPU, is refused naming both. The file is mapped
// rather than read into a buffer: a file cut short in place by another
// program while it loads would stop the process (SIGBUS), which
// WriteSafetensorsFile, replacing files by renaming, never does.
absl::StatusOr<std::unique_ptr<Rwkv7Model>> LoadQuantizedRwkv7File(const std::string& path,
                                                                   const nlohmann::json& config,
                                                                   const LoadOptions& options);
// The same from bytes in memory (tests, fuzzing); `where` starts each error.
absl::StatusOr<std::unique_ptr<Rwkv7Model>> ParseQuantizedRwkv7(std::string_view bytes,
                                                                const nlohmann::json& config,
                                                                const LoadOptions& options,
                                                                const std::string& where);

// The data_sha256 of these tensors, for tools and tests that assemble a
// file by hand.
std::string QuantizedRwkv7DataSha256(const TensorMap& tensors);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_RWKV7_QUANTIZED_FILE_H_

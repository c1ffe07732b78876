#ifndef LINSERVE_ENGINE_RWKV7_QUANTIZED_METADATA_H_
#define LINSERVE_ENGINE_RWKV7_QUANTIZED_METADATA_H_

// The metadata of an RWKV-7 file quantized beforehand (the format is
// engine/rwkv7/rwkv7_quantized_file.h's): what it says in plain fields,
// written from them and read back with every field checked, and whether it
// is what a load asks for. No tensors: each rule is tested on its own.

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cpu/quantized_kernel.h"
#include "engine/formats/safetensors.h"
#include "engine/rwkv7/rwkv7_config.h"

namespace linserve {

struct LoadOptions;

// The metadata's "format" and the one "format_version" this build reads.
inline constexpr char kQuantizedRwkv7Format[] = "linserve-quantized-rwkv7";
inline constexpr char kQuantizedRwkv7FormatVersion[] = "1";

struct QuantizedRwkv7Info {
  WeightQuantization quantization = WeightQuantization::kNone;  // int8 or int4
  int64_t group = 0;                                            // 32 or 64
  c10::ScalarType compute_dtype = c10::ScalarType::Float;       // the low-rank matrices'
  Rwkv7Config config;
  std::string fingerprint;  // of the float weights: 64 lowercase hex digits
  std::string tokenizer;    // Tokenizer::name(): rwkv_world or byte
  std::string data_sha256;  // 64 lowercase hex digits
};

// "int8 weights in groups of 32 with bfloat16 low-rank matrices".
std::string DescribeQuantizedRwkv7(const QuantizedRwkv7Info& info);

// The metadata as the file stores it: every field a string, the config as
// Rwkv7ConfigToJson's JSON.
SafetensorsMetadata QuantizedRwkv7Metadata(const QuantizedRwkv7Info& info);

// The fields back, each checked (InvalidArgument naming the field and what
// it may be): the format and version first; no key but the format's; the
// config's every key present, an integer within bounds far above published
// models, and consistent (d_model = n_heads x head_size).
absl::StatusOr<QuantizedRwkv7Info> ReadQuantizedRwkv7Metadata(const SafetensorsMetadata& metadata);

// A file is served as it was quantized or not at all: InvalidArgument,
// naming what the file holds and what was asked, unless `options` asks for
// that (or leaves it open: no quantization and no dtype) on the CPU.
absl::Status CheckQuantizedRwkv7Asked(const LoadOptions& options, const QuantizedRwkv7Info& info);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_RWKV7_QUANTIZED_METADATA_H_

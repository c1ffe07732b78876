#include "engine/rwkv7/rwkv7_quantized_metadata.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/base/error_text.h"
#include "engine/base/status_macros.h"
#include "engine/model/language_model.h"
#include "engine/model/quantized_file.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

// The metadata keys of format version 1; any other is refused, so that a
// field a later version adds is never silently ignored.
constexpr const char* kMetadataKeys[] = {
    "format", "format_version",     "quantization", "group_size", "compute_dtype",
    "config", "source_fingerprint", "tokenizer",    "data_sha256"};
// Bounds on the config before it sizes anything: far above the published
// models (2.9B: 32 layers of 2,560, V 65,536), and low enough that no
// product of two of them overflows.
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxDimension = int64_t{1} << 24;

// The shape as Rwkv7ConfigToJson writes it: every key, nothing else.
absl::StatusOr<Rwkv7Config> ParseConfig(const std::string& text) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return InvalidArgument("metadata 'config' is not a JSON object");
  }
  Rwkv7Config c;
  struct Field {
    const char* name;
    int64_t* value;
    int64_t min;
    int64_t max;
  };
  const Field fields[] = {
      {"n_layers", &c.n_layers, 1, kMaxLayers},    {"d_model", &c.d_model, 1, kMaxDimension},
      {"n_heads", &c.n_heads, 1, kMaxDimension},   {"head_size", &c.head_size, 1, kMaxDimension},
      {"w_lora", &c.w_lora, 1, kMaxDimension},     {"a_lora", &c.a_lora, 1, kMaxDimension},
      {"v_lora", &c.v_lora, 0, kMaxDimension},     {"g_lora", &c.g_lora, 1, kMaxDimension},
      {"ffn_size", &c.ffn_size, 1, kMaxDimension}, {"vocab_size", &c.vocab_size, 1, kMaxDimension},
  };
  std::set<std::string> known = {"pre_norm"};
  for (const Field& f : fields) {
    known.insert(f.name);
    auto it = json.find(f.name);
    if (it == json.end() || !it->is_number_integer()) {
      return InvalidArgument("config: '", f.name, "' is missing or not an integer");
    }
    const bool in_range = it->is_number_unsigned()
                              ? it->get<uint64_t>() <= static_cast<uint64_t>(f.max) &&
                                    it->get<uint64_t>() >= static_cast<uint64_t>(f.min)
                              : it->get<int64_t>() >= f.min && it->get<int64_t>() <= f.max;
    if (!in_range) {
      return InvalidArgument("config: '", f.name, "' is ", it->dump(), ", outside [", f.min, ", ",
                             f.max, "]");
    }
    *f.value = it->get<int64_t>();
  }
  auto pre_norm = json.find("pre_norm");
  if (pre_norm == json.end() || !pre_norm->is_boolean()) {
    return InvalidArgument("config: 'pre_norm' is missing or not true or false");
  }
  c.pre_norm = pre_norm->get<bool>();
  for (const auto& item : json.items()) {
    if (!known.count(item.key())) {
      return InvalidArgument("config: unknown key ", QuotedExcerpt(item.key()));
    }
  }
  if (c.n_heads * c.head_size != c.d_model) {
    return InvalidArgument("config: d_model ", c.d_model, " is not n_heads ", c.n_heads,
                           " x head_size ", c.head_size);
  }
  if (c.n_layers > 1 && c.v_lora < 1) {
    return InvalidArgument("config: v_lora is 0, but blocks 1.. have a value residual");
  }
  return c;
}

}  // namespace

std::string DescribeQuantizedRwkv7(const QuantizedRwkv7Info& info) {
  return absl::StrCat(WeightQuantizationName(info.quantization), " weights in groups of ",
                      info.group, " with ", ComputeDtypeName(info.compute_dtype),
                      " low-rank matrices");
}

SafetensorsMetadata QuantizedRwkv7Metadata(const QuantizedRwkv7Info& info) {
  return {{"format", kQuantizedRwkv7Format},
          {"format_version", kQuantizedRwkv7FormatVersion},
          {"quantization", WeightQuantizationName(info.quantization)},
          {"group_size", std::to_string(info.group)},
          {"compute_dtype", ComputeDtypeName(info.compute_dtype)},
          {"config", Rwkv7ConfigToJson(info.config).dump()},
          {"source_fingerprint", info.fingerprint},
          {"tokenizer", info.tokenizer},
          {"data_sha256", info.data_sha256}};
}

absl::StatusOr<QuantizedRwkv7Info> ReadQuantizedRwkv7Metadata(const SafetensorsMetadata& metadata) {
  auto field = [&](const char* key) -> absl::StatusOr<std::string> {
    auto it = metadata.find(key);
    if (it == metadata.end()) return InvalidArgument("metadata has no '", key, "'");
    return it->second;
  };
  LINSERVE_ASSIGN_OR_RETURN(const std::string format, field("format"));
  if (format != kQuantizedRwkv7Format) {
    return InvalidArgument("metadata 'format' is ", QuotedExcerpt(format), ", expected '",
                           kQuantizedRwkv7Format, "'");
  }
  LINSERVE_ASSIGN_OR_RETURN(const std::string version, field("format_version"));
  if (version != kQuantizedRwkv7FormatVersion) {
    return InvalidArgument("format_version ", QuotedExcerpt(version),
                           " is not one this build reads (", kQuantizedRwkv7FormatVersion,
                           "); quantize the float model again with this build's linserve-quantize");
  }
  for (const auto& entry : metadata) {
    const std::string& key = entry.first;
    if (std::find_if(std::begin(kMetadataKeys), std::end(kMetadataKeys),
                     [&](const char* k) { return key == k; }) == std::end(kMetadataKeys)) {
      return InvalidArgument("metadata key ", QuotedExcerpt(key), " is not one of format version ",
                             kQuantizedRwkv7FormatVersion);
    }
  }
  QuantizedRwkv7Info info;
  LINSERVE_ASSIGN_OR_RETURN(const std::string quantization, field("quantization"));
  LINSERVE_ASSIGN_OR_RETURN(info.quantization, ParseQuantizationField(quantization));
  LINSERVE_ASSIGN_OR_RETURN(const std::string group, field("group_size"));
  LINSERVE_ASSIGN_OR_RETURN(info.group, ParseGroupSizeField(group));
  LINSERVE_ASSIGN_OR_RETURN(const std::string dtype, field("compute_dtype"));
  absl::StatusOr<c10::ScalarType> compute_dtype = ParseComputeDtype(dtype);
  if (!compute_dtype.ok()) {
    return InvalidArgument("metadata 'compute_dtype' is ", QuotedExcerpt(dtype),
                           ", expected float32, bfloat16 or float16");
  }
  info.compute_dtype = *compute_dtype;
  LINSERVE_ASSIGN_OR_RETURN(const std::string config, field("config"));
  LINSERVE_ASSIGN_OR_RETURN(info.config, ParseConfig(config));
  LINSERVE_ASSIGN_OR_RETURN(info.fingerprint, field("source_fingerprint"));
  LINSERVE_RETURN_IF_ERROR(CheckHexDigestField("source_fingerprint", info.fingerprint));
  LINSERVE_ASSIGN_OR_RETURN(info.tokenizer, field("tokenizer"));
  if (info.tokenizer != "rwkv_world" && info.tokenizer != "byte" && info.tokenizer != "bytes") {
    return InvalidArgument("metadata 'tokenizer' is ", QuotedExcerpt(info.tokenizer),
                           ", expected rwkv_world or byte");
  }
  LINSERVE_ASSIGN_OR_RETURN(info.data_sha256, field("data_sha256"));
  LINSERVE_RETURN_IF_ERROR(CheckHexDigestField("data_sha256", info.data_sha256));
  return info;
}

absl::Status CheckQuantizedRwkv7Asked(const LoadOptions& options, const QuantizedRwkv7Info& info) {
  const std::string holds = absl::StrCat("the file holds ", DescribeQuantizedRwkv7(info));
  LINSERVE_RETURN_IF_ERROR(CheckQuantizedFileAsked(options, info.quantization, info.group, holds));
  if (options.dtype.has_value() && *options.dtype != info.compute_dtype) {
    return InvalidArgument(holds, ", but ", ComputeDtypeName(*options.dtype),
                           " low-rank matrices were asked for");
  }
  return absl::OkStatus();
}

}  // namespace linserve

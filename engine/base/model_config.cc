#include "engine/base/model_config.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

using nlohmann::json;

struct KindName {
  AttentionKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {AttentionKind::kSoftmax, "softmax"},
    {AttentionKind::kLinearElu, "linear_elu"},
    {AttentionKind::kLinearSoftmax, "linear_softmax"},
    {AttentionKind::kLinearCosine, "linear_cosine"},
    {AttentionKind::kVq, "vq"},
    {AttentionKind::kCompressed, "compressed"},
};

absl::Status RejectUnknownKeys(const json& object, const std::set<std::string>& known,
                               const std::string& where) {
  for (const auto& item : object.items()) {
    if (known.count(item.key()) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config: unknown key '", where, item.key(), "'; known keys: ",
          absl::StrJoin(known, ", ")));
    }
  }
  return absl::OkStatus();
}

// Reads object[key] into *out when present, with a type check naming the key.
template <typename T>
absl::Status ReadOptional(const json& object, const std::string& key, const std::string& where,
                          T* out) {
  auto it = object.find(key);
  if (it == object.end()) return absl::OkStatus();
  try {
    *out = it->get<T>();
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: '", where, key, "' has the wrong type: ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status CheckRange(const std::string& field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", field, " = ", value,
                                                   " is outside [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

const char* AttentionKindName(AttentionKind kind) {
  for (const KindName& entry : kKindNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "unknown";
}

absl::StatusOr<AttentionKind> ParseAttentionKind(const std::string& name) {
  std::vector<std::string> names;
  for (const KindName& entry : kKindNames) {
    if (name == entry.name) return entry.kind;
    names.push_back(entry.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("config: attention.kind '", name,
                                                 "' is not one of ", absl::StrJoin(names, ", ")));
}

bool IsLinearKind(AttentionKind kind) {
  return kind == AttentionKind::kLinearElu || kind == AttentionKind::kLinearSoftmax ||
         kind == AttentionKind::kLinearCosine;
}

bool IsSoftmaxFamilyKind(AttentionKind kind) {
  return kind == AttentionKind::kSoftmax || kind == AttentionKind::kVq ||
         kind == AttentionKind::kCompressed;
}

bool HasConstantState(AttentionKind kind) { return kind != AttentionKind::kSoftmax; }

absl::Status ModelConfig::Validate() const {
  // Bounds are generous sanity limits, not tuning advice.
  LINSERVE_RETURN_IF_ERROR(CheckRange("vocab_size", vocab_size, 258, 1 << 20));
  LINSERVE_RETURN_IF_ERROR(CheckRange("d_model", d_model, 1, 1 << 16));
  LINSERVE_RETURN_IF_ERROR(CheckRange("n_layers", n_layers, 1, 1024));
  LINSERVE_RETURN_IF_ERROR(CheckRange("n_heads", n_heads, 1, 1024));
  LINSERVE_RETURN_IF_ERROR(CheckRange("head_dim", head_dim, 2, 4096));
  LINSERVE_RETURN_IF_ERROR(CheckRange("mlp_hidden", mlp_hidden, 1, 1 << 18));
  LINSERVE_RETURN_IF_ERROR(CheckRange("bos_id", bos_id, 256, vocab_size - 1));
  LINSERVE_RETURN_IF_ERROR(CheckRange("eos_id", eos_id, 256, vocab_size - 1));
  if (head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: head_dim = ", head_dim, " must be even (rotary pairs)"));
  }
  if (!(norm_eps > 0 && norm_eps < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: norm_eps = ", norm_eps, " must be in (0, 1)"));
  }
  const AttentionConfig& a = attention;
  LINSERVE_RETURN_IF_ERROR(CheckRange("attention.chunk_size", a.chunk_size, 1, 4096));
  if (a.rope && !(IsLinearKind(a.kind) || a.kind == AttentionKind::kSoftmax)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: attention.rope applies to softmax and the linear_* kinds, not ",
                     AttentionKindName(a.kind)));
  }
  if (a.rope && !(a.rope_theta > 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: attention.rope_theta = ", a.rope_theta, " must be > 1"));
  }
  if (a.scale == AttentionScale::kEntropyInvariant && !IsSoftmaxFamilyKind(a.kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config: attention.scale 'entropy_invariant' applies to softmax, vq and compressed, "
        "not ",
        AttentionKindName(a.kind)));
  }
  if (a.kind == AttentionKind::kVq) {
    LINSERVE_RETURN_IF_ERROR(CheckRange("attention.codebook_size", a.codebook_size, 1, 65536));
    LINSERVE_RETURN_IF_ERROR(CheckRange("attention.window", a.window, 1, 65536));
  }
  if (a.kind == AttentionKind::kCompressed) {
    LINSERVE_RETURN_IF_ERROR(CheckRange("attention.slots", a.slots, 1, 4096));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ModelConfigFromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("config: top level must be an object");
  LINSERVE_RETURN_IF_ERROR(RejectUnknownKeys(
      j,
      {"model_type", "vocab_size", "d_model", "n_layers", "n_heads", "head_dim", "mlp_hidden",
       "norm_eps", "attention", "tokenizer", "training"},
      ""));
  ModelConfig c;
  std::string model_type = "linserve";
  LINSERVE_RETURN_IF_ERROR(ReadOptional(j, "model_type", "", &model_type));
  if (model_type != "linserve") {
    return absl::InvalidArgumentError(
        absl::StrCat("config: model_type '", model_type, "' is not 'linserve'"));
  }
  LINSERVE_RETURN_IF_ERROR(ReadOptional(j, "vocab_size", "", &c.vocab_size));
  LINSERVE_RETURN_IF_ERROR(ReadOptional(j, "d_model", "", &c.d_model));
  LINSERVE_RETURN_IF_ERROR(ReadOptional(j, "n_layers", "", &c.n_layers));
  LINSERVE_RETURN_IF_ERROR(ReadOptional(j, "n_heads", "", &c.n_heads));
  LINSERVE_RETURN_IF_ERROR(ReadOptional(j, "head_dim", "", &c.head_dim));
  LINSERVE_RETURN_IF_ERROR(ReadOptional(j, "mlp_hidden", "", &c.mlp_hidden));
  LINSERVE_RETURN_IF_ERROR(ReadOptional(j, "norm_eps", "", &c.norm_eps));

  if (auto it = j.find("attention"); it != j.end()) {
    const json& a = *it;
    if (!a.is_object()) return absl::InvalidArgumentError("config: 'attention' must be an object");
    LINSERVE_RETURN_IF_ERROR(RejectUnknownKeys(
        a,
        {"kind", "rope", "rope_theta", "scale", "chunk_size", "codebook_size", "window", "slots",
         "token_shift"},
        "attention."));
    std::string kind = AttentionKindName(c.attention.kind);
    LINSERVE_RETURN_IF_ERROR(ReadOptional(a, "kind", "attention.", &kind));
    LINSERVE_ASSIGN_OR_RETURN(c.attention.kind, ParseAttentionKind(kind));
    LINSERVE_RETURN_IF_ERROR(ReadOptional(a, "rope", "attention.", &c.attention.rope));
    LINSERVE_RETURN_IF_ERROR(ReadOptional(a, "rope_theta", "attention.", &c.attention.rope_theta));
    std::string scale = "default";
    LINSERVE_RETURN_IF_ERROR(ReadOptional(a, "scale", "attention.", &scale));
    if (scale == "default") {
      c.attention.scale = AttentionScale::kDefault;
    } else if (scale == "entropy_invariant") {
      c.attention.scale = AttentionScale::kEntropyInvariant;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "config: attention.scale '", scale, "' is not one of default, entropy_invariant"));
    }
    LINSERVE_RETURN_IF_ERROR(ReadOptional(a, "chunk_size", "attention.", &c.attention.chunk_size));
    LINSERVE_RETURN_IF_ERROR(
        ReadOptional(a, "codebook_size", "attention.", &c.attention.codebook_size));
    LINSERVE_RETURN_IF_ERROR(ReadOptional(a, "window", "attention.", &c.attention.window));
    LINSERVE_RETURN_IF_ERROR(ReadOptional(a, "slots", "attention.", &c.attention.slots));
    LINSERVE_RETURN_IF_ERROR(
        ReadOptional(a, "token_shift", "attention.", &c.attention.token_shift));
  }
  if (auto it = j.find("tokenizer"); it != j.end()) {
    const json& t = *it;
    if (!t.is_object()) return absl::InvalidArgumentError("config: 'tokenizer' must be an object");
    LINSERVE_RETURN_IF_ERROR(RejectUnknownKeys(t, {"type", "bos_id", "eos_id", "add_bos"}, "tokenizer."));
    std::string type = "byte";
    LINSERVE_RETURN_IF_ERROR(ReadOptional(t, "type", "tokenizer.", &type));
    if (type != "byte") {
      return absl::InvalidArgumentError(
          absl::StrCat("config: tokenizer.type '", type, "' is not 'byte'"));
    }
    LINSERVE_RETURN_IF_ERROR(ReadOptional(t, "bos_id", "tokenizer.", &c.bos_id));
    LINSERVE_RETURN_IF_ERROR(ReadOptional(t, "eos_id", "tokenizer.", &c.eos_id));
    LINSERVE_RETURN_IF_ERROR(ReadOptional(t, "add_bos", "tokenizer.", &c.add_bos));
  }
  if (auto it = j.find("training"); it != j.end()) {
    if (!it->is_object()) return absl::InvalidArgumentError("config: 'training' must be an object");
    c.training = *it;
  }
  LINSERVE_RETURN_IF_ERROR(c.Validate());
  return c;
}

json ModelConfigToJson(const ModelConfig& c) {
  const AttentionConfig& a = c.attention;
  json attention = {{"kind", AttentionKindName(a.kind)},
                    {"chunk_size", a.chunk_size},
                    {"scale", a.scale == AttentionScale::kEntropyInvariant ? "entropy_invariant"
                                                                          : "default"},
                    {"rope", a.rope},
                    {"token_shift", a.token_shift}};
  if (a.rope) attention["rope_theta"] = a.rope_theta;
  if (a.kind == AttentionKind::kVq) {
    attention["codebook_size"] = a.codebook_size;
    attention["window"] = a.window;
  }
  if (a.kind == AttentionKind::kCompressed) attention["slots"] = a.slots;
  return json{{"model_type", "linserve"},
              {"vocab_size", c.vocab_size},
              {"d_model", c.d_model},
              {"n_layers", c.n_layers},
              {"n_heads", c.n_heads},
              {"head_dim", c.head_dim},
              {"mlp_hidden", c.mlp_hidden},
              {"norm_eps", c.norm_eps},
              {"attention", attention},
              {"tokenizer",
               {{"type", "byte"},
                {"bos_id", c.bos_id},
                {"eos_id", c.eos_id},
                {"add_bos", c.add_bos}}},
              {"training", c.training}};
}

absl::StatusOr<ModelConfig> ReadModelConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("config: cannot open ", path));
  json j = json::parse(in, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", path, " is not valid JSON"));
  }
  return ModelConfigFromJson(j);
}

absl::Status WriteModelConfig(const ModelConfig& config, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return absl::InternalError(absl::StrCat("config: cannot write ", path));
  out << ModelConfigToJson(config).dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("config: write failed for ", path));
  return absl::OkStatus();
}

}  // namespace linserve

#include "engine/qwen35/qwen35_config.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

// Bounds that keep every product of sizes far from int64 overflow (a hostile
// config.json must not wrap a shape around) while admitting any real model.
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // hidden, intermediate, heads x dims
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxHeadDim = 4096;
constexpr int64_t kMaxVocab = int64_t{1} << 24;  // the tokenizer's bound too
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxConvKernel = 64;
constexpr int64_t kMaxPositions = int64_t{1} << 30;

// One JSON object of config.json being read, and how errors name its fields:
// "config.json: text_config.head_dim ...".
class Fields {
 public:
  Fields(const nlohmann::json& json, std::string prefix)
      : json_(json), prefix_(std::move(prefix)) {}

  std::string Name(const std::string& key) const { return absl::StrCat(prefix_, key); }

  absl::Status Error(const std::string& key, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("config.json: ", Name(key), " ", what));
  }

  const nlohmann::json* Find(const std::string& key) const {
    auto it = json_.find(key);
    if (it == json_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  // A required integer in [1, max].
  absl::StatusOr<int64_t> Size(const std::string& key, int64_t max) const {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return Error(key, "is missing");
    return CheckSize(key, *v, max);
  }
  absl::StatusOr<int64_t> SizeOr(const std::string& key, int64_t fallback, int64_t max) const {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return fallback;
    return CheckSize(key, *v, max);
  }

  // A finite number > 0 (and <= max).
  absl::StatusOr<double> Positive(const nlohmann::json& v, const std::string& name,
                                  double max) const {
    if (!v.is_number()) return Error(name, absl::StrCat("(", v.dump(), ") is not a number"));
    const double d = v.get<double>();
    if (!std::isfinite(d) || !(d > 0) || d > max) {
      return Error(name, absl::StrCat("(", v.dump(), ") is not a number in (0, ", max, "]"));
    }
    return d;
  }

  absl::StatusOr<bool> BoolOr(const std::string& key, bool fallback) const {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Error(key, absl::StrCat("(", v->dump(), ") is not true or false"));
    return v->get<bool>();
  }

  // An optional string that must be one of `allowed` when present.
  absl::Status StringIn(const std::string& key, const std::set<std::string>& allowed) const {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_string() || !allowed.count(v->get<std::string>())) {
      return Error(key, absl::StrCat("(", v->dump(), ") is not supported (expected ",
                                     absl::StrJoin(allowed, " or "), ")"));
    }
    return absl::OkStatus();
  }

  const nlohmann::json& json() const { return json_; }

 private:
  absl::StatusOr<int64_t> CheckSize(const std::string& key, const nlohmann::json& v,
                                    int64_t max) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > max) {
      return Error(key, absl::StrCat("(", v.dump(), ") is not an integer in [1, ", max, "]"));
    }
    return v.get<int64_t>();
  }

  const nlohmann::json& json_;
  std::string prefix_;
};

// eos_token_id: a number, a list of numbers, or null; each in [0, vocab).
absl::Status AddEosIds(const Fields& fields, const std::string& key, int64_t vocab_size,
                       std::vector<int64_t>* ids) {
  const nlohmann::json* v = fields.Find(key);
  if (v == nullptr) return absl::OkStatus();
  std::vector<nlohmann::json> items;
  if (v->is_array()) {
    items.assign(v->begin(), v->end());
  } else {
    items.push_back(*v);
  }
  for (const nlohmann::json& item : items) {
    if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() >= vocab_size) {
      return fields.Error(
          key, absl::StrCat("(", v->dump(), ") is not a token id or a list of token ids in [0, ",
                            vocab_size, ")"));
    }
    if (std::find(ids->begin(), ids->end(), item.get<int64_t>()) == ids->end()) {
      ids->push_back(item.get<int64_t>());
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* Qwen35LayerKindName(Qwen35LayerKind kind) {
  return kind == Qwen35LayerKind::kFullAttention ? "full_attention" : "linear_attention";
}

int64_t Qwen35Config::rotary_dim() const {
  // transformers: int(head_dim * partial_rotary_factor).
  return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
}

int64_t Qwen35Config::full_attention_layers() const {
  int64_t n = 0;
  for (Qwen35LayerKind kind : layer_types) n += kind == Qwen35LayerKind::kFullAttention;
  return n;
}

bool Qwen35Config::operator==(const Qwen35Config& o) const {
  return hidden_size == o.hidden_size && intermediate_size == o.intermediate_size &&
         vocab_size == o.vocab_size && num_hidden_layers == o.num_hidden_layers &&
         layer_types == o.layer_types && num_attention_heads == o.num_attention_heads &&
         num_key_value_heads == o.num_key_value_heads && head_dim == o.head_dim &&
         rope_theta == o.rope_theta && partial_rotary_factor == o.partial_rotary_factor &&
         linear_num_key_heads == o.linear_num_key_heads &&
         linear_num_value_heads == o.linear_num_value_heads &&
         linear_key_head_dim == o.linear_key_head_dim &&
         linear_value_head_dim == o.linear_value_head_dim &&
         linear_conv_kernel_dim == o.linear_conv_kernel_dim && rms_norm_eps == o.rms_norm_eps &&
         tie_word_embeddings == o.tie_word_embeddings &&
         max_position_embeddings == o.max_position_embeddings && eos_token_ids == o.eos_token_ids;
}

bool IsQwen35Config(const nlohmann::json& json) {
  if (!json.is_object()) return false;
  auto type = json.find("model_type");
  if (type != json.end() && type->is_string() && (*type == "qwen3_5" || *type == "qwen3_5_text")) {
    return true;
  }
  auto architectures = json.find("architectures");
  if (architectures != json.end() && architectures->is_array()) {
    for (const nlohmann::json& a : *architectures) {
      // Qwen3_5ForConditionalGeneration, Qwen3_5ForCausalLM; not the MoE
      // family (Qwen3_5MoeFor...), whose layers differ.
      if (a.is_string() && absl::StartsWith(a.get<std::string>(), "Qwen3_5For")) return true;
    }
  }
  return false;
}

absl::StatusOr<Qwen35Config> Qwen35ConfigFromJson(const nlohmann::json& json) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError("config.json: not a JSON object");
  }
  const Fields top(json, "");
  LINSERVE_RETURN_IF_ERROR(top.StringIn("model_type", {"qwen3_5", "qwen3_5_text"}));
  const nlohmann::json* text = top.Find("text_config");
  if (text != nullptr && !text->is_object()) {
    return top.Error("text_config", "is not a JSON object");
  }
  const Fields f = text != nullptr ? Fields(*text, "text_config.") : Fields(json, "");
  if (text != nullptr) LINSERVE_RETURN_IF_ERROR(f.StringIn("model_type", {"qwen3_5_text"}));

  Qwen35Config c;
  LINSERVE_ASSIGN_OR_RETURN(c.hidden_size, f.Size("hidden_size", kMaxWidth));
  LINSERVE_ASSIGN_OR_RETURN(c.intermediate_size, f.Size("intermediate_size", kMaxWidth));
  LINSERVE_ASSIGN_OR_RETURN(c.vocab_size, f.Size("vocab_size", kMaxVocab));
  LINSERVE_ASSIGN_OR_RETURN(c.num_hidden_layers, f.Size("num_hidden_layers", kMaxLayers));
  LINSERVE_ASSIGN_OR_RETURN(c.num_attention_heads, f.Size("num_attention_heads", kMaxHeads));
  LINSERVE_ASSIGN_OR_RETURN(c.num_key_value_heads, f.Size("num_key_value_heads", kMaxHeads));
  LINSERVE_ASSIGN_OR_RETURN(c.head_dim, f.Size("head_dim", kMaxHeadDim));
  LINSERVE_ASSIGN_OR_RETURN(c.linear_num_key_heads, f.Size("linear_num_key_heads", kMaxHeads));
  LINSERVE_ASSIGN_OR_RETURN(c.linear_num_value_heads, f.Size("linear_num_value_heads", kMaxHeads));
  LINSERVE_ASSIGN_OR_RETURN(c.linear_key_head_dim, f.Size("linear_key_head_dim", kMaxHeadDim));
  LINSERVE_ASSIGN_OR_RETURN(c.linear_value_head_dim, f.Size("linear_value_head_dim", kMaxHeadDim));
  LINSERVE_ASSIGN_OR_RETURN(c.linear_conv_kernel_dim,
                            f.SizeOr("linear_conv_kernel_dim", 4, kMaxConvKernel));
  LINSERVE_ASSIGN_OR_RETURN(c.max_position_embeddings,
                            f.SizeOr("max_position_embeddings", 262144, kMaxPositions));
  LINSERVE_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.BoolOr("tie_word_embeddings", false));
  // transformers reads the wrapper's tie_word_embeddings, not text_config's;
  // the real files carry it at both levels. The wrapper's wins.
  if (text != nullptr) {
    LINSERVE_ASSIGN_OR_RETURN(c.tie_word_embeddings,
                              top.BoolOr("tie_word_embeddings", c.tie_word_embeddings));
  }
  if (const nlohmann::json* eps = f.Find("rms_norm_eps")) {
    LINSERVE_ASSIGN_OR_RETURN(c.rms_norm_eps, f.Positive(*eps, "rms_norm_eps", 1.0));
  }

  // What this implementation computes; anything else is refused by name.
  LINSERVE_RETURN_IF_ERROR(f.StringIn("hidden_act", {"silu"}));
  LINSERVE_ASSIGN_OR_RETURN(const bool bias, f.BoolOr("attention_bias", false));
  if (bias) return f.Error("attention_bias", "(true) is not supported");
  LINSERVE_ASSIGN_OR_RETURN(const bool gate, f.BoolOr("attn_output_gate", true));
  if (!gate) return f.Error("attn_output_gate", "(false) is not supported");
  if (const nlohmann::json* mlp_only = f.Find("mlp_only_layers")) {
    if (!mlp_only->is_array() || !mlp_only->empty()) {
      return f.Error("mlp_only_layers",
                     absl::StrCat("(", mlp_only->dump(), ") is not supported (expected [])"));
    }
  }
  for (const char* moe : {"num_experts", "num_experts_per_tok"}) {
    if (const nlohmann::json* v = f.Find(moe); v != nullptr && !(v->is_number() && *v == 0)) {
      return f.Error(moe,
                     absl::StrCat("(", v->dump(), ") is not supported (a mixture of experts)"));
    }
  }

  // rope_parameters {rope_type, rope_theta, partial_rotary_factor, mrope_*};
  // older files carry rope_theta and partial_rotary_factor flat.
  const nlohmann::json* rope = f.Find("rope_parameters");
  if (rope != nullptr && !rope->is_object()) {
    return f.Error("rope_parameters", "is not a JSON object");
  }
  const Fields rope_fields =
      rope != nullptr ? Fields(*rope, f.Name("rope_parameters.")) : Fields(f.json(), f.Name(""));
  if (rope != nullptr) {
    LINSERVE_RETURN_IF_ERROR(rope_fields.StringIn("rope_type", {"default"}));
  }
  if (const nlohmann::json* v = f.Find("rope_scaling")) {
    if (!(v->is_object() && v->value("rope_type", v->value("type", "default")) == "default")) {
      return f.Error("rope_scaling", absl::StrCat("(", v->dump(), ") is not supported"));
    }
  }
  for (const Fields* where : {&f, &rope_fields}) {
    if (const nlohmann::json* theta = where->Find("rope_theta")) {
      LINSERVE_ASSIGN_OR_RETURN(c.rope_theta, where->Positive(*theta, "rope_theta", 1e12));
    }
    if (const nlohmann::json* factor = where->Find("partial_rotary_factor")) {
      LINSERVE_ASSIGN_OR_RETURN(c.partial_rotary_factor,
                                where->Positive(*factor, "partial_rotary_factor", 1.0));
    }
  }
  const int64_t rotary = c.rotary_dim();
  if (rotary < 2 || rotary % 2 != 0) {
    return rope_fields.Error(
        "partial_rotary_factor",
        absl::StrCat("(", c.partial_rotary_factor, ") times head_dim (", c.head_dim, ") gives ",
                     rotary, " rotary dimensions, not a positive even number"));
  }

  // Heads that divide, widths inside the bounds.
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return f.Error("num_attention_heads",
                   absl::StrCat("(", c.num_attention_heads, ") is not a multiple of ",
                                "num_key_value_heads (", c.num_key_value_heads, ")"));
  }
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0) {
    return f.Error("linear_num_value_heads",
                   absl::StrCat("(", c.linear_num_value_heads, ") is not a multiple of ",
                                "linear_num_key_heads (", c.linear_num_key_heads, ")"));
  }
  const std::pair<const char*, int64_t> widths[] = {
      {"num_attention_heads", 2 * c.num_attention_heads * c.head_dim},
      {"num_key_value_heads", c.num_key_value_heads * c.head_dim},
      {"linear_num_key_heads", c.key_dim()},
      {"linear_num_value_heads", c.value_dim()}};
  for (const auto& [key, width] : widths) {
    if (width > kMaxWidth) {
      return f.Error(key, absl::StrCat("gives a projection of ", width, " rows, over ", kMaxWidth));
    }
  }

  // layer_types, or the pattern full_attention_interval makes.
  if (const nlohmann::json* types = f.Find("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c.num_hidden_layers) {
      return f.Error("layer_types", absl::StrCat("is not a list of num_hidden_layers (",
                                                 c.num_hidden_layers, ") layer types"));
    }
    for (size_t i = 0; i < types->size(); ++i) {
      const nlohmann::json& t = (*types)[i];
      const std::string name = absl::StrCat("layer_types[", i, "]");
      if (t == "linear_attention") {
        c.layer_types.push_back(Qwen35LayerKind::kLinearAttention);
      } else if (t == "full_attention") {
        c.layer_types.push_back(Qwen35LayerKind::kFullAttention);
      } else {
        return f.Error(name, absl::StrCat("(", t.dump(), ") is not a known layer type ",
                                          "(linear_attention or full_attention)"));
      }
    }
  } else {
    LINSERVE_ASSIGN_OR_RETURN(const int64_t interval,
                              f.SizeOr("full_attention_interval", 4, kMaxLayers));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      c.layer_types.push_back((i + 1) % interval == 0 ? Qwen35LayerKind::kFullAttention
                                                      : Qwen35LayerKind::kLinearAttention);
    }
  }

  LINSERVE_RETURN_IF_ERROR(AddEosIds(f, "eos_token_id", c.vocab_size, &c.eos_token_ids));
  if (text != nullptr) {
    LINSERVE_RETURN_IF_ERROR(AddEosIds(top, "eos_token_id", c.vocab_size, &c.eos_token_ids));
  }
  return c;
}

nlohmann::json Qwen35ConfigToJson(const Qwen35Config& c) {
  nlohmann::json types = nlohmann::json::array();
  for (Qwen35LayerKind kind : c.layer_types) types.push_back(Qwen35LayerKindName(kind));
  return {{"model_type", "qwen3_5_text"},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.intermediate_size},
          {"vocab_size", c.vocab_size},
          {"num_hidden_layers", c.num_hidden_layers},
          {"layer_types", types},
          {"num_attention_heads", c.num_attention_heads},
          {"num_key_value_heads", c.num_key_value_heads},
          {"head_dim", c.head_dim},
          {"rope_parameters",
           {{"rope_type", "default"},
            {"rope_theta", c.rope_theta},
            {"partial_rotary_factor", c.partial_rotary_factor}}},
          {"linear_num_key_heads", c.linear_num_key_heads},
          {"linear_num_value_heads", c.linear_num_value_heads},
          {"linear_key_head_dim", c.linear_key_head_dim},
          {"linear_value_head_dim", c.linear_value_head_dim},
          {"linear_conv_kernel_dim", c.linear_conv_kernel_dim},
          {"rms_norm_eps", c.rms_norm_eps},
          {"tie_word_embeddings", c.tie_word_embeddings},
          {"max_position_embeddings", c.max_position_embeddings},
          {"eos_token_id", c.eos_token_ids}};
}

absl::StatusOr<Qwen35Config> Qwen35ShapeByName(const std::string& name) {
  Qwen35Config c;
  c.rope_theta = 1e7;
  c.partial_rotary_factor = 0.25;
  c.linear_conv_kernel_dim = 4;
  c.rms_norm_eps = 1e-6;
  c.max_position_embeddings = 262144;
  c.tie_word_embeddings = true;
  int64_t interval = 4;
  if (name == "tiny") {
    // Value heads grouped over key heads (Hv = 2 Hk), as in the 4B and up.
    c.hidden_size = 64;
    c.intermediate_size = 128;
    c.vocab_size = 512;
    c.num_hidden_layers = 4;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 32;
    c.linear_num_key_heads = 2;
    c.linear_num_value_heads = 4;
    c.linear_key_head_dim = 16;
    c.linear_value_head_dim = 16;
    c.max_position_embeddings = 4096;
    c.eos_token_ids = {kQwen35TinyEndOfTextId};
  } else if (name == "0.8b" || name == "2b" || name == "4b") {
    c.vocab_size = 248320;
    c.head_dim = 256;
    c.linear_num_key_heads = 16;
    c.linear_key_head_dim = 128;
    c.linear_value_head_dim = 128;
    c.eos_token_ids = {kQwen35EndOfTextId};
    if (name == "4b") {
      c.hidden_size = 2560;
      c.intermediate_size = 9216;
      c.num_hidden_layers = 32;
      c.num_attention_heads = 16;
      c.num_key_value_heads = 4;
      c.linear_num_value_heads = 32;
    } else {
      c.hidden_size = name == "0.8b" ? 1024 : 2048;
      c.intermediate_size = name == "0.8b" ? 3584 : 6144;
      c.num_hidden_layers = 24;
      c.num_attention_heads = 8;
      c.num_key_value_heads = 2;
      c.linear_num_value_heads = 16;
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown Qwen3.5 shape '", name, "' (tiny, 0.8b, 2b or 4b)"));
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    c.layer_types.push_back((i + 1) % interval == 0 ? Qwen35LayerKind::kFullAttention
                                                    : Qwen35LayerKind::kLinearAttention);
  }
  return c;
}

std::map<std::string, std::vector<int64_t>> Qwen35TensorShapes(const Qwen35Config& c) {
  const int64_t H = c.hidden_size;
  const int64_t I = c.intermediate_size;
  std::map<std::string, std::vector<int64_t>> shapes = {{"embed_tokens.weight", {c.vocab_size, H}},
                                                        {"norm.weight", {H}}};
  if (!c.tie_word_embeddings) shapes["lm_head.weight"] = {c.vocab_size, H};
  for (int64_t i = 0; i < static_cast<int64_t>(c.layer_types.size()); ++i) {
    const std::string b = absl::StrCat("layers.", i, ".");
    shapes[b + "input_layernorm.weight"] = {H};
    shapes[b + "post_attention_layernorm.weight"] = {H};
    shapes[b + "mlp.gate_proj.weight"] = {I, H};
    shapes[b + "mlp.up_proj.weight"] = {I, H};
    shapes[b + "mlp.down_proj.weight"] = {H, I};
    if (c.layer_types[i] == Qwen35LayerKind::kLinearAttention) {
      const int64_t Hv = c.linear_num_value_heads;
      shapes[b + "linear_attn.in_proj_qkv.weight"] = {c.conv_dim(), H};
      shapes[b + "linear_attn.in_proj_z.weight"] = {c.value_dim(), H};
      shapes[b + "linear_attn.in_proj_b.weight"] = {Hv, H};
      shapes[b + "linear_attn.in_proj_a.weight"] = {Hv, H};
      shapes[b + "linear_attn.conv1d.weight"] = {c.conv_dim(), 1, c.linear_conv_kernel_dim};
      shapes[b + "linear_attn.dt_bias"] = {Hv};
      shapes[b + "linear_attn.A_log"] = {Hv};
      shapes[b + "linear_attn.norm.weight"] = {c.linear_value_head_dim};
      shapes[b + "linear_attn.out_proj.weight"] = {H, c.value_dim()};
    } else {
      const int64_t D = c.head_dim;
      shapes[b + "self_attn.q_proj.weight"] = {2 * c.num_attention_heads * D, H};
      shapes[b + "self_attn.k_proj.weight"] = {c.num_key_value_heads * D, H};
      shapes[b + "self_attn.v_proj.weight"] = {c.num_key_value_heads * D, H};
      shapes[b + "self_attn.o_proj.weight"] = {H, c.num_attention_heads * D};
      shapes[b + "self_attn.q_norm.weight"] = {D};
      shapes[b + "self_attn.k_norm.weight"] = {D};
    }
  }
  return shapes;
}

}  // namespace linserve

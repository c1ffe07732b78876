#include "engine/rwkv7/rwkv7_config.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"

namespace linserve {
namespace {

// How a file stores one canonical tensor.
enum class Stored {
  kAsIs,        // same shape
  kVector,      // (n) or (1, 1, n)
  kTransposed,  // fla-hub low-rank matrices: nn.Linear's (out, in)
};

struct Source {
  std::string name;  // as the file names it
  Stored stored;
};

constexpr int kMaxReported = 5;

std::string ShapeString(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

bool IsFla(const TensorMap& tensors) {
  for (const auto& [name, tensor] : tensors) {
    if (absl::StartsWith(name, "model.") || name == "lm_head.weight") return true;
  }
  return false;
}

// "blocks.3.att.w1" -> ("blocks.3.", "att.w1"); empty prefix outside blocks.
std::pair<std::string, std::string> SplitBlock(const std::string& name, int64_t* layer) {
  std::vector<std::string> parts = absl::StrSplit(name, absl::MaxSplits('.', 2));
  if (parts.size() == 3 && parts[0] == "blocks" && absl::SimpleAtoi(parts[1], layer)) {
    return {absl::StrCat("blocks.", parts[1], "."), parts[2]};
  }
  return {"", name};
}

// The fla-hub name of a canonical tensor (README of the fixtures).
Source FlaSource(const std::string& canonical) {
  static const std::map<std::string, std::string> kTop = {{"emb.weight", "model.embeddings.weight"},
                                                          {"head.weight", "lm_head.weight"},
                                                          {"ln_out.weight", "model.norm.weight"},
                                                          {"ln_out.bias", "model.norm.bias"}};
  if (auto it = kTop.find(canonical); it != kTop.end()) return {it->second, Stored::kAsIs};
  int64_t layer = 0;
  auto [prefix, rest] = SplitBlock(canonical, &layer);
  const std::string block = absl::StrCat("model.layers.", layer, ".");
  static const std::map<std::string, std::string> kRenamed = {
      {"ln0", "pre_norm"},          {"ln1", "attn_norm"},         {"ln2", "ffn_norm"},
      {"att.receptance", "attn.r_proj"}, {"att.key", "attn.k_proj"}, {"att.value", "attn.v_proj"},
      {"att.output", "attn.o_proj"}, {"att.ln_x", "attn.g_norm"}};
  for (const auto& [from, to] : kRenamed) {
    if (absl::StartsWith(rest, from + ".")) {
      return {absl::StrCat(block, to, rest.substr(from.size())), Stored::kAsIs};
    }
  }
  if (absl::StartsWith(rest, "att.") && rest.size() == 6 && std::string("wavg").find(rest[4]) !=
                                                              std::string::npos) {
    const std::string lora = absl::StrCat(block, "attn.", std::string(1, rest[4]), "_lora.lora.");
    switch (rest[5]) {
      case '0': return {lora + "2.bias", Stored::kVector};
      case '1': return {lora + "0.weight", Stored::kTransposed};
      case '2': return {lora + "2.weight", Stored::kTransposed};
    }
  }
  if (absl::StartsWith(rest, "att.")) return {block + "attn." + rest.substr(4), Stored::kAsIs};
  return {block + rest, Stored::kAsIs};
}

Source SourceOf(const std::string& canonical, const std::vector<int64_t>& shape, bool fla) {
  Source source = fla ? FlaSource(canonical) : Source{canonical, Stored::kAsIs};
  if (shape.size() == 1) source.stored = Stored::kVector;
  return source;
}

// Unused v-first parameters some files carry in block 0.
bool IsIgnored(const std::string& name) {
  static const std::set<std::string> kIgnored = {
      "blocks.0.att.v0", "blocks.0.att.v1", "blocks.0.att.v2",
      "model.layers.0.attn.v_lora.lora.0.weight", "model.layers.0.attn.v_lora.lora.2.weight",
      "model.layers.0.attn.v_lora.lora.2.bias"};
  return kIgnored.count(name) > 0;
}

absl::StatusOr<at::Tensor> Find(const TensorMap& tensors, const std::string& name, int64_t rank) {
  auto it = tensors.find(name);
  if (it == tensors.end()) return absl::InvalidArgumentError(absl::StrCat(
      "rwkv7: missing tensor '", name, "'"));
  at::Tensor t = it->second;
  if (rank == 1 && t.dim() == 3 && t.size(0) == 1 && t.size(1) == 1) t = t.reshape({t.size(2)});
  if (t.dim() != rank) {
    return absl::InvalidArgumentError(absl::StrCat("rwkv7: tensor '", name, "' has shape ",
                                                   ShapeString(it->second.sizes()), ", expected ",
                                                   rank, " dimensions"));
  }
  return t;
}

absl::StatusOr<Rwkv7Config> InferConfig(const TensorMap& tensors, bool fla) {
  auto name = [fla](const std::string& canonical) {
    return fla ? FlaSource(canonical).name : canonical;
  };
  // A low-rank size: the second dimension of z1 (C, Dz), stored transposed by fla-hub.
  auto lora = [&](const std::string& canonical) -> absl::StatusOr<int64_t> {
    auto t = Find(tensors, name(canonical), 2);
    if (!t.ok()) return t.status();
    return fla ? t->size(0) : t->size(1);
  };
  Rwkv7Config c;
  for (const auto& [key, tensor] : tensors) {
    int64_t layer = -1;
    std::vector<std::string> parts = absl::StrSplit(key, '.');
    const bool in_block = fla ? parts.size() > 3 && parts[0] == "model" && parts[1] == "layers" &&
                                    absl::SimpleAtoi(parts[2], &layer)
                              : parts.size() > 2 && parts[0] == "blocks" &&
                                    absl::SimpleAtoi(parts[1], &layer);
    if (in_block && layer >= 0 && layer < (1 << 20)) c.n_layers = std::max(c.n_layers, layer + 1);
  }
  if (c.n_layers == 0) {
    return absl::InvalidArgumentError(absl::StrCat("rwkv7: no tensors of blocks (expected '",
                                                   name("blocks.0.ln1.weight"), "' and the like)"));
  }
  auto emb = Find(tensors, name("emb.weight"), 2);
  if (!emb.ok()) return emb.status();
  c.vocab_size = emb->size(0);
  c.d_model = emb->size(1);
  auto r_k = Find(tensors, name("blocks.0.att.r_k"), 2);
  if (!r_k.ok()) return r_k.status();
  c.n_heads = r_k->size(0);
  c.head_size = r_k->size(1);
  if (c.n_heads * c.head_size != c.d_model) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rwkv7: tensor '", name("blocks.0.att.r_k"), "' has shape ", ShapeString(r_k->sizes()),
        ": heads x head size must equal the width ", c.d_model));
  }
  auto w = lora("blocks.0.att.w1");
  if (!w.ok()) return w.status();
  auto a = lora("blocks.0.att.a1");
  if (!a.ok()) return a.status();
  auto g = lora("blocks.0.att.g1");
  if (!g.ok()) return g.status();
  c.w_lora = *w;
  c.a_lora = *a;
  c.g_lora = *g;
  if (c.n_layers > 1) {
    auto v = lora("blocks.1.att.v1");
    if (!v.ok()) return v.status();
    c.v_lora = *v;
  }
  auto key = Find(tensors, name("blocks.0.ffn.key.weight"), 2);
  if (!key.ok()) return key.status();
  c.ffn_size = key->size(0);
  c.pre_norm = tensors.count(name("blocks.0.ln0.weight")) > 0;
  return c;
}

}  // namespace

bool Rwkv7Config::operator==(const Rwkv7Config& o) const {
  return n_layers == o.n_layers && d_model == o.d_model && n_heads == o.n_heads &&
         head_size == o.head_size && w_lora == o.w_lora && a_lora == o.a_lora &&
         v_lora == o.v_lora && g_lora == o.g_lora && ffn_size == o.ffn_size &&
         vocab_size == o.vocab_size && pre_norm == o.pre_norm;
}

nlohmann::json Rwkv7ConfigToJson(const Rwkv7Config& c) {
  return {{"n_layers", c.n_layers}, {"d_model", c.d_model},     {"n_heads", c.n_heads},
          {"head_size", c.head_size}, {"w_lora", c.w_lora},     {"a_lora", c.a_lora},
          {"v_lora", c.v_lora},     {"g_lora", c.g_lora},       {"ffn_size", c.ffn_size},
          {"vocab_size", c.vocab_size}, {"pre_norm", c.pre_norm}};
}

Rwkv7Config Rwkv7Config01B() {
  Rwkv7Config c;
  c.n_layers = 12;
  c.d_model = 768;
  c.n_heads = 12;
  c.head_size = 64;
  c.w_lora = 64;
  c.a_lora = 64;
  c.v_lora = 32;
  c.g_lora = 128;
  c.ffn_size = 3072;
  c.vocab_size = 65536;
  return c;
}

std::map<std::string, std::vector<int64_t>> Rwkv7TensorShapes(const Rwkv7Config& c) {
  const int64_t C = c.d_model;
  std::map<std::string, std::vector<int64_t>> shapes = {{"emb.weight", {c.vocab_size, C}},
                                                        {"head.weight", {c.vocab_size, C}},
                                                        {"ln_out.weight", {C}},
                                                        {"ln_out.bias", {C}}};
  if (c.pre_norm) {
    shapes["blocks.0.ln0.weight"] = {C};
    shapes["blocks.0.ln0.bias"] = {C};
  }
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = absl::StrCat("blocks.", i, ".");
    for (const char* v : {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "att.x_r", "att.x_w",
                          "att.x_k", "att.x_v", "att.x_a", "att.x_g", "att.k_k", "att.k_a",
                          "att.w0", "att.a0", "att.ln_x.weight", "att.ln_x.bias", "ffn.x_k"}) {
      shapes[b + v] = {C};
    }
    for (const char* m : {"receptance", "key", "value", "output"}) {
      shapes[absl::StrCat(b, "att.", m, ".weight")] = {C, C};
    }
    shapes[b + "att.r_k"] = {c.n_heads, c.head_size};
    shapes[b + "att.w1"] = {C, c.w_lora};
    shapes[b + "att.w2"] = {c.w_lora, C};
    shapes[b + "att.a1"] = {C, c.a_lora};
    shapes[b + "att.a2"] = {c.a_lora, C};
    shapes[b + "att.g1"] = {C, c.g_lora};
    shapes[b + "att.g2"] = {c.g_lora, C};
    if (i > 0) {
      shapes[b + "att.v0"] = {C};
      shapes[b + "att.v1"] = {C, c.v_lora};
      shapes[b + "att.v2"] = {c.v_lora, C};
    }
    shapes[b + "ffn.key.weight"] = {c.ffn_size, C};
    shapes[b + "ffn.value.weight"] = {C, c.ffn_size};
  }
  return shapes;
}

absl::StatusOr<Rwkv7Checkpoint> ReadRwkv7Checkpoint(const TensorMap& tensors) {
  const bool fla = IsFla(tensors);
  auto config = InferConfig(tensors, fla);
  if (!config.ok()) return config.status();

  Rwkv7Checkpoint out;
  out.config = *config;
  std::vector<std::string> errors;
  std::set<std::string> used;
  for (const auto& [canonical, shape] : Rwkv7TensorShapes(*config)) {
    const Source source = SourceOf(canonical, shape, fla);
    used.insert(source.name);
    std::vector<int64_t> expected = shape;
    if (source.stored == Stored::kTransposed) std::swap(expected[0], expected[1]);
    auto it = tensors.find(source.name);
    if (it == tensors.end()) {
      errors.push_back(absl::StrCat("missing tensor '", source.name, "' (expected shape ",
                                    ShapeString(expected), ")"));
      continue;
    }
    at::Tensor t = it->second;
    const at::ScalarType dtype = t.scalar_type();
    if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
      errors.push_back(absl::StrCat("tensor '", source.name, "' has dtype ",
                                    c10::toString(dtype),
                                    ", expected float32, bfloat16 or float16"));
      continue;
    }
    const bool vector_ok = source.stored == Stored::kVector && t.dim() == 3 && t.size(0) == 1 &&
                           t.size(1) == 1 && t.size(2) == expected[0];
    if (t.sizes() != at::IntArrayRef(expected) && !vector_ok) {
      errors.push_back(absl::StrCat(
          "tensor '", source.name, "' has shape ", ShapeString(t.sizes()), ", expected ",
          ShapeString(expected),
          source.stored == Stored::kVector ? absl::StrCat(" or [1, 1, ", expected[0], "]") : ""));
      continue;
    }
    if (source.stored == Stored::kVector) t = t.reshape({expected[0]});
    if (source.stored == Stored::kTransposed) t = t.t().contiguous();
    out.weights.emplace(canonical, t);
  }
  for (const auto& [name, tensor] : tensors) {
    if (!used.count(name) && !IsIgnored(name)) {
      errors.push_back(absl::StrCat("unexpected tensor '", name, "' ", ShapeString(tensor.sizes())));
    }
  }
  if (!errors.empty()) {
    const size_t shown = std::min<size_t>(errors.size(), kMaxReported);
    std::string message = absl::StrCat(
        "rwkv7: ", absl::StrJoin(errors.begin(), errors.begin() + shown, "; "));
    if (errors.size() > shown) absl::StrAppend(&message, "; and ", errors.size() - shown, " more");
    return absl::InvalidArgumentError(message);
  }
  return out;
}

namespace {

// Calls visit(name, tensor) for every canonical tensor of `c`, in
// Rwkv7TensorShapes' order, each drawn as RandomRwkv7Weights describes
// (float32), so that only one tensor is alive at a time.
template <typename Visit>
void ForEachRandomRwkv7Tensor(const Rwkv7Config& c, uint64_t seed, Visit&& visit) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  auto normal = [&](const std::vector<int64_t>& shape, double std) {
    return torch::randn(shape, gen, torch::kFloat32) * std;
  };
  auto uniform = [&](const std::vector<int64_t>& shape, double lo, double hi) {
    return torch::rand(shape, gen, torch::kFloat32) * (hi - lo) + lo;
  };
  const double inv_c = 1.0 / std::sqrt(static_cast<double>(c.d_model));
  for (const auto& [name, shape] : Rwkv7TensorShapes(c)) {
    const std::string leaf = name.substr(name.rfind('.') + 1);
    const double inv_in = 1.0 / std::sqrt(static_cast<double>(shape.back()));
    torch::Tensor t;
    if (name == "emb.weight") {
      t = normal(shape, 1.0);
    } else if (name == "head.weight") {
      t = normal(shape, inv_c);
    } else if (leaf == "weight" && shape.size() == 1) {  // norm gains
      t = uniform(shape, 0.7, 1.3);
    } else if (leaf == "bias") {
      t = normal(shape, 0.1);
    } else if (absl::StartsWith(leaf, "x_") || leaf == "k_a") {  // mixes and rates in [0, 1]
      t = uniform(shape, 0.0, 1.0);
    } else if (leaf == "k_k") {
      t = uniform(shape, 0.5, 1.5);
    } else if (leaf == "r_k") {
      t = normal(shape, 0.3);
    } else if (leaf == "w0" || leaf == "a0" || leaf == "v0") {  // spread decays and rates
      t = uniform(shape, -3.0, 3.0);
    } else if (leaf == "w1" || leaf == "a1" || leaf == "v1" || leaf == "g1") {  // (C, D)
      t = normal(shape, inv_c);
    } else if (leaf == "w2" || leaf == "a2" || leaf == "v2" || leaf == "g2") {  // (D, C)
      t = normal(shape, 1.0 / std::sqrt(static_cast<double>(shape[0])));
    } else if (absl::EndsWith(name, "att.output.weight") ||
               absl::EndsWith(name, "ffn.value.weight")) {
      // Writes into the residual stream: small, so depth does not blow it up.
      t = normal(shape, 0.5 * inv_in);
    } else {  // receptance key value (time mixing), key (channel mixing): W x of order one
      t = normal(shape, inv_in);
    }
    visit(name, std::move(t));
  }
}

}  // namespace

TensorMap RandomRwkv7Weights(const Rwkv7Config& c, uint64_t seed) {
  TensorMap weights;
  ForEachRandomRwkv7Tensor(c, seed, [&](const std::string& name, torch::Tensor t) {
    weights.emplace(name, std::move(t));
  });
  return weights;
}

void FillRandomRwkv7Weights(const Rwkv7Config& c, uint64_t seed, const TensorMap& into) {
  torch::NoGradGuard no_grad;
  size_t filled = 0;
  ForEachRandomRwkv7Tensor(c, seed, [&](const std::string& name, const torch::Tensor& t) {
    ++filled;
    auto it = into.find(name);
    TORCH_CHECK(it != into.end(), "FillRandomRwkv7Weights: no tensor '", name, "'");
    TORCH_CHECK(it->second.sizes() == t.sizes(), "FillRandomRwkv7Weights: '", name, "' has shape ",
                it->second.sizes(), ", expected ", t.sizes());
    it->second.copy_(t);
  });
  TORCH_CHECK(filled == into.size(), "FillRandomRwkv7Weights: ", into.size(), " tensors for ",
              filled, " weights");
}

}  // namespace linserve

#include "engine/qwen35/qwen35.h"

#include <algorithm>
#include <string>

#include <torch/types.h>
#include <torch/utils.h>

#include "absl/strings/str_cat.h"
#include "engine/cpu/huge_page_tensor.h"
#include "engine/qwen35/qwen35_cpu.h"

namespace linserve {
namespace {

// Rows (sessions x tokens) per layer in one pass of the prefill: bounds the
// activations ((rows, I) floats in the MLP) whatever the prompt's length.
constexpr int64_t kPrefillRowsPerPass = 2048;

torch::Tensor Float(const torch::Tensor& t) { return t.to(torch::kFloat32).contiguous(); }

GatedDeltaNetDims GdnDims(const Qwen35Config& c) {
  return {c.linear_num_key_heads, c.linear_num_value_heads, c.linear_key_head_dim,
          c.linear_value_head_dim, c.linear_conv_kernel_dim, c.rms_norm_eps};
}

GatedAttentionDims AttentionDims(const Qwen35Config& c) {
  return {c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rotary_dim(),
          c.rope_theta, c.rms_norm_eps};
}

bool IsFull(const Qwen35Config& c, int64_t layer) {
  return c.layer_types[layer] == Qwen35LayerKind::kFullAttention;
}

}  // namespace

std::vector<std::vector<StateTensorSpec>> Qwen35StateSpecs(const Qwen35Config& c,
                                                           torch::ScalarType kv_dtype) {
  std::vector<std::vector<StateTensorSpec>> layers;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (IsFull(c, i)) {
      layers.push_back({{kQwen35Keys, {c.num_key_value_heads, -1, c.head_dim}, kv_dtype},
                        {kQwen35Values, {c.num_key_value_heads, -1, c.head_dim}, kv_dtype}});
    } else {
      layers.push_back({{kQwen35Conv, {c.linear_conv_kernel_dim - 1, c.conv_dim()},
                         torch::kFloat32},
                        {kQwen35Recurrent,
                         {c.linear_num_value_heads, c.linear_value_head_dim,
                          c.linear_key_head_dim},
                         torch::kFloat32}});
    }
  }
  return layers;
}

Qwen35VectorImpl::Qwen35VectorImpl(std::vector<int64_t> shape) {
  weight = register_parameter("weight", torch::zeros(shape), /*requires_grad=*/false);
}

Qwen35GatedDeltaNetImpl::Qwen35GatedDeltaNetImpl(const Qwen35Config& c, torch::ScalarType dtype)
    : config_(c) {
  const int64_t H = c.hidden_size, Hv = c.linear_num_value_heads;
  in_proj_qkv = register_module("in_proj_qkv", WeightMatrix(H, c.conv_dim(), dtype));
  in_proj_z = register_module("in_proj_z", WeightMatrix(H, c.value_dim(), dtype));
  in_proj_b = register_module("in_proj_b", WeightMatrix(H, Hv, dtype));
  in_proj_a = register_module("in_proj_a", WeightMatrix(H, Hv, dtype));
  conv1d = register_module(
      "conv1d", Qwen35Vector(std::vector<int64_t>{c.conv_dim(), 1, c.linear_conv_kernel_dim}));
  dt_bias = register_parameter("dt_bias", torch::zeros({Hv}), /*requires_grad=*/false);
  A_log = register_parameter("A_log", torch::zeros({Hv}), /*requires_grad=*/false);
  norm = register_module("norm", Qwen35Vector(std::vector<int64_t>{c.linear_value_head_dim}));
  out_proj = register_module("out_proj", WeightMatrix(c.value_dim(), H, dtype));
}

torch::Tensor Qwen35GatedDeltaNetImpl::forward(const torch::Tensor& xn, LayerState& state,
                                               int64_t T) {
  const torch::Tensor qkv = Float(in_proj_qkv(xn));  // (N, conv_dim)
  const torch::Tensor z = Float(in_proj_z(xn));      // (N, value_dim)
  const torch::Tensor b = Float(in_proj_b(xn));      // (N, Hv)
  const torch::Tensor a = Float(in_proj_a(xn));      // (N, Hv)
  const torch::Tensor conv = conv1d->weight.view({config_.conv_dim(), -1});  // (C, K)
  const torch::Tensor o = GatedDeltaNetCpu(qkv, z, b, a, conv, A_log, dt_bias, norm->weight,
                                           state[0], state[1], T, GdnDims(config_));
  return out_proj(o);  // (N, H)
}

Qwen35AttentionImpl::Qwen35AttentionImpl(const Qwen35Config& c, torch::ScalarType dtype)
    : config_(c) {
  const int64_t H = c.hidden_size, D = c.head_dim;
  q_proj = register_module("q_proj", WeightMatrix(H, 2 * c.num_attention_heads * D, dtype));
  k_proj = register_module("k_proj", WeightMatrix(H, c.num_key_value_heads * D, dtype));
  v_proj = register_module("v_proj", WeightMatrix(H, c.num_key_value_heads * D, dtype));
  o_proj = register_module("o_proj", WeightMatrix(c.num_attention_heads * D, H, dtype));
  q_norm = register_module("q_norm", Qwen35Vector(std::vector<int64_t>{D}));
  k_norm = register_module("k_norm", Qwen35Vector(std::vector<int64_t>{D}));
}

torch::Tensor Qwen35AttentionImpl::forward(const torch::Tensor& xn, const Qwen35LayerCache& cache,
                                           const std::vector<int64_t>& positions, int64_t T) {
  const torch::Tensor qg = Float(q_proj(xn));  // (N, nH 2D)
  const torch::Tensor k = Float(k_proj(xn));   // (N, nKV D)
  const torch::Tensor v = Float(v_proj(xn));   // (N, nKV D)
  const torch::Tensor o =
      GatedAttentionCpu(qg, k, v, q_norm->weight, k_norm->weight, cache.keys, cache.values,
                        cache.block_tokens, positions, T, AttentionDims(config_));
  return o_proj(o);  // (N, H)
}

Qwen35MlpImpl::Qwen35MlpImpl(const Qwen35Config& c, torch::ScalarType dtype) {
  gate_proj = register_module("gate_proj", WeightMatrix(c.hidden_size, c.intermediate_size, dtype));
  up_proj = register_module("up_proj", WeightMatrix(c.hidden_size, c.intermediate_size, dtype));
  down_proj = register_module("down_proj", WeightMatrix(c.intermediate_size, c.hidden_size, dtype));
}

torch::Tensor Qwen35MlpImpl::forward(const torch::Tensor& x) {
  return down_proj(SiluGateCpu(Float(gate_proj(x)), Float(up_proj(x))));
}

Qwen35LayerImpl::Qwen35LayerImpl(const Qwen35Config& c, int64_t layer, torch::ScalarType dtype)
    : eps_(c.rms_norm_eps) {
  input_layernorm = register_module("input_layernorm",
                                    Qwen35Vector(std::vector<int64_t>{c.hidden_size}));
  if (IsFull(c, layer)) {
    self_attn = register_module("self_attn", Qwen35Attention(c, dtype));
  } else {
    linear_attn = register_module("linear_attn", Qwen35GatedDeltaNet(c, dtype));
  }
  post_attention_layernorm = register_module(
      "post_attention_layernorm", Qwen35Vector(std::vector<int64_t>{c.hidden_size}));
  mlp = register_module("mlp", Qwen35Mlp(c, dtype));
}

torch::Tensor Qwen35LayerImpl::forward(const torch::Tensor& x, LayerState& state,
                                       const Qwen35LayerCache& cache,
                                       const std::vector<int64_t>& positions, int64_t T) {
  const torch::Tensor xn = Qwen35RmsNormCpu(x, input_layernorm->weight, eps_, true);
  const torch::Tensor mixed = self_attn ? self_attn(xn, cache, positions, T)
                                        : linear_attn(xn, state, T);
  const torch::Tensor h = x + Float(mixed);
  return h + Float(mlp(Qwen35RmsNormCpu(h, post_attention_layernorm->weight, eps_, true)));
}

Qwen35Impl::Qwen35Impl(const Qwen35Config& c, const Qwen35Options& options)
    : config_(c), options_(options) {
  TORCH_CHECK(options.dtype == torch::kFloat32 || options.dtype == torch::kBFloat16,
              "Qwen3.5: weights in float32 or bfloat16, not ", options.dtype);
  TORCH_CHECK(options.kv_dtype == torch::kFloat32 || options.kv_dtype == torch::kBFloat16,
              "Qwen3.5: the KV cache is float32 or bfloat16, not ", options.kv_dtype);
  TORCH_CHECK(options.kv_block_tokens > 0 && options.kv_block_tokens % 16 == 0,
              "Qwen3.5: KV blocks of ", options.kv_block_tokens,
              " positions; a positive multiple of 16 is needed");
  TORCH_CHECK(static_cast<int64_t>(c.layer_types.size()) == c.num_hidden_layers,
              "Qwen3.5: ", c.layer_types.size(), " layer types for ", c.num_hidden_layers,
              " layers");
  embed_tokens = register_module("embed_tokens", Qwen35Vector(std::vector<int64_t>{0}));
  embed_tokens->weight.set_data(torch::empty({c.vocab_size, c.hidden_size}, options.dtype));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers->push_back(Qwen35Layer(c, i, options.dtype));
  }
  norm = register_module("norm", Qwen35Vector(std::vector<int64_t>{c.hidden_size}));
  lm_head = register_module("lm_head", WeightMatrix(c.hidden_size, c.vocab_size, options.dtype));
}

std::map<std::string, WeightMatrixImpl*> Qwen35Impl::Matrices() {
  std::map<std::string, WeightMatrixImpl*> matrices;
  for (const auto& item : named_modules()) {
    if (auto* matrix = dynamic_cast<WeightMatrixImpl*>(item.value().get())) {
      matrices[item.key() + ".weight"] = matrix;
    }
  }
  return matrices;
}

std::vector<std::string> Qwen35Impl::QuantizedMatrixNames() const {
  std::vector<std::string> names;
  if (options_.quantization == WeightQuantization::kNone) return names;
  names.push_back("embed_tokens.weight");
  for (const auto& [name, matrix] : const_cast<Qwen35Impl*>(this)->Matrices()) {
    names.push_back(name);
  }
  return names;
}

std::map<std::string, QuantizedWeight> Qwen35Impl::QuantizedMatrices() const {
  std::map<std::string, QuantizedWeight> quantized;
  if (embed_quantized.defined()) quantized["embed_tokens.weight"] = embed_quantized;
  for (const auto& [name, matrix] : const_cast<Qwen35Impl*>(this)->Matrices()) {
    if (matrix->quantized.defined()) quantized[name] = matrix->quantized;
  }
  return quantized;
}

void Qwen35Impl::LoadWeights(const TensorMap& given) {
  torch::NoGradGuard no_grad;
  TensorMap weights = given;
  if (options_.quantization == WeightQuantization::kNone) {
    if (config_.tie_word_embeddings) {
      TORCH_CHECK(weights.count("embed_tokens.weight") != 0, "Qwen3.5: no 'embed_tokens.weight'");
      weights["lm_head.weight"] = weights.at("embed_tokens.weight");
    }
    LoadWeights(weights, {});
    return;
  }
  // Quantized from the file's own values, all in one buffer of huge pages;
  // a tied head takes the embedding's codes (the same matrix, so the same
  // codes) instead of a copy.
  std::vector<std::string> names;
  for (const std::string& name : QuantizedMatrixNames()) {
    if (name != "lm_head.weight" || !config_.tie_word_embeddings) names.push_back(name);
  }
  std::vector<int64_t> bytes;
  for (const std::string& name : names) {
    auto it = weights.find(name);
    TORCH_CHECK(it != weights.end() && it->second.dim() == 2, "Qwen3.5: no matrix '", name, "'");
    bytes.push_back(QuantizedArenaBytes({it->second.size(0), it->second.size(1),
                                         options_.quantization_group, options_.quantization}));
  }
  HugePageArena arena(bytes);
  std::map<std::string, QuantizedWeight> quantized;
  for (const std::string& name : names) {
    try {
      quantized[name] = QuantizeWeight(weights.at(name), options_.quantization,
                                       options_.quantization_group, &arena);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "Qwen3.5: '", name, "': ", e.what_without_backtrace());
    }
    weights.erase(name);
  }
  LoadWeights(weights, quantized);
}

void Qwen35Impl::LoadWeights(const TensorMap& plain,
                             const std::map<std::string, QuantizedWeight>& quantized) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(options_.quantization != WeightQuantization::kNone || quantized.empty(),
              "Qwen3.5: quantized matrices given to a ", c10::toString(options_.dtype), " model");
  std::map<std::string, WeightMatrixImpl*> matrices = Matrices();
  for (const std::string& name : QuantizedMatrixNames()) {
    auto it = quantized.find(name);
    if (it == quantized.end() && name == "lm_head.weight" && config_.tie_word_embeddings) {
      it = quantized.find("embed_tokens.weight");
    }
    TORCH_CHECK(it != quantized.end(), "Qwen3.5: no quantized matrix '", name, "'");
    const QuantizedShape& shape = it->second.shape;
    TORCH_CHECK(shape.kind == options_.quantization && shape.group == options_.quantization_group,
                "Qwen3.5: '", name, "' is ", WeightQuantizationName(shape.kind), " in groups of ",
                shape.group, ", the model ", WeightQuantizationName(options_.quantization),
                " in groups of ", options_.quantization_group);
    if (name == "embed_tokens.weight") {
      TORCH_CHECK(shape.out == config_.vocab_size && shape.in == config_.hidden_size,
                  "Qwen3.5: quantized '", name, "' is [", shape.out, ", ", shape.in, "]");
      embed_quantized = it->second;
      embed_tokens->weight.set_data(torch::empty({0}));
    } else {
      WeightMatrixImpl* matrix = matrices.at(name);
      TORCH_CHECK(shape.out == matrix->weight.size(0) && shape.in == matrix->weight.size(1),
                  "Qwen3.5: quantized '", name, "' is [", shape.out, ", ", shape.in, "], expected ",
                  matrix->weight.sizes());
      matrix->quantized = it->second;
      matrix->weight.set_data(torch::empty({0}));
    }
  }
  TensorMap weights = plain;
  auto params = named_parameters();
  for (auto& item : params) {
    if (item.value().numel() == 0 && weights.count(item.key()) == 0) continue;  // quantized
    auto it = weights.find(item.key());
    TORCH_CHECK(it != weights.end(), "Qwen3.5: no weight for '", item.key(), "'");
    TORCH_CHECK(it->second.sizes() == item.value().sizes(), "Qwen3.5: weight '", item.key(),
                "' has shape ", it->second.sizes(), ", expected ", item.value().sizes());
    item.value().copy_(it->second);
    weights.erase(it);
  }
  TORCH_CHECK(weights.empty(), "Qwen3.5: unexpected weight '", weights.begin()->first, "'");
}

void Qwen35Impl::PackForCpu() {
  std::vector<WeightMatrixImpl*> matrices;
  for (const auto& [name, matrix] : Matrices()) matrices.push_back(matrix);
  std::vector<int64_t> bytes;
  for (const WeightMatrixImpl* matrix : matrices) bytes.push_back(matrix->CpuBytes());
  HugePageArena arena(bytes);
  for (WeightMatrixImpl* matrix : matrices) matrix->PackForCpu(arena);
}

State Qwen35Impl::NewState(int64_t batch) const {
  State state;
  state.tables.resize(batch);
  for (const std::vector<StateTensorSpec>& specs :
       Qwen35StateSpecs(config_, options_.kv_dtype)) {
    LayerState layer;
    for (const StateTensorSpec& spec : specs) {
      if (spec.grows()) {
        layer.emplace_back();  // in the tables' blocks
        continue;
      }
      std::vector<int64_t> shape = {batch};
      shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
      layer.push_back(EmptyStateTensor(shape, torch::TensorOptions(spec.dtype)).zero_());
    }
    for (BlockTable& table : state.tables) table.layers.emplace_back(specs.size());
    state.layers.push_back(std::move(layer));
  }
  state.positions.assign(batch, 0);
  return state;
}

torch::Tensor Qwen35Impl::Forward(const torch::Tensor& tokens, State& state, bool in_place) {
  const int64_t B = tokens.size(0), T = tokens.size(1), H = config_.hidden_size;
  TORCH_CHECK(static_cast<int64_t>(state.tables.size()) == B,
              "Qwen35: a state of ", state.tables.size(), " block tables for a batch of ", B);
  const std::vector<int64_t> positions = state.positions;
  // Not in place (a prefill's first pass): the recurrent parts are new
  // tensors, the old ones left intact for a caller that holds them. The KV
  // blocks the step writes into are made each session's own either way (a
  // shared block is copied first), so a caller's copy of the old state never
  // changes.
  const int64_t bs = options_.kv_block_tokens;
  const std::vector<int64_t> block_shape = {config_.num_key_value_heads, bs, config_.head_dim};
  const torch::TensorOptions kv_options(options_.kv_dtype);
  std::vector<Qwen35LayerCache> caches(config_.num_hidden_layers);
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    if (IsFull(config_, i)) {
      Qwen35LayerCache& cache = caches[i];
      cache.block_tokens = bs;
      for (int64_t b = 0; b < B; ++b) {
        std::vector<TensorBlocks>& blocks = state.tables[b].layers[i];
        for (TensorBlocks& side : blocks) {
          WritableBlocks(side, positions[b], positions[b] + T, bs, block_shape, kv_options);
        }
        cache.keys.push_back(&blocks[0]);
        cache.values.push_back(&blocks[1]);
      }
    } else if (!in_place) {
      for (torch::Tensor& t : state.layers[i]) t = t.clone();
    }
  }
  const torch::Tensor flat = tokens.reshape({-1});
  torch::Tensor x = embed_quantized.defined()
                        ? DequantizeRows(embed_quantized, flat)
                        : embed_tokens->weight.index_select(0, flat).to(torch::kFloat32);  // (N, H)
  for (size_t i = 0; i < layers->size(); ++i) {
    x = layers->at<Qwen35LayerImpl>(i).forward(x, state.layers[i], caches[i], positions, T);
  }
  const torch::Tensor last = x.view({B, T, H}).select(1, T - 1).contiguous();  // (B, H)
  return lm_head(Qwen35RmsNormCpu(last, norm->weight, config_.rms_norm_eps, true));  // (B, V)
}

torch::Tensor Qwen35Impl::ForwardStep(const torch::Tensor& tokens, State& state) {
  TORCH_CHECK(tokens.dim() == 1 && tokens.size(0) == state.batch_size(),
              "Qwen35::ForwardStep: tokens ", tokens.sizes(), " for a batch of ",
              state.batch_size());
  torch::NoGradGuard no_grad;
  torch::Tensor logits = Forward(tokens.unsqueeze(1), state, /*in_place=*/true);
  for (int64_t& p : state.positions) ++p;
  return logits;
}

torch::Tensor Qwen35Impl::ForwardPrefill(const torch::Tensor& tokens, State& state) {
  TORCH_CHECK(tokens.dim() == 2 && tokens.size(0) == state.batch_size() && tokens.size(1) > 0,
              "Qwen35::ForwardPrefill: tokens ", tokens.sizes(), " for a batch of ",
              state.batch_size());
  torch::NoGradGuard no_grad;
  const int64_t B = tokens.size(0), T = tokens.size(1);
  const int64_t pass = std::max<int64_t>(1, kPrefillRowsPerPass / B);
  torch::Tensor logits;
  for (int64_t start = 0; start < T; start += pass) {
    // The first pass replaces the state's tensors (a caller's copy of the old
    // ones stays intact); the later ones advance those new tensors in place.
    logits = Forward(tokens.narrow(1, start, std::min(pass, T - start)), state,
                     /*in_place=*/start > 0);
    for (int64_t& p : state.positions) p += std::min(pass, T - start);
  }
  return logits;
}

}  // namespace linserve

#include "engine/rwkv7/rwkv7.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <torch/nn/functional.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_bf16_product.h"
#include "engine/cpu/fixed_order_product.h"
#include "engine/rwkv7/rwkv7_fused_cpu.h"
#include "engine/rwkv7/rwkv7_wkv.h"
#include "engine/rwkv7/rwkv7_wkv_cpu.h"

namespace linserve {
namespace {

constexpr double kNormEps = 1e-5;      // every LayerNorm
constexpr double kGroupNormEps = 64e-5;  // ln_x

// Rows per layer in one pass of the prefill: bounds the activations
// ((rows, F) floats in channel mixing) whatever the prompt's length.
constexpr int64_t kPrefillRowsPerPass = 8192;

// x (B, T, C) and the previous call's last row `last` (B, C) -> each row's
// predecessor (B, T, C).
torch::Tensor Previous(const torch::Tensor& x, const torch::Tensor& last) {
  if (x.size(1) == 1) return last.unsqueeze(1);
  return torch::cat({last.unsqueeze(1), x.narrow(1, 0, x.size(1) - 1)}, 1);
}

// The residual x + add (x without `add`), its LayerNorm `norm` and the
// token-shift mixes of that (engine/rwkv7/rwkv7_fused_cpu.h, NormShiftCpu);
// `shift` (B, C) is replaced by the last row's LayerNorm. On the CPU in two
// passes of our own, elsewhere in LibTorch operations.
NormShifted NormShift(const torch::Tensor& x, const torch::Tensor& add, torch::nn::LayerNorm norm,
                      torch::Tensor& shift, const std::vector<torch::Tensor>& mixes) {
  NormShifted out;
  if (x.is_cpu()) {
    out = NormShiftCpu(x, add, norm->weight, norm->bias, kNormEps, shift, mixes);
  } else {
    const int64_t K = mixes.size(), C = x.size(2);
    out.residual = add.defined() ? x + add : x;
    const torch::Tensor n = norm(out.residual);
    out.last = n.select(1, n.size(1) - 1).contiguous();
    out.mixed = torch::addcmul(n.unsqueeze(0), (Previous(n, shift) - n).unsqueeze(0),
                               torch::stack(mixes).view({K, 1, 1, C}));  // (K, B, T, C)
  }
  shift = out.last;
  return out;
}

// x (B, T, in) float32 through a low-rank matrix m (in, out) in the compute
// dtype, or m packed (PackLowRankForCpu). On the CPU, m as it is stored is
// already the fixed-order product's layout: 16 outputs of one input in a row
// (engine/cpu/fixed_order_product.h), whose bits do not depend on how many rows
// a call has (the prefix cache's pieces, the decode batch).
torch::Tensor LowRank(const torch::Tensor& x, const torch::Tensor& m) {
  if (IsPackedBf16(m)) return PackedBf16Product(m, x);
  if (CanUseFixedOrder(x, m)) return FixedOrderInputMajorLinear(x, m);
  return torch::matmul(x.to(m.scalar_type()), m).to(torch::kFloat32);
}

bool IsMatrix(const std::string& name, const torch::Tensor& p) {
  const std::string leaf = name.substr(name.rfind('.') + 1);
  if (leaf == "weight") return p.dim() == 2;
  return leaf.size() == 2 && std::string("wavg").find(leaf[0]) != std::string::npos &&
         (leaf[1] == '1' || leaf[1] == '2');
}

}  // namespace

std::vector<StateTensorSpec> Rwkv7StateSpec(const Rwkv7Config& config) {
  return {{kRwkv7AttShift, {config.d_model}, torch::kFloat32},
          {kRwkv7FfnShift, {config.d_model}, torch::kFloat32},
          {kRwkv7Wkv, {config.n_heads, config.head_size, config.head_size}, torch::kFloat32}};
}

Rwkv7TimeMixImpl::Rwkv7TimeMixImpl(const Rwkv7Config& c, int64_t layer, torch::ScalarType dtype)
    : layer_(layer), n_heads_(c.n_heads), head_size_(c.head_size) {
  const int64_t C = c.d_model;
  auto vector = [&](const char* name) {
    return register_parameter(name, torch::zeros({C}), /*requires_grad=*/false);
  };
  auto matrix = [&](const char* name, int64_t rows, int64_t cols) {
    return register_parameter(name, torch::zeros({rows, cols}, dtype), /*requires_grad=*/false);
  };
  x_r = vector("x_r");
  x_w = vector("x_w");
  x_k = vector("x_k");
  x_v = vector("x_v");
  x_a = vector("x_a");
  x_g = vector("x_g");
  receptance = register_module("receptance", WeightMatrix(C, C, dtype));
  key = register_module("key", WeightMatrix(C, C, dtype));
  value = register_module("value", WeightMatrix(C, C, dtype));
  output = register_module("output", WeightMatrix(C, C, dtype));
  w0 = vector("w0");
  w1 = matrix("w1", C, c.w_lora);
  w2 = matrix("w2", c.w_lora, C);
  a0 = vector("a0");
  a1 = matrix("a1", C, c.a_lora);
  a2 = matrix("a2", c.a_lora, C);
  if (layer > 0) {
    v0 = vector("v0");
    v1 = matrix("v1", C, c.v_lora);
    v2 = matrix("v2", c.v_lora, C);
  }
  g1 = matrix("g1", C, c.g_lora);
  g2 = matrix("g2", c.g_lora, C);
  k_k = vector("k_k");
  k_a = vector("k_a");
  r_k = register_parameter("r_k", torch::zeros({c.n_heads, c.head_size}), false);
  ln_x = register_module(
      "ln_x", torch::nn::GroupNorm(torch::nn::GroupNormOptions(c.n_heads, C).eps(kGroupNormEps)));
}

std::vector<WeightMatrixImpl*> Rwkv7TimeMixImpl::Linears() {
  return {receptance.get(), key.get(), value.get(), output.get()};
}

void Rwkv7TimeMixImpl::PackLowRankForCpu() {
  torch::NoGradGuard no_grad;
  // Used as x m: packed from m^T for the bfloat16 product; as stored, (in,
  // out) row by row, for the fixed-order one.
  for (torch::Tensor* m : {&w1, &w2, &a1, &a2, &v1, &v2, &g1, &g2}) {
    if (CanPackForCpu(*m, /*transposed=*/true)) m->set_data(PackBf16(m->t()));
  }
}

std::vector<torch::Tensor> Rwkv7TimeMixImpl::Mixes() const {
  return {x_r, x_w, x_k, x_v, x_a, x_g};
}

Rwkv7TimeMixImpl::Gates Rwkv7TimeMixImpl::ComputeGates(
    const torch::Tensor& xw, const torch::Tensor& xa, const torch::Tensor& xv,
    const torch::Tensor& xg, torch::Tensor& k, torch::Tensor& v, torch::Tensor& v_first,
    bool decay) {
  Gates gates;
  if (k.is_cpu()) {
    // The same math as below in three passes of our own (engine/rwkv7/rwkv7_fused_cpu.h).
    torch::Tensor w_inner = LowRank(xw, w1);
    ActivateInPlaceCpu(w_inner, Activation::kTanh);
    torch::Tensor g_inner = LowRank(xg, g1);
    ActivateInPlaceCpu(g_inner, Activation::kSigmoid);
    gates.w = LowRank(w_inner, w2);
    gates.a = LowRank(LowRank(xa, a1), a2);
    gates.g = LowRank(g_inner, g2);
    torch::Tensor v_lr;
    if (layer_ == 0) {
      v_first = v;
    } else {
      v_lr = LowRank(LowRank(xv, v1), v2);
    }
    gates.kk = TimeMixGatesCpu(gates.w, gates.a, k, v, v_lr, v_first,
                               {w0, a0, layer_ == 0 ? torch::Tensor() : v0, k_k, k_a, head_size_},
                               decay);
    return gates;
  }
  const int64_t B = k.size(0), T = k.size(1), H = n_heads_, N = head_size_;
  // log of the decay: w = exp(-e^-0.5 sigmoid(.)), in (e^-0.61, 1).
  gates.w = torch::sigmoid(LowRank(torch::tanh(LowRank(xw, w1)), w2) + w0) * -std::exp(-0.5);
  if (decay) gates.w = gates.w.exp();
  gates.a = torch::sigmoid(LowRank(LowRank(xa, a1), a2) + a0);
  gates.g = LowRank(torch::sigmoid(LowRank(xg, g1)), g2);
  if (layer_ == 0) {
    v_first = v;
  } else {
    v = torch::lerp(v, v_first, torch::sigmoid(LowRank(LowRank(xv, v1), v2) + v0));
  }
  gates.kk = torch::nn::functional::normalize(
                 (k * k_k).view({B, T, H, N}),
                 torch::nn::functional::NormalizeFuncOptions().dim(-1).eps(1e-12))
                 .view({B, T, H * N});
  k = k * (1 + (gates.a - 1) * k_a);
  return gates;
}

torch::Tensor Rwkv7TimeMixImpl::forward(const torch::Tensor& mixed, torch::Tensor& v_first,
                                        torch::Tensor& wkv, int64_t chunk) {
  const int64_t B = mixed.size(1), T = mixed.size(2), C = mixed.size(3), H = n_heads_,
                N = head_size_;
  const torch::Tensor xr = mixed[0], xw = mixed[1], xk = mixed[2], xv = mixed[3], xa = mixed[4],
                      xg = mixed[5];  // (B, T, C) each
  const torch::Tensor r = receptance(xr);
  torch::Tensor k = key(xk);
  torch::Tensor v = value(xv);
  const Gates gates = ComputeGates(xw, xa, xv, xg, k, v, v_first, /*decay=*/chunk == 0);

  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, H, N}); };
  torch::Tensor y;                                                          // (B, T, H, N)
  if (chunk == 0) {
    auto step = [&](const torch::Tensor& t) { return t.view({B, H, N}); };
    y = WkvStep(step(r), step(gates.w), step(k), step(v), step(gates.kk), step(gates.a), wkv)
            .view({B, T, H, N});
  } else {
    y = WkvPrefill(heads(r), heads(gates.w), heads(k), heads(v), heads(gates.kk), heads(gates.a),
                   wkv, chunk);
  }
  if (wkv.is_cpu()) {
    // y from the chunked form may be a permuted view: reshape, not view.
    auto rows = [&](const torch::Tensor& t) { return t.reshape({B * T, H, N}); };
    return output(WkvOutputCpu(rows(y), rows(r), rows(k), rows(v), r_k, gates.g.view({B * T, C}),
                               ln_x->weight, ln_x->bias, kGroupNormEps)
                      .view({B, T, C}));
  }
  y = ln_x(y.reshape({B * T, C})).view({B, T, H, N});
  y = y + (heads(r) * heads(k) * r_k).sum(-1, /*keepdim=*/true) * heads(v);
  return output(y.view({B, T, C}) * gates.g);
}

Rwkv7ChannelMixImpl::Rwkv7ChannelMixImpl(const Rwkv7Config& c, torch::ScalarType dtype) {
  x_k = register_parameter("x_k", torch::zeros({c.d_model}), /*requires_grad=*/false);
  key = register_module("key", WeightMatrix(c.d_model, c.ffn_size, dtype));
  value = register_module("value", WeightMatrix(c.ffn_size, c.d_model, dtype));
}

torch::Tensor Rwkv7ChannelMixImpl::forward(const torch::Tensor& xk) {
  return value(key->ReluSquared(xk));
}

Rwkv7BlockImpl::Rwkv7BlockImpl(const Rwkv7Config& c, int64_t layer, torch::ScalarType dtype) {
  auto norm = [&] {
    return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model}).eps(kNormEps));
  };
  if (layer == 0 && c.pre_norm) ln0 = register_module("ln0", norm());
  ln1 = register_module("ln1", norm());
  ln2 = register_module("ln2", norm());
  att = register_module("att", Rwkv7TimeMix(c, layer, dtype));
  ffn = register_module("ffn", Rwkv7ChannelMix(c, dtype));
}

torch::Tensor Rwkv7BlockImpl::forward(const torch::Tensor& x, torch::Tensor& v_first,
                                      LayerState& state, int64_t chunk) {
  const NormShifted att_in = NormShift(x, torch::Tensor(), ln1, state[0], att->Mixes());
  const torch::Tensor att_out = att(att_in.mixed, v_first, state[2], chunk);
  const NormShifted ffn_in = NormShift(att_in.residual, att_out, ln2, state[1], {ffn->x_k});
  return ffn_in.residual + ffn(ffn_in.mixed[0]);
}

Rwkv7Impl::Rwkv7Impl(const Rwkv7Config& c, const Rwkv7Options& options)
    : config_(c), options_(options) {
  TORCH_CHECK(options.chunk_size >= 1 && options.chunk_size <= 64,
              "Rwkv7: chunk_size must be in [1, 64], got ", options.chunk_size);
  emb = register_module("emb", torch::nn::Embedding(torch::nn::EmbeddingOptions(
                                   c.vocab_size, c.d_model)._weight(
                                   torch::empty({c.vocab_size, c.d_model}, options.dtype))));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layers; ++i) blocks->push_back(Rwkv7Block(c, i, options.dtype));
  ln_out = register_module(
      "ln_out", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model}).eps(kNormEps)));
  head = register_module("head", WeightMatrix(c.d_model, c.vocab_size, options.dtype));
  for (auto& p : parameters()) p.set_requires_grad(false);
}

void Rwkv7Impl::LoadWeights(const TensorMap& weights) {
  if (options_.quantization == WeightQuantization::kNone) {
    LoadWeights(weights, {});
    return;
  }
  TORCH_CHECK(device().is_cpu(), "Rwkv7: 8- and 4-bit weights are for the CPU");
  torch::NoGradGuard no_grad;
  // Quantized from the file's own values, not from a copy already rounded
  // to the compute dtype; all of them in one buffer in huge pages, which
  // every decode step streams.
  std::vector<QuantizedShape> shapes;
  std::vector<int64_t> bytes;
  for (const std::string& name : QuantizedMatrixNames()) {
    auto it = weights.find(name);
    TORCH_CHECK(it != weights.end() && it->second.dim() == 2, "Rwkv7: no matrix '", name, "'");
    shapes.push_back({it->second.size(0), it->second.size(1), options_.quantization_group,
                      options_.quantization});
    bytes.push_back(QuantizedArenaBytes(shapes.back()));
  }
  HugePageArena arena(bytes);
  std::map<std::string, QuantizedWeight> quantized;
  for (const std::string& name : QuantizedMatrixNames()) {
    try {
      quantized[name] = QuantizeWeight(weights.at(name), options_.quantization,
                                       options_.quantization_group, &arena);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "Rwkv7: '", name, "': ", e.what_without_backtrace());
    }
  }
  LoadWeights(weights, quantized);
}

void Rwkv7Impl::LoadWeights(const TensorMap& weights,
                            const std::map<std::string, QuantizedWeight>& quantized) {
  torch::NoGradGuard no_grad;
  if (!quantized.empty()) {
    TORCH_CHECK(options_.quantization != WeightQuantization::kNone,
                "Rwkv7: quantized matrices for a model built without a quantization");
    for (const auto& [name, linear] : QuantizableLinears()) {
      auto it = quantized.find(name);
      TORCH_CHECK(it != quantized.end(), "Rwkv7: no quantized matrix '", name, "'");
      const QuantizedWeight& q = it->second;
      torch::Tensor& param = linear != nullptr ? linear->weight : emb->weight;
      TORCH_CHECK(q.shape.kind == options_.quantization &&
                      q.shape.group == options_.quantization_group,
                  "Rwkv7: '", name, "' is ", WeightQuantizationName(q.shape.kind), " in groups of ",
                  q.shape.group, ", expected ", WeightQuantizationName(options_.quantization),
                  " in groups of ", options_.quantization_group);
      TORCH_CHECK(param.dim() == 2 && q.shape.out == param.size(0) && q.shape.in == param.size(1),
                  "Rwkv7: quantized '", name, "' is (", q.shape.out, ", ", q.shape.in,
                  "), expected ", param.sizes());
      const std::string problem = CheckQuantizedWeight(q);
      TORCH_CHECK(problem.empty(), "Rwkv7: quantized '", name, "': ", problem);
      if (linear != nullptr) {
        linear->quantized = q;
      } else {
        emb_quantized = q;
      }
      param.set_data(torch::empty({0}, param.options()));
    }
  }
  auto params = named_parameters();
  size_t used = 0;
  for (auto& item : params) {
    if (quantized.count(item.key()) != 0) {
      used += weights.count(item.key());
      continue;
    }
    auto it = weights.find(item.key());
    TORCH_CHECK(it != weights.end(), "Rwkv7: no weight for '", item.key(), "'");
    TORCH_CHECK(it->second.sizes() == item.value().sizes(), "Rwkv7: weight '", item.key(),
                "' has shape ", it->second.sizes(), ", expected ", item.value().sizes());
    TORCH_CHECK(IsMatrix(item.key(), item.value()) ||
                    item.value().scalar_type() == torch::kFloat32,
                "Rwkv7: '", item.key(), "' should be float32");
    item.value().copy_(it->second);
    ++used;
  }
  TORCH_CHECK(used == weights.size(), "Rwkv7: ", weights.size(), " weights for ", params.size(),
              " parameters");
}

std::vector<std::string> Rwkv7Impl::QuantizedMatrixNames() const {
  std::vector<std::string> names;
  if (options_.quantization == WeightQuantization::kNone) return names;
  names.push_back("emb.weight");
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    for (const char* leaf : {"att.receptance", "att.key", "att.value", "att.output", "ffn.key",
                             "ffn.value"}) {
      names.push_back(absl::StrCat("blocks.", i, ".", leaf, ".weight"));
    }
  }
  names.push_back("head.weight");
  return names;
}

std::map<std::string, WeightMatrixImpl*> Rwkv7Impl::QuantizableLinears() {
  std::map<std::string, WeightMatrixImpl*> linears;
  if (options_.quantization == WeightQuantization::kNone) return linears;
  linears["emb.weight"] = nullptr;
  for (size_t i = 0; i < blocks->size(); ++i) {
    Rwkv7BlockImpl& block = blocks->at<Rwkv7BlockImpl>(i);
    const std::string prefix = absl::StrCat("blocks.", i, ".");
    linears[prefix + "att.receptance.weight"] = block.att->receptance.get();
    linears[prefix + "att.key.weight"] = block.att->key.get();
    linears[prefix + "att.value.weight"] = block.att->value.get();
    linears[prefix + "att.output.weight"] = block.att->output.get();
    linears[prefix + "ffn.key.weight"] = block.ffn->key.get();
    linears[prefix + "ffn.value.weight"] = block.ffn->value.get();
  }
  linears["head.weight"] = head.get();
  return linears;
}

std::map<std::string, QuantizedWeight> Rwkv7Impl::QuantizedMatrices() const {
  std::map<std::string, QuantizedWeight> matrices;
  // Read only: the map of linears is built from the same modules.
  for (const auto& [name, linear] : const_cast<Rwkv7Impl*>(this)->QuantizableLinears()) {
    const QuantizedWeight& q = linear != nullptr ? linear->quantized : emb_quantized;
    if (q.defined()) matrices[name] = q;
  }
  return matrices;
}

void Rwkv7Impl::PackForCpu() {
  if (!device().is_cpu()) return;
  std::vector<WeightMatrixImpl*> linears;
  for (size_t i = 0; i < blocks->size(); ++i) {
    Rwkv7BlockImpl& block = blocks->at<Rwkv7BlockImpl>(i);
    for (WeightMatrixImpl* linear : block.att->Linears()) linears.push_back(linear);
    linears.push_back(block.ffn->key.get());
    linears.push_back(block.ffn->value.get());
    block.att->PackLowRankForCpu();
  }
  linears.push_back(head.get());
  std::vector<int64_t> bytes;
  for (const WeightMatrixImpl* linear : linears) bytes.push_back(linear->CpuBytes());
  HugePageArena arena(bytes);
  for (WeightMatrixImpl* linear : linears) linear->PackForCpu(arena);
}

State Rwkv7Impl::NewState(int64_t batch) const {
  State state;
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    LayerState layer;
    for (const StateTensorSpec& spec : Rwkv7StateSpec(config_)) {
      std::vector<int64_t> shape = {batch};
      shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
      layer.push_back(torch::zeros(shape, torch::TensorOptions(spec.dtype).device(device())));
    }
    state.layers.push_back(std::move(layer));
  }
  state.positions.assign(batch, 0);
  return state;
}

torch::Tensor Rwkv7Impl::Forward(const torch::Tensor& tokens, State& state, int64_t chunk) {
  torch::Tensor x = emb_quantized.defined() ? DequantizeRows(emb_quantized, tokens)
                                            : emb(tokens).to(torch::kFloat32);  // (B, T, C)
  auto first = blocks->at<Rwkv7BlockImpl>(0).ln0;
  if (!first.is_empty()) x = first(x);
  torch::Tensor v_first;
  for (size_t i = 0; i < blocks->size(); ++i) {
    x = blocks->at<Rwkv7BlockImpl>(i).forward(x, v_first, state.layers[i], chunk);
  }
  return head(ln_out(x.select(1, x.size(1) - 1)));    // (B, V)
}

torch::Tensor Rwkv7Impl::ForwardStep(const torch::Tensor& tokens, State& state) {
  TORCH_CHECK(tokens.dim() == 1 && tokens.size(0) == state.batch_size(),
              "Rwkv7::ForwardStep: tokens ", tokens.sizes(), " for a batch of ",
              state.batch_size());
  torch::NoGradGuard no_grad;
  torch::Tensor logits = Forward(tokens.unsqueeze(1), state, /*chunk=*/0);
  for (int64_t& p : state.positions) ++p;
  return logits;
}

torch::Tensor Rwkv7Impl::ForwardPrefill(const torch::Tensor& tokens, State& state) {
  TORCH_CHECK(tokens.dim() == 2 && tokens.size(0) == state.batch_size() && tokens.size(1) > 0,
              "Rwkv7::ForwardPrefill: tokens ", tokens.sizes(), " for a batch of ",
              state.batch_size());
  torch::NoGradGuard no_grad;
  const int64_t B = tokens.size(0), T = tokens.size(1), L = options_.chunk_size;
  const int64_t pass = std::max<int64_t>(L, kPrefillRowsPerPass / B / L * L);
  // The layers replace the state's tensors, never write into them, so a
  // caller's copy of the old ones stays intact.
  torch::Tensor logits;
  for (int64_t start = 0; start < T; start += pass) {
    logits = Forward(tokens.narrow(1, start, std::min(pass, T - start)), state, L);
  }
  for (int64_t& p : state.positions) p += T;
  return logits;
}

}  // namespace linserve

#include "engine/transformer/transformer.h"

#include <cmath>

#include <torch/types.h>
#include <torch/utils.h>

namespace linserve {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  return x * torch::rsqrt(x.square().mean(-1, true) + eps_) * weight;
}

MlpImpl::MlpImpl(const ModelConfig& config) {
  fc = register_module(
      "fc", torch::nn::Linear(torch::nn::LinearOptions(config.d_model, config.mlp_hidden).bias(false)));
  proj = register_module(
      "proj", torch::nn::Linear(torch::nn::LinearOptions(config.mlp_hidden, config.d_model).bias(false)));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return LinearNoBias(torch::gelu(LinearNoBias(x, fc->weight, quantized_fc_)), proj->weight,
                      quantized_proj_);
}

void MlpImpl::Quantize(WeightQuantization kind, int64_t group) {
  torch::NoGradGuard no_grad;
  quantized_fc_ = QuantizeWeight(fc->weight, kind, group);
  quantized_proj_ = QuantizeWeight(proj->weight, kind, group);
}

BlockImpl::BlockImpl(const ModelConfig& config) {
  attn_norm = register_module("attn_norm", RMSNorm(config.d_model, config.norm_eps));
  attn = register_module("attn", Attention(config));
  mlp_norm = register_module("mlp_norm", RMSNorm(config.d_model, config.norm_eps));
  mlp = register_module("mlp", Mlp(config));
}

torch::Tensor BlockImpl::ForwardReference(const torch::Tensor& x) {
  torch::Tensor h = x + attn->ForwardReference(attn_norm(x));
  return h + mlp(mlp_norm(h));
}

torch::Tensor BlockImpl::ForwardChunked(const torch::Tensor& x, int64_t start, LayerState& state) {
  torch::Tensor h = x + attn->ForwardChunked(attn_norm(x), start, state);
  return h + mlp(mlp_norm(h));
}

torch::Tensor BlockImpl::ForwardStep(const torch::Tensor& x, const torch::Tensor& positions,
                                     LayerState& state) {
  torch::Tensor h = x + attn->ForwardStep(attn_norm(x), positions, state);
  return h + mlp(mlp_norm(h));
}

TransformerImpl::TransformerImpl(const ModelConfig& config) : config_(config) {
  embed = register_module("embed", torch::nn::Embedding(config.vocab_size, config.d_model));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layers; ++i) blocks->push_back(Block(config));
  norm = register_module("norm", RMSNorm(config.d_model, config.norm_eps));

  // GPT-2 style initialisation: N(0, 0.02), residual projections scaled down
  // by sqrt(2 n_layers) so the residual stream keeps its scale with depth.
  torch::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * config.n_layers);
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    if (name.find("norm.weight") != std::string::npos) continue;  // gains stay 1
    if (name.find("window_bias") != std::string::npos) continue;  // starts neutral
    if (name.find("codebook") != std::string::npos) continue;     // keeps N(0, 1)
    if (name.find("shift_mix") != std::string::npos) continue;    // keeps its spread
    const bool residual = name.find("attn.out.") != std::string::npos ||
                          name.find("mlp.proj.") != std::string::npos;
    p.normal_(0.0, residual ? residual_std : 0.02);
  }
}

const AttentionKernel& TransformerImpl::kernel() const {
  return blocks->at<BlockImpl>(0).attn->kernel();
}

torch::Device TransformerImpl::device() const { return embed->weight.device(); }

torch::Tensor TransformerImpl::TakeCommitmentLoss() {
  torch::Tensor total = torch::zeros({}, embed->weight.options());
  for (const auto& block : *blocks) total = total + block->as<BlockImpl>()->attn->TakeCommitmentLoss();
  return total;
}

void TransformerImpl::UpdateCodebooks(double decay) {
  for (const auto& block : *blocks) block->as<BlockImpl>()->attn->UpdateCodebook(decay);
}

State TransformerImpl::NewState(int64_t batch) const {
  State state;
  auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    state.layers.push_back(kernel().InitialState(batch, options));
  }
  state.positions.assign(batch, 0);
  return state;
}

torch::Tensor TransformerImpl::Logits(const torch::Tensor& x) {
  return LinearNoBias(norm->forward(x), embed->weight, quantized_embed_);  // tied head
}

torch::Tensor TransformerImpl::Embed(const torch::Tensor& tokens) {
  return quantized_embed_.defined() ? DequantizeRows(quantized_embed_, tokens) : embed(tokens);
}

void TransformerImpl::Quantize(WeightQuantization kind, int64_t group) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < blocks->size(); ++i) {
    blocks->at<BlockImpl>(i).attn->Quantize(kind, group);
    blocks->at<BlockImpl>(i).mlp->Quantize(kind, group);
  }
  quantized_embed_ = QuantizeWeight(embed->weight, kind, group);
}

torch::Tensor TransformerImpl::ForwardReference(const torch::Tensor& tokens) {
  torch::Tensor x = Embed(tokens);  // (B, T, D)
  for (const auto& block : *blocks) x = block->as<BlockImpl>()->ForwardReference(x);
  return Logits(x);
}

torch::Tensor TransformerImpl::ForwardChunked(const torch::Tensor& tokens, State& state) {
  TORCH_CHECK(static_cast<int64_t>(state.positions.size()) == tokens.size(0),
              "ForwardChunked: state batch ", state.positions.size(), " != tokens batch ",
              tokens.size(0));
  const int64_t start = state.positions.empty() ? 0 : state.positions[0];
  for (int64_t p : state.positions) {
    TORCH_CHECK(p == start, "ForwardChunked: sessions must stand at the same position");
  }
  torch::Tensor x = Embed(tokens);
  for (size_t i = 0; i < blocks->size(); ++i) {
    x = blocks->at<BlockImpl>(i).ForwardChunked(x, start, state.layers[i]);
  }
  for (int64_t& p : state.positions) p += tokens.size(1);
  return Logits(x);
}

torch::Tensor TransformerImpl::ForwardStep(const torch::Tensor& tokens, State& state) {
  TORCH_CHECK(static_cast<int64_t>(state.positions.size()) == tokens.size(0),
              "ForwardStep: state batch ", state.positions.size(), " != tokens ", tokens.size(0));
  torch::Tensor positions =
      torch::tensor(state.positions, torch::TensorOptions().dtype(torch::kInt64)).to(device());
  torch::Tensor x = Embed(tokens);  // (B, D)
  for (size_t i = 0; i < blocks->size(); ++i) {
    x = blocks->at<BlockImpl>(i).ForwardStep(x, positions, state.layers[i]);
  }
  for (int64_t& p : state.positions) ++p;
  return Logits(x);
}

}  // namespace linserve

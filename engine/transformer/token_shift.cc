#include "engine/transformer/token_shift.h"

#include <utility>

#include <torch/types.h>

namespace linserve {
namespace {

class TokenShiftStateKernel : public AttentionKernel {
 public:
  TokenShiftStateKernel(std::unique_ptr<AttentionKernel> inner, int64_t d_model)
      : inner_(std::move(inner)), d_model_(d_model) {}

  std::vector<StateTensorSpec> StateSpec() const override {
    std::vector<StateTensorSpec> spec = inner_->StateSpec();
    spec.push_back({"shift", {d_model_}, torch::kFloat32});
    return spec;
  }

  LayerState InitialState(int64_t batch, const torch::TensorOptions& options) const override {
    LayerState state = inner_->InitialState(batch, options);
    state.push_back(torch::zeros({batch, d_model_}, options.dtype(torch::kFloat32)));
    return state;
  }

  torch::Tensor Reference(const AttentionInputs& in) const override {
    return inner_->Reference(in);
  }

  torch::Tensor Chunked(const AttentionInputs& in, int64_t start,
                        LayerState& state) const override {
    return WithInnerState(state, [&](LayerState& inner) { return inner_->Chunked(in, start, inner); });
  }

  torch::Tensor Step(const AttentionInputs& in, const torch::Tensor& positions,
                     LayerState& state) const override {
    return WithInnerState(state,
                          [&](LayerState& inner) { return inner_->Step(in, positions, inner); });
  }

  bool GrowsWithPosition() const override { return inner_->GrowsWithPosition(); }

 private:
  // Runs `form` on the state without its trailing shift tensor, then puts the
  // shift back (the inner kernel may replace its tensors, e.g. a grown cache).
  template <typename Form>
  static torch::Tensor WithInnerState(LayerState& state, Form form) {
    torch::Tensor shift = state.back();
    state.pop_back();
    torch::Tensor out = form(state);
    state.push_back(shift);
    return out;
  }

  std::unique_ptr<AttentionKernel> inner_;
  const int64_t d_model_;
};

}  // namespace

std::unique_ptr<AttentionKernel> WithTokenShiftState(std::unique_ptr<AttentionKernel> inner,
                                                     int64_t d_model) {
  return std::make_unique<TokenShiftStateKernel>(std::move(inner), d_model);
}

torch::Tensor PreviousInputs(const torch::Tensor& x, const torch::Tensor& last) {
  return torch::cat({last.unsqueeze(1).to(x.dtype()), x.narrow(1, 0, x.size(1) - 1)}, 1);
}

}  // namespace linserve

// The fused CPU passes of time and channel mixing against the same math in
// LibTorch operations (the form engine/rwkv7/rwkv7.cc uses off the CPU), and
// each row's bits alone against in a batch, on random inputs.

#include "engine/rwkv7/rwkv7_fused_cpu.h"

#include <torch/nn/functional.h>
#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/engine_threads.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

float MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<float>();
}

std::vector<torch::Tensor> RandomMixes(int64_t K, int64_t C) {
  std::vector<torch::Tensor> mixes;
  for (int64_t m = 0; m < K; ++m) mixes.push_back(torch::rand({C}));
  return mixes;
}

// Widths: 768 as the 0.1B shape; 100 leaves a tail after the 8 lanes.
TEST(NormShiftCpuTest, MatchesTheTensorForm) {
  for (int64_t C : {768, 100}) {
    torch::manual_seed(C);
    const int64_t B = 3, T = 5, K = 6;
    const torch::Tensor x = torch::randn({B, T, C}) * 3 + 1, add = torch::randn({B, T, C});
    const torch::Tensor weight = torch::randn({C}), bias = torch::randn({C});
    const torch::Tensor shift = torch::randn({B, C});
    const std::vector<torch::Tensor> mixes = RandomMixes(K, C);
    const NormShifted out = NormShiftCpu(x, add, weight, bias, 1e-5, shift, mixes);

    const torch::Tensor h = x + add;
    const torch::Tensor n = torch::layer_norm(h, {C}, weight, bias, 1e-5);
    const torch::Tensor prev = torch::cat({shift.unsqueeze(1), n.narrow(1, 0, T - 1)}, 1);
    EXPECT_TRUE(torch::equal(out.residual, h));
    EXPECT_LT(MaxAbsDiff(out.last, n.select(1, T - 1)), 1e-5);
    for (int64_t m = 0; m < K; ++m) {
      EXPECT_LT(MaxAbsDiff(out.mixed[m], n + (prev - n) * mixes[m]), 1e-5) << C << " mix " << m;
    }
    // Without `add` the residual is x itself.
    const NormShifted plain = NormShiftCpu(x, torch::Tensor(), weight, bias, 1e-5, shift, mixes);
    EXPECT_TRUE(plain.residual.is_same(x));
  }
}

TEST(NormShiftCpuTest, EachRowHasItsBitsInAnyBatchAndOnAnyThreadCount) {
  const int64_t B = 40, T = 3, C = 768;
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({B, T, C}), add = torch::randn({B, T, C});
  const torch::Tensor weight = torch::randn({C}), bias = torch::randn({C});
  const torch::Tensor shift = torch::randn({B, C});
  const std::vector<torch::Tensor> mixes = RandomMixes(2, C);
  const int threads = EngineThreads();
  SetEngineThreads(2);
  const NormShifted batch = NormShiftCpu(x, add, weight, bias, 1e-5, shift, mixes);
  SetEngineThreads(1);
  for (int64_t b : {0, 17, 39}) {
    const NormShifted alone = NormShiftCpu(x.narrow(0, b, 1), add.narrow(0, b, 1), weight, bias,
                                           1e-5, shift.narrow(0, b, 1), mixes);
    EXPECT_TRUE(torch::equal(alone.mixed.select(1, 0), batch.mixed.select(1, b))) << b;
    EXPECT_TRUE(torch::equal(alone.last[0], batch.last[b])) << b;
  }
  SetEngineThreads(threads);
}

struct GateInputs {
  torch::Tensor w, a, k, v, v_lr, v_first;
  TimeMixGateParams p;
};

GateInputs RandomGateInputs(int64_t rows, int64_t C, int64_t N, bool residual, uint64_t seed) {
  torch::manual_seed(seed);
  GateInputs in;
  for (torch::Tensor* t : {&in.w, &in.a, &in.k, &in.v, &in.v_lr, &in.v_first}) {
    *t = torch::randn({rows, C});
  }
  in.p = {torch::randn({C}), torch::randn({C}), residual ? torch::randn({C}) : torch::Tensor(),
          torch::randn({C}), torch::rand({C}),  N};
  return in;
}

TEST(TimeMixGatesCpuTest, MatchesTheTensorForm) {
  const int64_t rows = 4, C = 192, N = 64;
  for (bool residual : {false, true}) {
    for (bool decay : {false, true}) {
      GateInputs in = RandomGateInputs(rows, C, N, residual, 3);
      const GateInputs want = RandomGateInputs(rows, C, N, residual, 3);
      const torch::Tensor kk =
          TimeMixGatesCpu(in.w, in.a, in.k, in.v, in.v_lr, in.v_first, in.p, decay);

      torch::Tensor log_w = torch::sigmoid(want.w + want.p.w0) * -std::exp(-0.5);
      const torch::Tensor a = torch::sigmoid(want.a + want.p.a0);
      const torch::Tensor want_kk =
          torch::nn::functional::normalize(
              (want.k * want.p.k_k).view({rows, C / N, N}),
              torch::nn::functional::NormalizeFuncOptions().dim(-1).eps(1e-12))
              .view({rows, C});
      const torch::Tensor k = want.k * (1 + (a - 1) * want.p.k_a);
      const torch::Tensor v =
          residual ? torch::lerp(want.v, want.v_first, torch::sigmoid(want.v_lr + want.p.v0))
                   : want.v;
      EXPECT_LT(MaxAbsDiff(in.w, decay ? log_w.exp() : log_w), 1e-6);
      EXPECT_LT(MaxAbsDiff(in.a, a), 1e-6);
      EXPECT_LT(MaxAbsDiff(kk, want_kk), 1e-6);
      EXPECT_LT(MaxAbsDiff(in.k, k), 1e-5);
      EXPECT_LT(MaxAbsDiff(in.v, v), 1e-5);
    }
  }
}

TEST(TimeMixGatesCpuTest, EachRowHasItsBitsInAnyBatch) {
  const int64_t rows = 37, C = 768, N = 64;
  GateInputs batch = RandomGateInputs(rows, C, N, true, 4);
  const GateInputs original = RandomGateInputs(rows, C, N, true, 4);
  const torch::Tensor kk = TimeMixGatesCpu(batch.w, batch.a, batch.k, batch.v, batch.v_lr,
                                           batch.v_first, batch.p, /*decay=*/true);
  for (int64_t row : {0, 20, 36}) {
    auto one = [&](const torch::Tensor& t) { return t.narrow(0, row, 1).clone(); };
    torch::Tensor w = one(original.w), a = one(original.a), k = one(original.k),
                  v = one(original.v);
    const torch::Tensor kk_row =
        TimeMixGatesCpu(w, a, k, v, one(original.v_lr), one(original.v_first), original.p, true);
    EXPECT_TRUE(torch::equal(kk_row[0], kk[row])) << row;
    EXPECT_TRUE(torch::equal(w[0], batch.w[row])) << row;
    EXPECT_TRUE(torch::equal(k[0], batch.k[row])) << row;
    EXPECT_TRUE(torch::equal(v[0], batch.v[row])) << row;
  }
}

TEST(ActivateInPlaceCpuTest, MatchesTheTensorForm) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({3, 64}) * 4;
  torch::Tensor t = x.clone(), s = x.clone();
  ActivateInPlaceCpu(t, Activation::kTanh);
  ActivateInPlaceCpu(s, Activation::kSigmoid);
  EXPECT_LT(MaxAbsDiff(t, torch::tanh(x)), 1e-6);
  EXPECT_LT(MaxAbsDiff(s, torch::sigmoid(x)), 1e-6);
}

}  // namespace
}  // namespace linserve

// WkvStepCpu against the recurrent step written in whole-tensor operations
// (the form engine/rwkv7/rwkv7_wkv.cc uses off the CPU), on random inputs.

#include "engine/rwkv7/rwkv7_wkv_cpu.h"

#include <torch/nn/functional.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace linserve {
namespace {

struct Inputs {
  torch::Tensor r, w, k, v, kk, a, S;
};

Inputs RandomInputs(int64_t batch, int64_t heads, int64_t n, uint64_t seed) {
  torch::manual_seed(seed);
  const std::vector<int64_t> shape = {batch, heads, n};
  Inputs in;
  in.r = torch::randn(shape);
  in.w = torch::exp(-0.61 * torch::rand(shape));  // decays in (e^-0.61, 1]
  in.k = torch::randn(shape);
  in.v = torch::randn(shape);
  in.kk = torch::nn::functional::normalize(torch::randn(shape),
                                           torch::nn::functional::NormalizeFuncOptions().dim(-1));
  in.a = torch::rand(shape);
  in.S = torch::randn({batch, heads, n, n});
  return in;
}

// S diag(w) - (S kk)(kk a)^T + v k^T, then y = S r.
torch::Tensor TensorStep(const Inputs& in, torch::Tensor& S) {
  const torch::Tensor s_kk = torch::matmul(S, in.kk.unsqueeze(-1));  // (B, H, N, 1)
  S = S * in.w.unsqueeze(-2) + in.v.unsqueeze(-1) * in.k.unsqueeze(-2) -
      s_kk * (in.kk * in.a).unsqueeze(-2);
  return torch::matmul(S, in.r.unsqueeze(-1)).squeeze(-1);
}

float MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<float>();
}

struct Shape {
  std::string name;
  int64_t batch, heads, n;
};

TEST(WkvStepCpuTest, MatchesTheTensorForm) {
  // n = 64 as the published models (the AVX-512 loop); 12 and 3 the plain
  // loop and its tail.
  for (const Shape& shape : std::vector<Shape>{
           {"B1_H12_N64", 1, 12, 64}, {"B5_H2_N12", 5, 2, 12}, {"B2_H3_N3", 2, 3, 3}}) {
    const Inputs in = RandomInputs(shape.batch, shape.heads, shape.n, 7);
    torch::Tensor expected_S = in.S.clone(), S = in.S.clone();
    const void* storage = S.data_ptr();
    // Several steps, so that each starts from the state the last one left.
    for (int step = 0; step < 4; ++step) {
      const torch::Tensor expected_y = TensorStep(in, expected_S);
      const torch::Tensor y = WkvStepCpu(in.r, in.w, in.k, in.v, in.kk, in.a, S);
      ASSERT_EQ(y.sizes(), expected_y.sizes()) << shape.name;
      ASSERT_EQ(S.sizes(), expected_S.sizes()) << shape.name;
      // Values of order 10 after a few steps; float32 sums in another order.
      EXPECT_LT(MaxAbsDiff(y, expected_y), 1e-4) << shape.name << " step " << step;
      EXPECT_LT(MaxAbsDiff(S, expected_S), 1e-4) << shape.name << " step " << step;
    }
    EXPECT_EQ(S.data_ptr(), storage) << shape.name << ": not updated in place";
  }
}

// A prompt's tokens in one WkvStepsCpu call give the bits of one WkvStepCpu
// call per token (the prefill and the decode step agree bit for bit).
TEST(WkvStepCpuTest, ManyTokensInOneCallGiveEachStepsBits) {
  constexpr int64_t kTokens = 5;
  for (const Shape& shape : std::vector<Shape>{{"B2_H3_N64", 2, 3, 64}, {"B3_H2_N12", 3, 2, 12}}) {
    std::vector<Inputs> tokens;
    for (int64_t t = 0; t < kTokens; ++t) {
      tokens.push_back(RandomInputs(shape.batch, shape.heads, shape.n, 100 + t));
    }
    auto stacked = [&](torch::Tensor Inputs::*field) {
      std::vector<torch::Tensor> each;
      for (const Inputs& in : tokens) each.push_back(in.*field);
      return torch::stack(each);  // (T, B, H, N)
    };
    torch::Tensor stepped_S = tokens[0].S.clone(), S = tokens[0].S.clone();
    std::vector<torch::Tensor> stepped_y;
    for (const Inputs& in : tokens) {
      stepped_y.push_back(WkvStepCpu(in.r, in.w, in.k, in.v, in.kk, in.a, stepped_S));
    }
    const torch::Tensor y = WkvStepsCpu(stacked(&Inputs::r), stacked(&Inputs::w),
                                        stacked(&Inputs::k), stacked(&Inputs::v),
                                        stacked(&Inputs::kk), stacked(&Inputs::a), S);
    EXPECT_TRUE(torch::equal(y, torch::stack(stepped_y))) << shape.name;
    EXPECT_TRUE(torch::equal(S, stepped_S)) << shape.name;
  }
}

TEST(WkvStepCpuTest, RefusesOtherDtypes) {
  Inputs in = RandomInputs(1, 1, 4, 1);
  torch::Tensor S = in.S.to(torch::kFloat64);
  EXPECT_THROW(WkvStepCpu(in.r, in.w, in.k, in.v, in.kk, in.a, S), c10::Error);
}

}  // namespace
}  // namespace linserve

// The prompt forms of RWKV-7's WKV recurrence: the chunked form (what a
// device runs) against the stepped one (what the CPU runs, WkvPrefill), on
// random inputs, so that the form the CPU no longer takes stays checked.

#include "engine/rwkv7/rwkv7_wkv.h"

#include <torch/nn/functional.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace linserve {
namespace {

struct Prompt {
  torch::Tensor r, log_w, k, v, kk, a, S;
};

// (B, T, H, N) inputs as a layer makes them, and a state of order one.
Prompt RandomPrompt(int64_t batch, int64_t tokens, int64_t heads, int64_t n, uint64_t seed) {
  torch::manual_seed(seed);
  const std::vector<int64_t> shape = {batch, tokens, heads, n};
  Prompt p;
  p.r = torch::randn(shape);
  p.log_w = -0.61 * torch::rand(shape);  // decays in (e^-0.61, 1]
  p.k = torch::randn(shape) * 0.5;
  p.v = torch::randn(shape);
  p.kk = torch::nn::functional::normalize(torch::randn(shape),
                                          torch::nn::functional::NormalizeFuncOptions().dim(-1));
  p.a = torch::rand(shape);
  p.S = torch::randn({batch, heads, n, n});
  return p;
}

double MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

TEST(WkvPrefillTest, ChunkedAndSteppedAgreeAndNeitherWritesTheCallersState) {
  constexpr int64_t kChunk = 16;
  for (int64_t tokens : {int64_t{1}, int64_t{7}, kChunk, kChunk + 1, 3 * kChunk + 5}) {
    const Prompt p = RandomPrompt(2, tokens, 3, 16, static_cast<uint64_t>(tokens));
    const torch::Tensor before = p.S.clone();
    torch::Tensor chunked_S = p.S, stepped_S = p.S;
    const torch::Tensor chunked =
        WkvChunked(p.r, p.log_w, p.k, p.v, p.kk, p.a, chunked_S, kChunk);
    const torch::Tensor stepped = WkvSteps(p.r, p.log_w, p.k, p.v, p.kk, p.a, stepped_S);
    ASSERT_EQ(chunked.sizes(), stepped.sizes()) << tokens;
    ASSERT_EQ(stepped.sizes(), p.r.sizes()) << tokens;
    // Outputs of order ten; float32 in different orders, and the chunked
    // form's decay ratios each rounded once.
    const double scale = std::max(1.0, stepped.abs().max().item<double>());
    EXPECT_LT(MaxAbsDiff(chunked, stepped), 1e-4 * scale) << tokens << " tokens";
    EXPECT_LT(MaxAbsDiff(chunked_S, stepped_S), 1e-4 * scale) << tokens << " tokens";
    // The state is replaced, never written: a failed prefill keeps the old.
    EXPECT_TRUE(torch::equal(p.S, before)) << tokens << " tokens";
    EXPECT_NE(stepped_S.data_ptr(), p.S.data_ptr());
  }
}

TEST(WkvPrefillTest, SteppedPiecesGiveTheSameBitsAsOneCall) {
  const Prompt p = RandomPrompt(2, 23, 3, 64, 5);
  torch::Tensor whole_S = p.S;
  const torch::Tensor whole = WkvSteps(p.r, p.log_w, p.k, p.v, p.kk, p.a, whole_S);
  for (int64_t cut : {int64_t{1}, int64_t{9}, int64_t{22}}) {
    auto part = [](const torch::Tensor& t, int64_t from, int64_t n) {
      return t.narrow(1, from, n);
    };
    torch::Tensor S = p.S;
    const int64_t rest = 23 - cut;
    const torch::Tensor first = WkvSteps(part(p.r, 0, cut), part(p.log_w, 0, cut),
                                         part(p.k, 0, cut), part(p.v, 0, cut),
                                         part(p.kk, 0, cut), part(p.a, 0, cut), S);
    const torch::Tensor second =
        WkvSteps(part(p.r, cut, rest), part(p.log_w, cut, rest), part(p.k, cut, rest),
                 part(p.v, cut, rest), part(p.kk, cut, rest), part(p.a, cut, rest), S);
    EXPECT_TRUE(torch::equal(torch::cat({first, second}, 1), whole)) << "cut at " << cut;
    EXPECT_TRUE(torch::equal(S, whole_S)) << "cut at " << cut;
  }
}

}  // namespace
}  // namespace linserve

// The 8- and 4-bit weight matrices as tensors (engine/cpu/quantized_linear.h):
// the product equals the loops' own (whichever family this process runs;
// ctest runs this binary again with LINSERVE_CPU_KERNELS=portable), a row's
// bits do not depend on the rows around it or the threads, and the
// dequantization, the checks on weights read from a file and the refusals.

#include "engine/cpu/quantized_linear.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/types.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/engine_threads.h"
#include "engine/cpu/huge_page_tensor.h"
#include "engine/cpu/quantized_kernel.h"

namespace linserve {
namespace {

constexpr WeightQuantization kKinds[] = {WeightQuantization::kInt8, WeightQuantization::kInt4};

// y from the portable loop called directly, the activations quantized by
// the plain loop: what QuantizedLinear must give on any CPU.
torch::Tensor PortableProduct(const torch::Tensor& x, const QuantizedWeight& w,
                              QuantizedEpilogue epilogue) {
  const QuantizedShape& shape = w.shape;
  const torch::Tensor inputs = x.to(torch::kFloat32).contiguous().view({-1, shape.in});
  const int64_t rows = inputs.size(0);
  std::vector<int8_t> xq(rows * shape.padded_in());
  std::vector<float> xs(rows * shape.groups());
  std::vector<int32_t> xsum(rows * shape.groups());
  QuantizeActivations(shape, inputs.data_ptr<float>(), shape.in, rows, xq.data(), xs.data(),
                      xsum.data());
  torch::Tensor y = torch::empty({rows, shape.out}, torch::kFloat32);
  QuantizedProductArgs args;
  args.shape = shape;
  args.codes = w.codes.data_ptr<uint8_t>();
  args.scales = reinterpret_cast<const uint16_t*>(w.scales.data_ptr<int16_t>());
  args.x = {xq.data(), xs.data(), xsum.data()};
  args.rows = rows;
  args.y = y.data_ptr<float>();
  args.y_stride = shape.out;
  args.epilogue = epilogue;
  QuantizedProductPortable(args, 0, shape.panels());
  std::vector<int64_t> y_shape = x.sizes().vec();
  y_shape.back() = shape.out;
  return y.view(y_shape);
}

TEST(QuantizedLinearTest, FamilyInForce) {
  const char* forced = std::getenv("LINSERVE_CPU_KERNELS");
  if (forced != nullptr && std::strcmp(forced, "portable") == 0) {
    EXPECT_FALSE(QuantizedProductUsesVnni());
  } else {
    EXPECT_EQ(QuantizedProductUsesVnni(), ActiveCpuHasAvx512() &&
                                              __builtin_cpu_supports("avx512vnni"));
  }
  std::printf("quantized product: %s loop\n", QuantizedProductUsesVnni() ? "VNNI" : "portable");
}

TEST(QuantizedLinearTest, EqualsThePortableLoopCalledDirectly) {
  torch::manual_seed(1);
  for (WeightQuantization kind : kKinds) {
    for (int64_t group : {32, 64}) {
      for (const auto& [out, in] :
           {std::pair<int64_t, int64_t>{37, 100}, {768, 768}, {200, 1000}}) {
        const QuantizedWeight w = QuantizeWeight(torch::randn({out, in}), kind, group);
        ASSERT_EQ(CheckQuantizedWeight(w), "");
        for (int64_t rows : {1, 3, 64, 130}) {
          const torch::Tensor x = torch::randn({rows, in});
          for (QuantizedEpilogue epilogue :
               {QuantizedEpilogue::kNone, QuantizedEpilogue::kReluSquared}) {
            EXPECT_TRUE(torch::equal(QuantizedLinear(x, w, epilogue),
                                     PortableProduct(x, w, epilogue)))
                << WeightQuantizationName(kind) << " g" << group << " " << out << "x" << in
                << " rows " << rows;
          }
        }
      }
    }
  }
}

TEST(QuantizedLinearTest, ShapesAndDtypes) {
  torch::manual_seed(2);
  const QuantizedWeight w = QuantizeWeight(torch::randn({48, 70}), WeightQuantization::kInt8, 32);
  const torch::Tensor x = torch::randn({2, 5, 70});
  const torch::Tensor y = QuantizedLinear(x, w);
  ASSERT_EQ(y.sizes(), torch::IntArrayRef({2, 5, 48}));
  EXPECT_EQ(y.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(y.view({10, 48}), QuantizedLinear(x.view({10, 70}), w)));
  // Other dtypes are taken as float32.
  const torch::Tensor half = x.to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(QuantizedLinear(half, w), QuantizedLinear(half.to(torch::kFloat32), w)));
  // A non-contiguous x.
  const torch::Tensor wide = torch::randn({10, 140});
  EXPECT_TRUE(torch::equal(QuantizedLinear(wide.narrow(1, 0, 70), w),
                           QuantizedLinear(wide.narrow(1, 0, 70).contiguous(), w)));
  EXPECT_EQ(QuantizedLinear(torch::zeros({0, 70}), w).sizes(), torch::IntArrayRef({0, 48}));
  EXPECT_THROW(QuantizedLinear(torch::zeros({3, 69}), w), c10::Error);
  EXPECT_THROW(QuantizedLinear(torch::zeros({3, 70}), QuantizedWeight{}), c10::Error);
}

// docs/DESIGN.md, "What is bit-identical": a row alone, in any batch, on any
// number of threads.
TEST(QuantizedLinearTest, RowsAndThreadsChangeNoBits) {
  torch::manual_seed(3);
  for (WeightQuantization kind : kKinds) {
    const QuantizedWeight w = QuantizeWeight(torch::randn({400, 768}), kind, 64);
    const torch::Tensor x = torch::randn({300, 768});
    const int threads = EngineThreads();
    SetEngineThreads(1);
    const torch::Tensor one_thread = QuantizedLinear(x, w, QuantizedEpilogue::kReluSquared);
    SetEngineThreads(4);
    const torch::Tensor four_threads = QuantizedLinear(x, w, QuantizedEpilogue::kReluSquared);
    EXPECT_TRUE(torch::equal(one_thread, four_threads));
    for (int64_t first : {0, 1, 63, 64, 65, 200}) {
      for (int64_t count : {1, 2, 3, 4, 5, 17, 64, 65, 99}) {
        if (first + count > x.size(0)) continue;
        const torch::Tensor part =
            QuantizedLinear(x.narrow(0, first, count), w, QuantizedEpilogue::kReluSquared);
        EXPECT_TRUE(torch::equal(part, one_thread.narrow(0, first, count)))
            << WeightQuantizationName(kind) << " rows " << first << " + " << count;
      }
    }
    SetEngineThreads(threads);
  }
}

TEST(QuantizedLinearTest, CloseToTheFloatProduct) {
  torch::manual_seed(4);
  const torch::Tensor weight = torch::randn({256, 512});
  const torch::Tensor x = torch::randn({8, 512});
  const torch::Tensor exact = torch::matmul(x, weight.t());
  const double scale = exact.abs().max().item<double>();
  for (WeightQuantization kind : kKinds) {
    const torch::Tensor got = QuantizedLinear(x, QuantizeWeight(weight, kind, 32));
    const double limit = kind == WeightQuantization::kInt4 ? 0.25 : 0.03;
    EXPECT_LT((got - exact).abs().max().item<double>(), limit * scale)
        << WeightQuantizationName(kind);
  }
}

TEST(QuantizedWeightTest, DequantizedWithinHalfAStep) {
  torch::manual_seed(5);
  // bfloat16, as a checkpoint may hold it: quantized from its own values.
  const torch::Tensor weight = torch::randn({37, 100}).to(torch::kBFloat16).to(torch::kFloat32);
  for (WeightQuantization kind : kKinds) {
    for (int64_t group : {32, 64}) {
      const QuantizedWeight w = QuantizeWeight(weight.to(torch::kBFloat16), kind, group);
      const torch::Tensor back = DequantizeWeight(w);
      ASSERT_EQ(back.sizes(), weight.sizes());
      // Per element within a step of its group (half a step but for int4's
      // clamped +8); the kernel test checks the exact bounds.
      const torch::Tensor scales = w.scales.view(torch::kInt16);
      double worst = 0.0;
      for (int64_t o = 0; o < 37; ++o) {
        for (int64_t k = 0; k < 100; ++k) {
          const uint16_t bits = static_cast<uint16_t>(
              scales[o / 16][k / group][o % 16].item<int16_t>());
          const double s = std::fabs(HalfToFloat(bits));
          const double error = std::fabs(back[o][k].item<float>() - weight[o][k].item<float>());
          EXPECT_LE(error, s * 1.0001) << o << " " << k;
          worst = std::max(worst, error / s);
        }
      }
      EXPECT_GT(worst, 0.2);  // not trivially exact
    }
  }
}

TEST(QuantizedWeightTest, RowsAreRowsOfTheWholeMatrix) {
  torch::manual_seed(6);
  for (WeightQuantization kind : kKinds) {
    const QuantizedWeight w = QuantizeWeight(torch::randn({50, 70}), kind, 32);
    const torch::Tensor whole = DequantizeWeight(w);
    const torch::Tensor ids = torch::tensor({{0, 49, 17}, {16, 15, 16}}, torch::kInt64);
    const torch::Tensor rows = DequantizeRows(w, ids);
    ASSERT_EQ(rows.sizes(), torch::IntArrayRef({2, 3, 70}));
    EXPECT_TRUE(torch::equal(rows, whole.index_select(0, ids.view({-1})).view({2, 3, 70})));
    EXPECT_THROW(DequantizeRows(w, torch::tensor({50}, torch::kInt64)), c10::Error);
    EXPECT_THROW(DequantizeRows(w, torch::tensor({-1}, torch::kInt64)), c10::Error);
  }
}

TEST(QuantizedWeightTest, ArenaPiecesAndBytes) {
  const QuantizedShape a{768, 768, 64, WeightQuantization::kInt8};
  const QuantizedShape b{100, 33, 32, WeightQuantization::kInt4};
  HugePageArena arena({QuantizedArenaBytes(a), QuantizedArenaBytes(b)});
  const QuantizedWeight wa = QuantizeWeight(torch::randn({768, 768}), a.kind, a.group, &arena);
  const QuantizedWeight wb = QuantizeWeight(torch::randn({100, 33}), b.kind, b.group, &arena);
  EXPECT_EQ(CheckQuantizedWeight(wa), "");
  EXPECT_EQ(CheckQuantizedWeight(wb), "");
  EXPECT_EQ(wa.bytes(), a.code_bytes() + 2 * a.scale_count());
  EXPECT_EQ(wb.bytes(), b.code_bytes() + 2 * b.scale_count());
  EXPECT_THROW(QuantizeWeight(torch::randn({16, 16}), b.kind, b.group, &arena), c10::Error);
  EXPECT_EQ(QuantizedWeight{}.bytes(), 0);
}

TEST(QuantizedWeightTest, RefusesNonFiniteWeightsAndBadShapes) {
  for (WeightQuantization kind : kKinds) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity()}) {
      torch::Tensor weight = torch::randn({20, 40});
      weight[19][39] = bad;
      EXPECT_THROW(QuantizeWeight(weight, kind, 32), c10::Error);
    }
  }
  EXPECT_THROW(QuantizeWeight(torch::randn({20, 40}), WeightQuantization::kInt8, 16), c10::Error);
  EXPECT_THROW(QuantizeWeight(torch::randn({20, 40}), WeightQuantization::kNone, 32), c10::Error);
  EXPECT_THROW(QuantizeWeight(torch::randn({20}), WeightQuantization::kInt8, 32), c10::Error);
  EXPECT_THROW(QuantizeWeight(torch::randn({20, 40}).to(torch::kInt32), WeightQuantization::kInt8,
                              32),
               c10::Error);
}

TEST(QuantizedWeightTest, CheckNamesWhatIsWrong) {
  const QuantizedWeight good =
      QuantizeWeight(torch::randn({40, 70}), WeightQuantization::kInt4, 32);
  ASSERT_EQ(CheckQuantizedWeight(good), "");
  auto problem = [&](auto change) {
    QuantizedWeight w;
    w.shape = good.shape;
    w.codes = good.codes.clone();
    w.scales = good.scales.clone();
    change(w);
    return CheckQuantizedWeight(w);
  };
  EXPECT_NE(
      problem([](QuantizedWeight& w) { w.codes = w.codes.narrow(0, 1, w.codes.numel() - 1); }), "");
  EXPECT_NE(problem([](QuantizedWeight& w) { w.codes = torch::cat({w.codes, w.codes}); }), "");
  EXPECT_NE(problem([](QuantizedWeight& w) { w.codes = w.codes.to(torch::kInt8); }), "");
  EXPECT_NE(problem([](QuantizedWeight& w) { w.scales = w.scales.to(torch::kFloat16); }), "");
  EXPECT_NE(problem([](QuantizedWeight& w) { w.scales = w.scales.view({-1}); }), "");
  EXPECT_NE(problem([](QuantizedWeight& w) { w.scales = w.scales.transpose(0, 1); }), "");
  EXPECT_NE(problem([](QuantizedWeight& w) { w.codes = torch::Tensor(); }), "");
  EXPECT_NE(problem([](QuantizedWeight& w) { w.shape.group = 48; }), "");
  EXPECT_NE(problem([](QuantizedWeight& w) { w.shape.kind = WeightQuantization::kInt8; }), "");
  for (uint16_t bad : {0x7C00, 0xFC00, 0x7E00}) {
    const std::string message = problem([bad](QuantizedWeight& w) {
      w.scales.view({-1})[5] = static_cast<int16_t>(bad);
    });
    EXPECT_NE(message.find("not finite"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace linserve

#include "bench/quantized_product_measure.h"

#include <torch/types.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_table.h"
#include "bench/engine_measure.h"
#include "engine/cpu/cpu_bf16_product.h"
#include "engine/cpu/quantized_linear.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

const std::pair<int64_t, int64_t> kMatrices[] = {
    {768, 768}, {3072, 768}, {768, 3072}, {65536, 768}};
constexpr int64_t kRowCounts[] = {1, 32, 1024};
constexpr WeightQuantization kKinds[] = {WeightQuantization::kInt8, WeightQuantization::kInt4};
constexpr int64_t kGroups[] = {32, 64};

// Median seconds of `repeats` calls after one not timed (which warms the
// caches and the allocator).
template <class Fn>
double MedianSeconds(int32_t repeats, Fn fn) {
  const c10::Device cpu(c10::kCPU);
  fn();
  std::vector<double> seconds;
  for (int32_t i = 0; i < repeats; ++i) seconds.push_back(TimeSeconds(cpu, fn));
  return Median(std::move(seconds));
}

double Gflops(const QuantizedProductRow& row) {
  return 2.0 * row.rows * row.out * row.in / row.seconds / 1e9;
}

double GigabytesPerSecond(const QuantizedProductRow& row) {
  return row.weight_bytes / row.seconds / 1e9;
}

}  // namespace

std::vector<QuantizedProductRow> MeasureQuantizedProducts(int32_t repeats, bool quick) {
  torch::NoGradGuard no_grad;
  std::vector<QuantizedProductRow> rows;
  for (const auto& [out, in] : kMatrices) {
    if (quick && out != 768) continue;
    std::cerr << "quantized products " << out << "x" << in << std::endl;
    const torch::Tensor weight = torch::randn({out, in}) / std::sqrt(static_cast<double>(in));
    // Laid out once, as a model's weights are at load.
    torch::Tensor packed;
    if (HasCpuBf16Product()) packed = PackBf16(weight.to(torch::kBFloat16));
    std::vector<std::pair<std::string, QuantizedWeight>> quantized;
    for (WeightQuantization kind : kKinds) {
      for (int64_t group : kGroups) {
        quantized.emplace_back(absl::StrCat(WeightQuantizationName(kind), " g", group),
                               QuantizeWeight(weight, kind, group));
      }
    }
    for (int64_t count : kRowCounts) {
      if (quick && count > 32) continue;
      const torch::Tensor x = torch::randn({count, in});
      if (packed.defined()) {
        rows.push_back({out, in, count, "bfloat16", out * in * 2,
                        MedianSeconds(repeats, [&] { PackedBf16Product(packed, x); })});
      }
      for (const auto& entry : quantized) {
        const QuantizedWeight& w = entry.second;
        rows.push_back({out, in, count, entry.first, w.bytes(),
                        MedianSeconds(repeats, [&] { QuantizedLinear(x, w); })});
      }
    }
  }
  return rows;
}

void PrintQuantizedProducts(const std::vector<QuantizedProductRow>& rows, int32_t repeats) {
  absl::PrintF(
      "9. Quantized products: x W^T of 8- and 4-bit weights (%s loop; groups of 32 or 64 inputs, "
      "one half scale each) beside the packed bfloat16 product, random weights; median of %d "
      "products, %d torch thread(s)\n",
      QuantizedProductUsesVnni() ? "AVX-512 VNNI" : "portable", repeats, torch::get_num_threads());
  Table table({"matrix", "rows", "format", "weight", "us", "GFLOP/s", "GB/s", "vs bfloat16"});
  // Each matrix and row count comes bfloat16 first (where measured).
  double bf16_seconds = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const QuantizedProductRow& row = rows[i];
    if (i == 0 || row.out != rows[i - 1].out || row.in != rows[i - 1].in ||
        row.rows != rows[i - 1].rows) {
      bf16_seconds = 0;
    }
    if (row.format == "bfloat16") bf16_seconds = row.seconds;
    const bool beside = row.format != "bfloat16" && bf16_seconds > 0;
    table.Add({absl::StrCat(row.out, "x", row.in), absl::StrCat(row.rows), row.format,
               Bytes(row.weight_bytes), absl::StrFormat("%.1f", row.seconds * 1e6),
               absl::StrFormat("%.1f", Gflops(row)),
               absl::StrFormat("%.1f", GigabytesPerSecond(row)),
               beside ? Ratio(bf16_seconds, row.seconds) : std::string("-")});
  }
  table.Print();
  absl::PrintF(
      "   GB/s: the weight's bytes as stored (codes and scales) per product; vs bfloat16: its "
      "time over this row's (above 1: faster). A matrix that fits the caches streams from them, "
      "not from memory\n\n");
}

nlohmann::json QuantizedProductsJson(const std::vector<QuantizedProductRow>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const QuantizedProductRow& row : rows) {
    j.push_back({{"out", row.out},
                 {"in", row.in},
                 {"rows", row.rows},
                 {"format", row.format},
                 {"weight_bytes", row.weight_bytes},
                 {"seconds", row.seconds},
                 {"gflops", Gflops(row)},
                 {"gb_per_s", GigabytesPerSecond(row)}});
  }
  return j;
}

}  // namespace linserve

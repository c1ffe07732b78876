// linserve-product-bench: the fixed-order product (engine/cpu/fixed_order_product.h)
// against the BLAS it replaced, side by side in one run, at the shapes the
// models multiply: the default model's and the 0.1B RWKV-7 shape's
// projections, at decode batches of 1 and 32 and at prefill calls of 64 and
// 512 rows. Three ways to get a product whose rows do not depend on the rows
// around them are compared (docs/DESIGN.md, "What is bit-identical"):
//   fixed    the fixed-order product over the weight packed beforehand (as a
//            model's weights are at load), any rows in one call;
//   blas     torch::linear in one call (what prefill ran before; its bits
//            depend on the row count under OpenBLAS's Haswell kernels);
//   chunked  torch::linear in calls of exactly 64 rows, the other way to
//            shape every run's calls alike (a prefill chunk of the shipped
//            model), which still depends on the BLAS giving equal calls
//            equal bits;
//   mv       for one row, torch::mv (OpenBLAS's sgemv).
// Medians of --repeats; the ratios are against `fixed`.
//
// Where the AMX family is in force, a second table sets the packed bfloat16
// product's two loops side by side (engine/cpu/cpu_bf16_product.h): AMX
// tiles against AVX-512 BF16, at decode's rows (1), a few tiles' (16, 32,
// 64) and a prefill's (1,024), with the tile unit's own peak (a loop on
// resident tiles, measured in the same run) and each AMX rate's share of it.
//
//   OPENBLAS_NUM_THREADS=1 linserve-product-bench [--repeats=N] [--threads=N]

#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_table.h"
#include "bench/engine_measure.h"
#include "engine/cpu/amx_kernel.h"
#include "engine/cpu/cpu_bf16_product.h"
#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/engine_threads.h"
#include "engine/cpu/fixed_order_product.h"

ABSL_FLAG(int32_t, repeats, 21, "timed repeats of each product (the median is printed)");
ABSL_FLAG(int32_t, threads, 1, "the engine pool's threads (LibTorch's own stay at one)");

namespace linserve {
namespace {

struct Shape {
  const char* name;
  int64_t out;
  int64_t in;
};

// The default model's (d 256, MLP 512, vocabulary 258) and the 0.1B RWKV-7
// shape's (C 768, F 3072, a 64-wide low-rank, vocabulary 65,536) products.
const Shape kShapes[] = {
    {"default qkv 768x256", 768, 256},   {"default mlp 512x256", 512, 256},
    {"default proj 256x512", 256, 512},  {"default head 258x256", 258, 256},
    {"rwkv 0.1b C 768x768", 768, 768},
    {"rwkv 0.1b ffn 3072x768", 3072, 768}, {"rwkv 0.1b ffn 768x3072", 768, 3072},
    {"rwkv 0.1b lora 768x64", 768, 64},   {"rwkv 0.1b head 65536x768", 65536, 768},
};

double MedianSeconds(int repeats, const std::function<void()>& run) {
  run();  // warm the caches and the allocator
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

std::string Micros(double seconds) { return absl::StrFormat("%.1f", seconds * 1e6); }

std::string Rate(double flops, double seconds) {
  return absl::StrFormat("%.1f", flops / seconds / 1e9);
}

// The bfloat16 product's AMX and AVX-512 loops side by side.
void PrintBf16Loops(int repeats) {
  const double peak = AmxBf16PeakGflops(0.5);
  absl::PrintF(
      "\nbfloat16 packed product: AMX tiles against AVX-512 BF16, median microseconds;\n"
      "AMX tile peak on this core (resident tiles): %.1f GFLOP/s\n",
      peak);
  Table table({"shape", "rows", "amx", "avx512", "avx512/amx", "amx GFLOP/s", "avx512 GFLOP/s",
               "amx / peak"});
  for (const Shape& shape :
       {Shape{"rwkv 0.1b C 768x768", 768, 768}, Shape{"rwkv 0.1b ffn 3072x768", 3072, 768},
        Shape{"rwkv 0.1b head 65536x768", 65536, 768}}) {
    const torch::Tensor packed = PackBf16(torch::randn({shape.out, shape.in}).to(torch::kBFloat16));
    for (int64_t rows : {1, 16, 32, 64, 1024}) {
      const torch::Tensor x = torch::randn({rows, shape.in});
      const double amx =
          MedianSeconds(repeats, [&] { PackedBf16ProductWith(Bf16Loop::kAmx, packed, x); });
      const double avx512 =
          MedianSeconds(repeats, [&] { PackedBf16ProductWith(Bf16Loop::kAvx512, packed, x); });
      const double flops = 2.0 * rows * shape.out * shape.in;
      table.Add({shape.name, absl::StrCat(rows), Micros(amx), Micros(avx512), Ratio(avx512, amx),
                 Rate(flops, amx), Rate(flops, avx512),
                 absl::StrFormat("%.2f", flops / amx / 1e9 / peak)});
    }
  }
  table.Print();
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  using namespace linserve;
  absl::ParseCommandLine(argc, argv);
  torch::NoGradGuard no_grad;
  torch::set_num_threads(1);
  SetEngineThreads(absl::GetFlag(FLAGS_threads));
  const int repeats = absl::GetFlag(FLAGS_repeats);
  torch::linear(torch::ones({64, 64}), torch::ones({64, 64}));  // maps the BLAS
  const MachineInfo machine = ReadMachineInfo("cpu");
  absl::PrintF("linserve product benchmark, %s\n", machine.date);
  absl::PrintF("machine: %d cores, %s; %d engine thread(s)\n", machine.cores,
               machine.cpu_model, absl::GetFlag(FLAGS_threads));
  absl::PrintF("BLAS: OpenBLAS kernels %s; fixed-order family %s\n\n",
               machine.openblas_core.empty() ? "(none)" : machine.openblas_core,
               CpuKernelsName(ActiveCpuKernels()));
  absl::PrintF("Median microseconds per product (float32 weights); ratio = other / fixed\n");
  Table table({"shape", "rows", "fixed", "blas", "chunked", "mv", "blas/fixed", "chunked/fixed",
               "mv/fixed", "fixed GFLOP/s"});
  for (const Shape& shape : kShapes) {
    const torch::Tensor weight = torch::randn({shape.out, shape.in});
    // Laid out once, as a model's weights are at load.
    const torch::Tensor packed = PackFixedOrder(weight);
    for (int64_t rows : {1, 32, 64, 512}) {
      // The head only decodes (its prefill call is the last row's).
      if (shape.out == 65536 && rows > 32) continue;
      const torch::Tensor x = torch::randn({rows, shape.in});
      const double fixed =
          MedianSeconds(repeats, [&] { FixedOrderPackedLinear(x, packed, shape.out); });
      const double blas = MedianSeconds(repeats, [&] { torch::linear(x, weight); });
      double chunked = -1, mv = -1;
      if (rows >= 64) {
        chunked = MedianSeconds(repeats, [&] {
          for (int64_t r = 0; r < rows; r += 64) torch::linear(x.narrow(0, r, 64), weight);
        });
      }
      if (rows == 1) mv = MedianSeconds(repeats, [&] { torch::mv(weight, x[0]); });
      const double flops = 2.0 * rows * shape.out * shape.in;
      auto ratio = [&](double other) { return other < 0 ? std::string("-") : Ratio(other, fixed); };
      table.Add({shape.name, absl::StrCat(rows), Micros(fixed), Micros(blas),
                 chunked < 0 ? "-" : Micros(chunked), mv < 0 ? "-" : Micros(mv),
                 ratio(blas), ratio(chunked), ratio(mv),
                 absl::StrFormat("%.1f", flops / fixed / 1e9)});
    }
  }
  table.Print();
  if (ActiveCpuHasAmx()) PrintBf16Loops(repeats);
  return 0;
}

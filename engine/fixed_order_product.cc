#include "engine/fixed_order_product.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "engine/cpu_kernels.h"
#include "engine/fixed_order_kernel.h"

namespace linserve {
namespace {

// Multiply-adds per task of the parallel loop: about 10 us of work, so that
// a task's start costs nothing beside it.
constexpr int64_t kMultiplyAddsPerTask = int64_t{1} << 20;

// Outputs per task unit: a multiple of every family's tile width, so that
// how the outputs are split over threads never changes a tile's shape (the
// bits would not change either; the speed would).
constexpr int64_t kOutputsPerUnit = 16;

using ProductFn = void (*)(const FixedOrderArgs&, int64_t, int64_t);

ProductFn Family() {
  switch (ActiveCpuKernels()) {
    case CpuKernels::kAvx512: return &FixedOrderProductAvx512;
    case CpuKernels::kAvx2: return &FixedOrderProductAvx2;
    case CpuKernels::kPortable: return &FixedOrderProductPortable;
  }
  return &FixedOrderProductPortable;
}

// y (G, rows, out) = x (G, rows, in) w (G, out, in)^T, every tensor
// contiguous; the groups and output units split over LibTorch's threads.
void RunGroups(const torch::Tensor& x, const torch::Tensor& w, torch::Tensor& y) {
  const int64_t groups = x.size(0), rows = x.size(1), in = x.size(2), out = w.size(1);
  if (rows == 0 || out == 0 || groups == 0) return;
  if (in == 0) {
    y.zero_();
    return;
  }
  static const ProductFn product = Family();
  const bool bf16 = w.scalar_type() == torch::kBFloat16;
  const float* x_p = x.data_ptr<float>();
  const char* w_p = static_cast<const char*>(w.data_ptr());
  const int64_t w_bytes = w.element_size();
  float* y_p = y.data_ptr<float>();
  const int64_t units_per_group = (out + kOutputsPerUnit - 1) / kOutputsPerUnit;
  const int64_t grain = std::max<int64_t>(
      1, kMultiplyAddsPerTask / std::max<int64_t>(1, rows * in * kOutputsPerUnit));
  at::parallel_for(0, groups * units_per_group, grain, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end;) {
      // A run of units within one group in one call.
      const int64_t g = unit / units_per_group;
      const int64_t group_end = std::min(end, (g + 1) * units_per_group);
      FixedOrderArgs args;
      args.x = x_p + g * rows * in;
      args.x_stride = in;
      args.w = w_p + g * out * in * w_bytes;
      args.w_bf16 = bf16;
      args.w_stride = in;
      args.y = y_p + g * rows * out;
      args.y_stride = out;
      args.rows = rows;
      args.out = out;
      args.in = in;
      const int64_t first = (unit - g * units_per_group) * kOutputsPerUnit;
      const int64_t last = std::min(out, (group_end - g * units_per_group) * kOutputsPerUnit);
      product(args, first, last);
      unit = group_end;
    }
  });
}

void CheckWeight(const torch::Tensor& weight, int64_t dim, const char* what) {
  TORCH_CHECK(weight.dim() == dim && weight.is_cpu() &&
                  (weight.scalar_type() == torch::kFloat32 ||
                   weight.scalar_type() == torch::kBFloat16),
              what, ": a float32 or bfloat16 CPU weight of ", dim, " dimensions, got ",
              weight.sizes(), " ", weight.scalar_type());
}

torch::Tensor AsFloatInputs(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cpu() && x.is_floating_point(), "fixed-order product: a floating CPU x");
  return x.scalar_type() == torch::kFloat32 ? x.contiguous() : x.to(torch::kFloat32).contiguous();
}

}  // namespace

bool CanUseFixedOrder(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!x.is_cpu() || !weight.is_cpu() || !x.is_floating_point()) return false;
  if (weight.scalar_type() != torch::kFloat32 && weight.scalar_type() != torch::kBFloat16) {
    return false;
  }
  return !(torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()));
}

torch::Tensor FixedOrderLinear(const torch::Tensor& x, const torch::Tensor& weight) {
  CheckWeight(weight, 2, "FixedOrderLinear");
  const int64_t in = weight.size(1), out = weight.size(0);
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == in, "FixedOrderLinear: x ", x.sizes(), " for ", in,
              " inputs");
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  const torch::Tensor inputs = AsFloatInputs(x);
  torch::Tensor y = torch::empty(shape, torch::kFloat32);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  torch::Tensor y_view = y.view({1, rows, out});
  RunGroups(inputs.view({1, rows, in}), weight.contiguous().unsqueeze(0), y_view);
  return y;
}

torch::Tensor FixedOrderGroupLinear(const torch::Tensor& x, const torch::Tensor& weight) {
  CheckWeight(weight, 3, "FixedOrderGroupLinear");
  TORCH_CHECK(x.dim() == 3 && x.size(0) == weight.size(0) && x.size(2) == weight.size(2),
              "FixedOrderGroupLinear: x ", x.sizes(), " for weight ", weight.sizes());
  const torch::Tensor inputs = AsFloatInputs(x);
  torch::Tensor y = torch::empty({x.size(0), x.size(1), weight.size(1)}, torch::kFloat32);
  RunGroups(inputs, weight.contiguous(), y);
  return y;
}

}  // namespace linserve

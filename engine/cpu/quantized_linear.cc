#include "engine/cpu/quantized_linear.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/engine_threads.h"
#include "engine/cpu/huge_page_tensor.h"
#include "engine/cpu/product_spans.h"
#include "engine/cpu/quantized_kernel.h"

namespace linserve {
namespace {

constexpr int64_t kPanel = 16;

// Multiply-adds per span of the pool: about 10 us of work at the VNNI
// loop's rate, so that a span's start costs nothing beside it.
constexpr int64_t kMultiplyAddsPerSpan = int64_t{4} << 20;

// Panels per task unit: a multiple of both VNNI tile widths (3 panels, and
// 4 for one row), so that how the panels are split over threads never
// changes a tile's shape (the bits would not change either; the speed
// would).
constexpr int64_t kPanelsPerUnit = 12;

// Rows per task unit of a long call: prefill's rows are split over threads
// too, so that a matrix of few panels (768 outputs: 4 units) still keeps
// every thread busy. A multiple of the 4-row tile.
constexpr int64_t kRowsPerUnit = 64;

// Values per task of the activation quantization and of the weight
// quantization.
constexpr int64_t kValuesPerTask = int64_t{64} << 10;

using ProductFn = void (*)(const QuantizedProductArgs&, int64_t, int64_t);
using ActivationFn = void (*)(const QuantizedShape&, const float*, int64_t, int64_t, int8_t*,
                              float*, int32_t*);

// Rows of x: every dimension but the last.
int64_t Rows(const torch::Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

const uint8_t* CodesOf(const QuantizedWeight& w) { return w.codes.data_ptr<uint8_t>(); }

const uint16_t* ScalesOf(const QuantizedWeight& w) {
  return reinterpret_cast<const uint16_t*>(w.scales.data_ptr<int16_t>());
}

void CheckOrThrow(const QuantizedWeight& weight, const char* what) {
  const std::string problem = CheckQuantizedWeight(weight);
  TORCH_CHECK(problem.empty(), what, ": ", problem);
}

// Output `o`'s row of the matrix, dequantized into `to` (shape.in floats).
void DequantizeRow(const QuantizedWeight& weight, int64_t o, float* to) {
  const uint8_t* codes = CodesOf(weight);
  const uint16_t* scales = ScalesOf(weight);
  for (int64_t k = 0; k < weight.shape.in; ++k) {
    to[k] = DequantizedWeight(weight.shape, codes, scales, o, k);
  }
}

}  // namespace

int64_t QuantizedWeight::bytes() const {
  if (!defined()) return 0;
  return codes.numel() * codes.element_size() +
         (scales.defined() ? scales.numel() * scales.element_size() : 0);
}

bool QuantizedProductUsesVnni() { return ActiveCpuHasAvx512Vnni(); }

int64_t QuantizedArenaBytes(const QuantizedShape& shape) {
  return HugePageArena::Rounded(shape.code_bytes()) +
         HugePageArena::Rounded(shape.scale_count() * static_cast<int64_t>(sizeof(uint16_t)));
}

QuantizedWeight QuantizeWeight(const torch::Tensor& weight, WeightQuantization kind, int64_t group,
                               HugePageArena* arena) {
  TORCH_CHECK(weight.dim() == 2 && weight.is_cpu() &&
                  (weight.scalar_type() == torch::kFloat32 ||
                   weight.scalar_type() == torch::kBFloat16 ||
                   weight.scalar_type() == torch::kFloat16),
              "QuantizeWeight: an (out, in) float32, bfloat16 or float16 CPU matrix, got ",
              weight.sizes(), " ", weight.scalar_type());
  QuantizedWeight q;
  q.shape = QuantizedShape{weight.size(0), weight.size(1), group, kind};
  TORCH_CHECK(IsValidQuantizedShape(q.shape), "QuantizeWeight: ", WeightQuantizationName(kind),
              " in groups of ", group, " for a ", weight.sizes(),
              " matrix (int8 or int4, groups of 32 or 64, no empty side)");
  torch::NoGradGuard no_grad;
  const torch::Tensor w = weight.to(torch::kFloat32).contiguous();
  const QuantizedShape& shape = q.shape;
  const std::vector<int64_t> scale_shape = {shape.panels(), shape.groups(), kPanel};
  if (arena != nullptr) {
    q.codes = arena->Take({shape.code_bytes()}, torch::kUInt8);
    q.scales = arena->Take(scale_shape, torch::kInt16);
  } else {
    q.codes = EmptyInHugePages({shape.code_bytes()}, torch::kUInt8);
    q.scales = torch::empty(scale_shape, torch::kInt16);
  }
  // Panels are independent pieces of the layout, each contiguous: quantized
  // on LibTorch's threads, each panel from its own 16 rows.
  const float* w_p = w.data_ptr<float>();
  uint8_t* codes = q.codes.data_ptr<uint8_t>();
  uint16_t* scales = reinterpret_cast<uint16_t*>(q.scales.data_ptr<int16_t>());
  const int64_t panel_bytes = shape.code_bytes() / shape.panels();
  const int64_t panel_scales = shape.groups() * kPanel;
  std::atomic<bool> finite{true};
  ParallelFor(shape.panels(),
                   std::max<int64_t>(1, kValuesPerTask / (kPanel * shape.padded_in())),
                   [&](int64_t begin, int64_t end) {
                     QuantizedShape part = shape;
                     part.out = std::min(shape.out, end * kPanel) - begin * kPanel;
                     if (!QuantizeWeights(part, w_p + begin * kPanel * shape.in, shape.in,
                                          codes + begin * panel_bytes,
                                          scales + begin * panel_scales)) {
                       finite = false;
                     }
                   });
  TORCH_CHECK(finite.load(),
              "QuantizeWeight: a NaN or Inf weight, or one too large for a half scale");
  return q;
}

torch::Tensor DequantizeWeight(const QuantizedWeight& weight) {
  CheckOrThrow(weight, "DequantizeWeight");
  torch::Tensor w = torch::empty({weight.shape.out, weight.shape.in}, torch::kFloat32);
  float* w_p = w.data_ptr<float>();
  for (int64_t o = 0; o < weight.shape.out; ++o) {
    DequantizeRow(weight, o, w_p + o * weight.shape.in);
  }
  return w;
}

torch::Tensor DequantizeRows(const QuantizedWeight& weight, const torch::Tensor& ids) {
  // The shape alone, as QuantizedLinear checks it: this runs for every
  // token's embedding, and CheckQuantizedWeight's scan of every scale (3 MB
  // at int4 for the 0.1B shape's table, 11% of a step) ran once at load.
  TORCH_CHECK(weight.defined() && IsValidQuantizedShape(weight.shape) &&
                  weight.codes.numel() == weight.shape.code_bytes() &&
                  weight.scales.numel() == weight.shape.scale_count(),
              "DequantizeRows: no quantized weight");
  TORCH_CHECK(ids.scalar_type() == torch::kInt64 && ids.is_cpu(),
              "DequantizeRows: int64 CPU ids, got ", ids.scalar_type());
  const torch::Tensor flat = ids.contiguous().view({-1});
  std::vector<int64_t> shape = ids.sizes().vec();
  shape.push_back(weight.shape.in);
  torch::Tensor rows = torch::empty(shape, torch::kFloat32);
  const int64_t* id = flat.data_ptr<int64_t>();
  float* to = rows.data_ptr<float>();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    TORCH_CHECK(id[i] >= 0 && id[i] < weight.shape.out, "DequantizeRows: id ", id[i],
                " outside [0, ", weight.shape.out, ")");
    DequantizeRow(weight, id[i], to + i * weight.shape.in);
  }
  return rows;
}

std::string CheckQuantizedWeight(const QuantizedWeight& weight) {
  const QuantizedShape& shape = weight.shape;
  if (!IsValidQuantizedShape(shape)) {
    return "not an int8 or int4 shape with groups of 32 or 64 and no empty side";
  }
  if (!weight.codes.defined() || !weight.scales.defined()) return "codes or scales missing";
  if (!weight.codes.is_cpu() || weight.codes.scalar_type() != torch::kUInt8 ||
      !weight.codes.is_contiguous() || weight.codes.dim() != 1 ||
      weight.codes.numel() != shape.code_bytes()) {
    return "codes must be " + std::to_string(shape.code_bytes()) +
           " contiguous uint8 values on the CPU";
  }
  const std::vector<int64_t> scale_shape = {shape.panels(), shape.groups(), kPanel};
  if (!weight.scales.is_cpu() || weight.scales.scalar_type() != torch::kInt16 ||
      !weight.scales.is_contiguous() || weight.scales.sizes() != torch::IntArrayRef(scale_shape)) {
    return "scales must be a contiguous int16 CPU tensor of (" + std::to_string(scale_shape[0]) +
           ", " + std::to_string(scale_shape[1]) + ", 16)";
  }
  const uint16_t* scales = ScalesOf(weight);
  for (int64_t i = 0; i < weight.scales.numel(); ++i) {
    if ((scales[i] & 0x7C00u) == 0x7C00u) {
      return "scale " + std::to_string(i) + " is not finite";
    }
  }
  return "";
}

torch::Tensor QuantizedLinear(const torch::Tensor& x, const QuantizedWeight& weight,
                              QuantizedEpilogue epilogue) {
  TORCH_CHECK(weight.defined() && IsValidQuantizedShape(weight.shape),
              "QuantizedLinear: no quantized weight");
  const QuantizedShape& shape = weight.shape;
  TORCH_CHECK(x.is_cpu() && x.is_floating_point() && x.dim() >= 1 && x.size(-1) == shape.in,
              "QuantizedLinear: a floating CPU x of ", shape.in, " inputs, got ", x.sizes());
  std::vector<int64_t> y_shape = x.sizes().vec();
  y_shape.back() = shape.out;
  torch::Tensor y = torch::empty(y_shape, torch::kFloat32);
  const int64_t rows = Rows(x);
  if (rows == 0) return y;
  const torch::Tensor inputs =
      x.scalar_type() == torch::kFloat32 ? x.contiguous() : x.to(torch::kFloat32).contiguous();
  static const bool vnni = QuantizedProductUsesVnni();
  const ProductFn product = vnni ? &QuantizedProductVnni : &QuantizedProductPortable;
  const ActivationFn quantize = vnni ? &QuantizeActivationsVnni : &QuantizeActivations;

  // The activations, quantized once for every panel: one buffer (a LibTorch
  // call costs about as much as a small matrix's product at one row).
  const int64_t groups = shape.groups(), padded_in = shape.padded_in();
  const int64_t xq_bytes = (rows * padded_in + 63) / 64 * 64;
  torch::Tensor scratch =
      torch::empty({xq_bytes + rows * groups * 8}, torch::TensorOptions(torch::kUInt8));
  auto* xq = reinterpret_cast<int8_t*>(scratch.data_ptr<uint8_t>());
  auto* xs = reinterpret_cast<float*>(scratch.data_ptr<uint8_t>() + xq_bytes);
  auto* xsum = reinterpret_cast<int32_t*>(xs + rows * groups);
  const float* x_p = inputs.data_ptr<float>();
  ParallelFor(rows, std::max<int64_t>(1, kValuesPerTask / padded_in),
                   [&](int64_t begin, int64_t end) {
                     quantize(shape, x_p + begin * shape.in, shape.in, end - begin,
                              xq + begin * padded_in, xs + begin * groups, xsum + begin * groups);
                   });

  // Tasks of (row block, panel unit). No output depends on how they are
  // cut: each is summed in the header's one order.
  const int64_t panels = shape.panels();
  const int64_t panel_units = (panels + kPanelsPerUnit - 1) / kPanelsPerUnit;
  const int64_t row_units = (rows + kRowsPerUnit - 1) / kRowsPerUnit;
  float* y_p = y.data_ptr<float>();
  auto run_units = [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end;) {
      // A run of panel units within one row block in one call.
      const int64_t row_unit = unit / panel_units;
      const int64_t run_end = std::min(end, (row_unit + 1) * panel_units);
      const int64_t first_row = row_unit * kRowsPerUnit;
      QuantizedProductArgs args;
      args.shape = shape;
      args.codes = CodesOf(weight);
      args.scales = ScalesOf(weight);
      args.x = {xq + first_row * padded_in, xs + first_row * groups, xsum + first_row * groups};
      args.rows = std::min(kRowsPerUnit, rows - first_row);
      args.y = y_p + first_row * shape.out;
      args.y_stride = shape.out;
      args.epilogue = epilogue;
      const int64_t first = (unit - row_unit * panel_units) * kPanelsPerUnit;
      const int64_t last = std::min(panels, (run_end - row_unit * panel_units) * kPanelsPerUnit);
      product(args, first, last);
      unit = run_end;
    }
  };
  const int64_t unit_multiply_adds =
      std::min(kRowsPerUnit, rows) * padded_in * kPanelsPerUnit * kPanel;
  const int64_t grain = ProductUnitsPerSpan(
      unit_multiply_adds, shape.code_bytes() / panels * kPanelsPerUnit, kMultiplyAddsPerSpan);
  const int64_t units = row_units * panel_units;
  if (units <= grain) {
    run_units(0, units);  // one task: no call into the thread pool
  } else {
    ParallelFor(units, grain, run_units);
  }
  return y;
}

}  // namespace linserve

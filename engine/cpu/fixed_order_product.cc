#include "engine/cpu/fixed_order_product.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <torch/types.h>
#include <torch/utils.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/engine_threads.h"
#include "engine/cpu/fixed_order_kernel.h"
#include "engine/cpu/product_spans.h"

namespace linserve {
namespace {

constexpr int64_t kPanel = 16;

// Multiply-adds per span of the pool: about 10 us of work, so that a span's
// start costs nothing beside it.
constexpr int64_t kMultiplyAddsPerSpan = int64_t{1} << 20;

// Panels per task unit: a multiple of every family's tile width, so that
// how the panels are split over threads never changes a tile's shape (the
// bits would not change either; the speed would).
constexpr int64_t kPanelsPerUnit = 4;

using ProductFn = void (*)(const FixedOrderArgs&, int64_t, int64_t);

ProductFn Family() {
  switch (ActiveCpuKernels()) {
    case CpuKernels::kAmx:
    case CpuKernels::kAvx512: return &FixedOrderProductAvx512;
    case CpuKernels::kAvx2: return &FixedOrderProductAvx2;
    case CpuKernels::kPortable: return &FixedOrderProductPortable;
  }
  return &FixedOrderProductPortable;
}

// Rows of x: every dimension but the last.
int64_t Rows(const torch::Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

torch::Tensor AsFloatInputs(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cpu() && x.is_floating_point(), "fixed-order product: a floating CPU x");
  return x.scalar_type() == torch::kFloat32 ? x.contiguous() : x.to(torch::kFloat32).contiguous();
}

void CheckWeightDtype(const torch::Tensor& w, const char* what) {
  TORCH_CHECK(w.is_cpu() && (w.scalar_type() == torch::kFloat32 ||
                             w.scalar_type() == torch::kBFloat16),
              what, ": a float32 or bfloat16 CPU weight, got ", w.scalar_type());
}

// The panels of one product, and G of them `group_stride` values apart.
struct Panels {
  const torch::Tensor* w;  // float32 or bfloat16, alive for the call
  int64_t panel_stride;
  int64_t k_stride;
  int64_t group_stride;
};

// y (G, rows, out) = x (G, rows, in) times the panels, x and y contiguous
// float32; the groups and panel units split over LibTorch's threads. Raw
// pointers rather than views: at decode's sizes each LibTorch call costs
// about as much as the product.
void Run(const float* x_p, int64_t groups, int64_t rows, int64_t in, const Panels& panels,
         int64_t out, float* y_p) {
  if (rows == 0 || out == 0 || groups == 0) return;
  if (in == 0) {
    std::fill(y_p, y_p + groups * rows * out, 0.0f);
    return;
  }
  static const ProductFn product = Family();
  const int64_t panel_count = (out + kPanel - 1) / kPanel;
  const int64_t units = (panel_count + kPanelsPerUnit - 1) / kPanelsPerUnit;
  const char* w_p = static_cast<const char*>(panels.w->data_ptr());
  const int64_t w_bytes = panels.w->element_size();
  const bool bf16 = panels.w->scalar_type() == torch::kBFloat16;
  auto run_units = [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end;) {
      // A run of units within one group in one call.
      const int64_t g = unit / units;
      const int64_t group_end = std::min(end, (g + 1) * units);
      FixedOrderArgs args;
      args.x = x_p + g * rows * in;
      args.x_stride = in;
      args.w = w_p + g * panels.group_stride * w_bytes;
      args.w_bf16 = bf16;
      args.panel_stride = panels.panel_stride;
      args.k_stride = panels.k_stride;
      args.y = y_p + g * rows * out;
      args.y_stride = out;
      args.rows = rows;
      args.out = out;
      args.in = in;
      const int64_t first = (unit - g * units) * kPanelsPerUnit;
      const int64_t last = std::min(panel_count, (group_end - g * units) * kPanelsPerUnit);
      product(args, first, last);
      unit = group_end;
    }
  };
  const int64_t grain = ProductUnitsPerSpan(rows * in * kPanelsPerUnit * kPanel,
                                            in * kPanelsPerUnit * kPanel * w_bytes,
                                            kMultiplyAddsPerSpan);
  if (groups * units <= grain) {
    run_units(0, groups * units);  // one task: no call into the thread pool
  } else {
    ParallelFor(groups * units, grain, run_units);
  }
}

// x (..., in) times one weight's panels: (..., out).
torch::Tensor OneProduct(const torch::Tensor& x, const Panels& panels, int64_t in, int64_t out) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == in, "fixed-order product: x ", x.sizes(), " for ",
              in, " inputs");
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  torch::Tensor y = torch::empty(shape, torch::kFloat32);
  const torch::Tensor inputs = AsFloatInputs(x);
  Run(inputs.data_ptr<float>(), 1, Rows(x), in, panels, out, y.data_ptr<float>());
  return y;
}

}  // namespace

bool CanUseFixedOrder(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!x.is_cpu() || !weight.is_cpu() || !x.is_floating_point()) return false;
  if (weight.scalar_type() != torch::kFloat32 && weight.scalar_type() != torch::kBFloat16) {
    return false;
  }
  return !(torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()));
}

std::vector<int64_t> PackedFixedOrderShape(int64_t out, int64_t in) {
  return {(out + kPanel - 1) / kPanel, in, kPanel};
}

torch::Tensor PackFixedOrder(const torch::Tensor& weight, torch::Tensor into) {
  CheckWeightDtype(weight, "PackFixedOrder");
  TORCH_CHECK(weight.dim() == 2, "PackFixedOrder: an (out, in) weight, got ", weight.sizes());
  torch::NoGradGuard no_grad;
  const int64_t out = weight.size(0), in = weight.size(1);
  const std::vector<int64_t> shape = PackedFixedOrderShape(out, in);
  if (!into.defined()) into = torch::empty(shape, weight.scalar_type());
  TORCH_CHECK(into.sizes() == torch::IntArrayRef(shape) && into.is_contiguous() &&
                  into.scalar_type() == weight.scalar_type(),
              "PackFixedOrder: `into` must be a contiguous ", weight.scalar_type(), " tensor of ",
              shape);
  const int64_t whole = out / kPanel, rest = out % kPanel;
  into.narrow(0, 0, whole)
      .copy_(weight.narrow(0, 0, whole * kPanel).reshape({whole, kPanel, in}).transpose(1, 2));
  if (rest > 0) {
    torch::Tensor last = into[whole];  // (in, 16)
    last.zero_();
    last.narrow(1, 0, rest).copy_(weight.narrow(0, whole * kPanel, rest).t());
  }
  return into;
}

bool IsPackedFixedOrder(const torch::Tensor& t) {
  return t.dim() == 3 && t.size(2) == kPanel &&
         (t.scalar_type() == torch::kFloat32 || t.scalar_type() == torch::kBFloat16);
}

torch::Tensor FixedOrderPackedLinear(const torch::Tensor& x, const torch::Tensor& packed,
                                     int64_t out) {
  CheckWeightDtype(packed, "FixedOrderPackedLinear");
  TORCH_CHECK(IsPackedFixedOrder(packed) && packed.is_contiguous() && out >= 0 &&
                  (out + kPanel - 1) / kPanel == packed.size(0),
              "FixedOrderPackedLinear: a contiguous packed weight for ", out, " outputs, got ",
              packed.sizes());
  const int64_t in = packed.size(1);
  return OneProduct(x, Panels{&packed, in * kPanel, kPanel, 0}, in, out);
}

torch::Tensor FixedOrderInputMajorLinear(const torch::Tensor& x, const torch::Tensor& m) {
  CheckWeightDtype(m, "FixedOrderInputMajorLinear");
  TORCH_CHECK(m.dim() == 2, "FixedOrderInputMajorLinear: an (in, out) matrix, got ", m.sizes());
  const int64_t in = m.size(0), out = m.size(1);
  if (m.is_contiguous() && out % kPanel == 0) {
    return OneProduct(x, Panels{&m, kPanel, out, 0}, in, out);
  }
  return FixedOrderPackedLinear(x, PackFixedOrder(m.t()), out);
}

torch::Tensor FixedOrderLinear(const torch::Tensor& x, const torch::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2, "FixedOrderLinear: an (out, in) weight, got ", weight.sizes());
  return FixedOrderPackedLinear(x, PackFixedOrder(weight), weight.size(0));
}

torch::Tensor FixedOrderGroupLinear(const torch::Tensor& x, const torch::Tensor& weight) {
  CheckWeightDtype(weight, "FixedOrderGroupLinear");
  TORCH_CHECK(weight.dim() == 3 && x.dim() == 3 && x.size(0) == weight.size(0) &&
                  x.size(2) == weight.size(2),
              "FixedOrderGroupLinear: x ", x.sizes(), " for weight ", weight.sizes());
  const int64_t groups = weight.size(0), out = weight.size(1), in = weight.size(2);
  const std::vector<int64_t> one = PackedFixedOrderShape(out, in);
  torch::Tensor packed = torch::empty({groups, one[0], in, kPanel}, weight.scalar_type());
  for (int64_t g = 0; g < groups; ++g) PackFixedOrder(weight[g], packed[g]);
  torch::Tensor y = torch::empty({groups, x.size(1), out}, torch::kFloat32);
  const torch::Tensor inputs = AsFloatInputs(x);
  Run(inputs.data_ptr<float>(), groups, x.size(1), in,
      Panels{&packed, in * kPanel, kPanel, one[0] * in * kPanel}, out, y.data_ptr<float>());
  return y;
}

namespace {

// One weight's packed copy and what it was packed from.
struct CachedPanels {
  // The weight's storage, not kept alive: once freed, its memory can be
  // another tensor's, so an entry whose storage is gone never matches.
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  int64_t version;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  torch::ScalarType dtype;
  torch::Tensor packed;
};

bool Matches(const CachedPanels& entry, const torch::Tensor& weight, int64_t version) {
  if (entry.storage.expired()) return false;
  return entry.storage.lock().get() == weight.storage().unsafeGetStorageImpl() &&
         entry.version == version && weight.sizes() == torch::IntArrayRef(entry.sizes) &&
         weight.strides() == torch::IntArrayRef(entry.strides) &&
         entry.dtype == weight.scalar_type();
}

}  // namespace

torch::Tensor FixedOrderCachedLinear(const torch::Tensor& x, const torch::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2, "FixedOrderCachedLinear: an (out, in) weight, got ",
              weight.sizes());
  static std::mutex mutex;
  // Keyed by address and shape: a narrowed view of a weight (the q rows of
  // a fused qkv) starts where the whole does.
  using Key = std::tuple<const void*, int64_t, int64_t>;
  static auto* cache = new std::map<Key, CachedPanels>();
  const Key key{weight.data_ptr(), weight.size(0), weight.size(1)};
  // A tensor made under InferenceMode counts no versions: it is never
  // updated in place outside it.
  const int64_t version = weight.is_inference() ? 0 : weight._version();
  torch::Tensor packed;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache->find(key);
    if (it != cache->end() && Matches(it->second, weight, version)) {
      packed = it->second.packed;
    } else {
      // Entries of freed weights go when a new one comes.
      for (auto e = cache->begin(); e != cache->end();) {
        e = e->second.storage.expired() ? cache->erase(e) : std::next(e);
      }
      packed = PackFixedOrder(weight);
      cache->insert_or_assign(
          key,
          CachedPanels{weight.storage().getWeakStorageImpl(), version, weight.sizes().vec(),
                       weight.strides().vec(), weight.scalar_type(), packed});
    }
  }
  return FixedOrderPackedLinear(x, packed, weight.size(0));
}

}  // namespace linserve

#include "engine/rwkv7/rwkv7_fused_cpu.h"

#include "engine/cpu/engine_threads.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

namespace linserve {
namespace {

// Partial sums of a row: independent lanes the compiler keeps in vector
// registers (float addition may not be reordered without -ffast-math), added
// in one fixed order at the end.
constexpr int64_t kLanes = 8;

// Rows per task of at::parallel_for: a decode batch of a few rows stays on
// the calling thread, where starting the pool would cost more than the rows.
constexpr int64_t kRowsPerTask = 16;

// sum of f(i) for i in [0, n), in the fixed order above.
template <class F>
float FixedOrderSum(int64_t n, F f) {
  const int64_t whole = n / kLanes * kLanes;
  float lanes[kLanes] = {};
  for (int64_t i = 0; i < whole; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += f(i + l);
  }
  float sum = 0;
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  for (int64_t i = whole; i < n; ++i) sum += f(i);
  return sum;
}

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void CheckCpuFloat(const char* what, std::initializer_list<const torch::Tensor*> tensors) {
  for (const torch::Tensor* t : tensors) {
    TORCH_CHECK(t->is_cpu() && t->scalar_type() == torch::kFloat32 && t->is_contiguous(), what,
                ": contiguous float32 CPU tensors only, got ", t->toString(), " ", t->sizes());
  }
}

}  // namespace

NormShifted NormShiftCpu(const torch::Tensor& x, const torch::Tensor& add,
                         const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                         const torch::Tensor& shift, const std::vector<torch::Tensor>& mixes) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), K = mixes.size();
  const torch::Tensor x_c = x.contiguous(), shift_c = shift.contiguous();
  const torch::Tensor add_c = add.defined() ? add.contiguous() : add;
  CheckCpuFloat("NormShiftCpu", {&x_c, &shift_c, &weight, &bias});
  TORCH_CHECK(shift_c.numel() == B * C && weight.numel() == C && bias.numel() == C,
              "NormShiftCpu: x ", x.sizes(), ", shift ", shift.sizes());
  if (add_c.defined()) {
    CheckCpuFloat("NormShiftCpu", {&add_c});
    TORCH_CHECK(add_c.sizes() == x.sizes(), "NormShiftCpu: add ", add.sizes(), " for ", x.sizes());
  }
  std::vector<const float*> mix(K);
  for (int64_t m = 0; m < K; ++m) {
    CheckCpuFloat("NormShiftCpu", {&mixes[m]});
    TORCH_CHECK(mixes[m].numel() == C, "NormShiftCpu: mix ", mixes[m].sizes());
    mix[m] = mixes[m].data_ptr<float>();
  }
  NormShifted out;
  out.residual = add_c.defined() ? torch::empty_like(x_c) : x_c;
  out.mixed = torch::empty({K, B, T, C}, torch::kFloat32);
  out.last = torch::empty({B, C}, torch::kFloat32);
  const torch::Tensor normed = torch::empty({B, T, C}, torch::kFloat32);
  const float *x_p = x_c.data_ptr<float>(),
              *add_p = add_c.defined() ? add_c.data_ptr<float>() : nullptr;
  const float *w_p = weight.data_ptr<float>(), *b_p = bias.data_ptr<float>();
  const float* shift_p = shift_c.data_ptr<float>();
  float *res_p = out.residual.data_ptr<float>(), *n_p = normed.data_ptr<float>();
  float *mixed_p = out.mixed.data_ptr<float>(), *last_p = out.last.data_ptr<float>();
  const int64_t rows = B * T;
  ParallelFor(rows, kRowsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const float* h = x_p + row * C;
      if (add_p != nullptr) {
        float* r = res_p + row * C;
        for (int64_t c = 0; c < C; ++c) r[c] = h[c] + add_p[row * C + c];
        h = r;
      }
      const float mean = FixedOrderSum(C, [&](int64_t c) { return h[c]; }) / C;
      const float var =
          FixedOrderSum(C, [&](int64_t c) { return (h[c] - mean) * (h[c] - mean); }) / C;
      const float scale = 1.0f / std::sqrt(var + static_cast<float>(eps));
      float* n = n_p + row * C;
      for (int64_t c = 0; c < C; ++c) n[c] = (h[c] - mean) * scale * w_p[c] + b_p[c];
    }
  });
  // The mixes read the previous row's LayerNorm: a second pass, once every
  // row has its own.
  ParallelFor(rows, kRowsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / T, t = row % T;
      const float* n = n_p + row * C;
      const float* p = t == 0 ? shift_p + b * C : n - C;
      for (int64_t m = 0; m < K; ++m) {
        float* o = mixed_p + (m * rows + row) * C;
        for (int64_t c = 0; c < C; ++c) o[c] = n[c] + (p[c] - n[c]) * mix[m][c];
      }
      if (t == T - 1) std::copy(n, n + C, last_p + b * C);
    }
  });
  return out;
}

torch::Tensor TimeMixGatesCpu(torch::Tensor& w, torch::Tensor& a, torch::Tensor& k,
                              torch::Tensor& v, const torch::Tensor& v_lr,
                              const torch::Tensor& v_first, const TimeMixGateParams& p,
                              bool decay) {
  const int64_t C = k.size(-1), rows = k.numel() / C, N = p.head_size;
  CheckCpuFloat("TimeMixGatesCpu", {&w, &a, &k, &v, &p.w0, &p.a0, &p.k_k, &p.k_a});
  const bool residual = p.v0.defined();
  if (residual) CheckCpuFloat("TimeMixGatesCpu", {&v_lr, &v_first, &p.v0});
  for (const torch::Tensor* t : {&w, &a, &v}) {
    TORCH_CHECK(t->numel() == rows * C, "TimeMixGatesCpu: ", t->sizes(), " for ", k.sizes());
  }
  if (residual) {
    TORCH_CHECK(v_lr.numel() == rows * C && v_first.numel() == rows * C,
                "TimeMixGatesCpu: value residual ", v_lr.sizes(), ", ", v_first.sizes());
  }
  TORCH_CHECK(N > 0 && C % N == 0, "TimeMixGatesCpu: heads of ", N, " in ", C);
  torch::Tensor kk = torch::empty_like(k);
  float *w_p = w.data_ptr<float>(), *a_p = a.data_ptr<float>(), *k_p = k.data_ptr<float>();
  float *v_p = v.data_ptr<float>(), *kk_p = kk.data_ptr<float>();
  const float* vlr_p = residual ? v_lr.data_ptr<float>() : nullptr;
  const float* vf_p = residual ? v_first.data_ptr<float>() : nullptr;
  const float *w0 = p.w0.data_ptr<float>(), *a0 = p.a0.data_ptr<float>();
  const float* v0 = residual ? p.v0.data_ptr<float>() : nullptr;
  const float *k_k = p.k_k.data_ptr<float>(), *k_a = p.k_a.data_ptr<float>();
  const float decay_scale = -std::exp(-0.5f);
  ParallelFor(rows, kRowsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t at = row * C;
      for (int64_t h = 0; h < C; h += N) {
        float* kk_h = kk_p + at + h;
        for (int64_t n = 0; n < N; ++n) kk_h[n] = k_p[at + h + n] * k_k[h + n];
        const float norm =
            std::sqrt(FixedOrderSum(N, [&](int64_t n) { return kk_h[n] * kk_h[n]; }));
        const float denom = std::max(norm, 1e-12f);
        for (int64_t n = 0; n < N; ++n) kk_h[n] /= denom;
      }
      for (int64_t c = 0; c < C; ++c) {
        const float a_c = Sigmoid(a_p[at + c] + a0[c]);
        a_p[at + c] = a_c;
        k_p[at + c] *= 1 + (a_c - 1) * k_a[c];
        const float log_w = Sigmoid(w_p[at + c] + w0[c]) * decay_scale;
        w_p[at + c] = decay ? std::exp(log_w) : log_w;
        if (residual) {
          const float mix = Sigmoid(vlr_p[at + c] + v0[c]);
          v_p[at + c] += mix * (vf_p[at + c] - v_p[at + c]);
        }
      }
    }
  });
  return kk;
}

void ActivateInPlaceCpu(torch::Tensor& t, Activation activation) {
  CheckCpuFloat("ActivateInPlaceCpu", {&t});
  float* p = t.data_ptr<float>();
  const bool tanh = activation == Activation::kTanh;
  ParallelFor(t.numel(), kRowsPerTask * 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p[i] = tanh ? std::tanh(p[i]) : Sigmoid(p[i]);
  });
}

}  // namespace linserve

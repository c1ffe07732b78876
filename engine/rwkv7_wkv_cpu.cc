#include "engine/rwkv7_wkv_cpu.h"

#include <torch/torch.h>

#include <initializer_list>

namespace linserve {
namespace {

// Partial sums per dot product: independent lanes the compiler can keep in
// vector registers (a single float accumulator would serialise the loop,
// since float addition may not be reordered without -ffast-math).
constexpr int64_t kLanes = 8;

}  // namespace

torch::Tensor WkvStepCpu(const torch::Tensor& r, const torch::Tensor& w, const torch::Tensor& k,
                         const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                         torch::Tensor& S) {
  const int64_t N = S.size(-1), heads = S.numel() / (N * N);  // heads: B * H
  for (const torch::Tensor* t :
       std::initializer_list<const torch::Tensor*>{&r, &w, &k, &v, &kk, &a, &S}) {
    TORCH_CHECK(t->is_cpu() && t->scalar_type() == torch::kFloat32,
                "WkvStepCpu: float32 CPU tensors only");
  }
  TORCH_CHECK(r.numel() == heads * N && S.size(-2) == N, "WkvStepCpu: shapes ", r.sizes(), " and ",
              S.sizes());
  const torch::Tensor b = (kk * a).contiguous();  // (B, H, N)
  const torch::Tensor r_c = r.contiguous(), w_c = w.contiguous(), k_c = k.contiguous();
  const torch::Tensor v_c = v.contiguous(), kk_c = kk.contiguous(), old = S.contiguous();
  torch::Tensor next = torch::empty_like(old);
  torch::Tensor y = torch::empty_like(r_c);
  const int64_t whole = N / kLanes * kLanes;
  const float *r_p = r_c.data_ptr<float>(), *w_p = w_c.data_ptr<float>();
  const float *k_p = k_c.data_ptr<float>(), *v_p = v_c.data_ptr<float>();
  const float *kk_p = kk_c.data_ptr<float>(), *b_p = b.data_ptr<float>();
  const float* s_p = old.data_ptr<float>();
  float *next_p = next.data_ptr<float>(), *y_p = y.data_ptr<float>();
  for (int64_t h = 0; h < heads; ++h) {
    const float *rh = r_p + h * N, *wh = w_p + h * N, *kh = k_p + h * N, *vh = v_p + h * N;
    const float *kkh = kk_p + h * N, *bh = b_p + h * N;
    float* yh = y_p + h * N;
    for (int64_t i = 0; i < N; ++i) {
      const float* row = s_p + (h * N + i) * N;  // S_i. (N)
      float* out = next_p + (h * N + i) * N;
      // (S kk)_i
      float lanes[kLanes] = {};
      for (int64_t j = 0; j < whole; j += kLanes) {
        for (int64_t l = 0; l < kLanes; ++l) lanes[l] += row[j + l] * kkh[j + l];
      }
      float s_kk = 0;
      for (int64_t l = 0; l < kLanes; ++l) s_kk += lanes[l];
      for (int64_t j = whole; j < N; ++j) s_kk += row[j] * kkh[j];
      // The new row, and y_i = (new row) . r
      float acc[kLanes] = {};
      for (int64_t j = 0; j < whole; j += kLanes) {
        for (int64_t l = 0; l < kLanes; ++l) {
          const float x = row[j + l] * wh[j + l] + vh[i] * kh[j + l] - s_kk * bh[j + l];
          out[j + l] = x;
          acc[l] += x * rh[j + l];
        }
      }
      float y_i = 0;
      for (int64_t l = 0; l < kLanes; ++l) y_i += acc[l];
      for (int64_t j = whole; j < N; ++j) {
        const float x = row[j] * wh[j] + vh[i] * kh[j] - s_kk * bh[j];
        out[j] = x;
        y_i += x * rh[j];
      }
      yh[i] = y_i;
    }
  }
  S = next;
  return y;
}

}  // namespace linserve

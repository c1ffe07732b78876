#include "engine/rwkv7/rwkv7_wkv.h"

#include <torch/types.h>

#include <vector>

#include "engine/rwkv7/rwkv7_wkv_cpu.h"

namespace linserve {

torch::Tensor WkvStep(const torch::Tensor& r, const torch::Tensor& w, const torch::Tensor& k,
                      const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                      torch::Tensor& S) {
  if (S.is_cpu()) return WkvStepCpu(r, w, k, v, kk, a, S);
  const torch::Tensor s_kk = (S * kk.unsqueeze(-2)).sum(-1, /*keepdim=*/true);  // (B, H, N, 1)
  S = (S * w.unsqueeze(-2))
          .addcmul_(v.unsqueeze(-1), k.unsqueeze(-2))
          .addcmul_(s_kk, (kk * a).unsqueeze(-2), /*value=*/-1);  // (B, H, N, N)
  return (S * r.unsqueeze(-2)).sum(-1);
}

torch::Tensor WkvChunked(const torch::Tensor& r, const torch::Tensor& log_w, const torch::Tensor& k,
                         const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                         torch::Tensor& S, int64_t L) {
  const int64_t B = r.size(0), T = r.size(1), H = r.size(2), N = r.size(3);
  const int64_t n = (T + L - 1) / L;
  // (B, T, H, N) -> (n, B*H, L, N), zero-padded to n L tokens: a padded token
  // has decay 1 (log 0) and zero keys and values, so it changes nothing.
  // Always a contiguous copy: with B = 1 the reshape could be a strided view,
  // and a product over another layout may take another BLAS path, so a
  // session alone would not get its bits in a batch.
  auto chunks = [&](const torch::Tensor& x) {
    torch::Tensor t = x;
    if (n * L != T) t = torch::constant_pad_nd(t, {0, 0, 0, 0, 0, n * L - T});
    return t.view({B, n, L, H, N}).permute({1, 0, 3, 2, 4}).reshape({n, B * H, L, N}).contiguous();
  };
  const torch::Tensor rc = chunks(r), kc = chunks(k), vc = chunks(v), kkc = chunks(kk);
  const torch::Tensor bc = chunks(kk * a);
  const torch::Tensor lw = chunks(log_w).to(torch::kFloat64);
  const torch::Tensor cum = lw.cumsum(2);               // log g_t      (n, BH, L, N)
  const torch::Tensor total = cum.narrow(2, L - 1, 1);  // log g_L      (n, BH, 1, N)
  auto exp32 = [](const torch::Tensor& t) { return t.exp().to(torch::kFloat32); };
  const torch::Tensor inv_g = exp32(cum.neg());
  const torch::Tensor x = kkc * exp32(cum - lw);  // g_{t-1} kk_t
  const torch::Tensor q = rc * exp32(cum);        // g_t r_t
  const torch::Tensor tail = exp32(total - cum);  // g_L / g_t
  // [X; Q] [K/g; B/g]^T: the four (L, L) blocks Mk, Mb, Rk, Rb at once.
  const torch::Tensor scores =
      torch::matmul(torch::cat({x, q}, 2), torch::cat({kc * inv_g, bc * inv_g}, 2).transpose(2, 3));
  const torch::Tensor mk = scores.narrow(2, 0, L).narrow(3, 0, L).tril(-1);
  const torch::Tensor mb =
      scores.narrow(2, 0, L).narrow(3, L, L);  // only its strict lower part is read
  const torch::Tensor rk = scores.narrow(2, L, L).narrow(3, 0, L).tril();
  const torch::Tensor rb = scores.narrow(2, L, L).narrow(3, L, L).tril();
  const torch::Tensor wu = torch::linalg_solve_triangular(
      mb, torch::cat({x, torch::matmul(mk, vc)}, 3), /*upper=*/false, /*left=*/true,
      /*unitriangular=*/true);  // [W | Uv] (n, BH, L, 2N)
  const torch::Tensor w_s0 = wu.narrow(3, 0, N), uv = wu.narrow(3, N, N);
  const torch::Tensor q_s0 = q - torch::matmul(rb, w_s0);                    // (n, BH, L, N)
  const torch::Tensor y_in = torch::matmul(rk, vc) - torch::matmul(rb, uv);  // (n, BH, L, N)
  const torch::Tensor bbar = bc * tail;
  const torch::Tensor decay = torch::diag_embed(exp32(total).squeeze(2)) -
                              torch::matmul(w_s0.transpose(2, 3), bbar);  // (n, BH, N, N)
  const torch::Tensor add = torch::matmul(vc.transpose(2, 3), kc * tail) -
                            torch::matmul(uv.transpose(2, 3), bbar);  // (n, BH, N, N)
  torch::Tensor s = S.reshape({B * H, N, N});
  std::vector<torch::Tensor> y(n);
  for (int64_t c = 0; c < n; ++c) {
    y[c] = torch::baddbmm(y_in[c], q_s0[c], s.transpose(1, 2));  // (BH, L, N)
    s = torch::baddbmm(add[c], s, decay[c]);
  }
  S = s.view({B, H, N, N});
  return torch::stack(y)  // (n, BH, L, N)
      .view({n, B, H, L, N})
      .permute({1, 0, 3, 2, 4})  // (B, n, L, H, N)
      .reshape({B, n * L, H, N})
      .narrow(1, 0, T);
}

torch::Tensor WkvSteps(const torch::Tensor& r, const torch::Tensor& log_w, const torch::Tensor& k,
                       const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                       torch::Tensor& S) {
  const int64_t T = r.size(1);
  // (B, T, H, N) -> (T, B, H, N) once, so that each token's rows are one
  // contiguous (B, H, N) view rather than six copies per token.
  auto by_token = [](const torch::Tensor& x) { return x.transpose(0, 1).contiguous(); };
  const torch::Tensor rt = by_token(r), wt = by_token(log_w.exp()), kt = by_token(k),
                      vt = by_token(v), kkt = by_token(kk), rate = by_token(a);
  torch::Tensor s = S.clone(at::MemoryFormat::Contiguous);  // the caller's S is never written
  if (s.is_cpu()) {
    const torch::Tensor y = WkvStepsCpu(rt, wt, kt, vt, kkt, rate, s);
    S = s;
    return y.transpose(0, 1).contiguous();
  }
  std::vector<torch::Tensor> y;
  y.reserve(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    y.push_back(WkvStep(rt[t], wt[t], kt[t], vt[t], kkt[t], rate[t], s));
  }
  S = s;
  return torch::stack(y, 1);
}

torch::Tensor WkvPrefill(const torch::Tensor& r, const torch::Tensor& log_w, const torch::Tensor& k,
                         const torch::Tensor& v, const torch::Tensor& kk, const torch::Tensor& a,
                         torch::Tensor& S, int64_t L) {
  if (S.is_cpu()) return WkvSteps(r, log_w, k, v, kk, a, S);
  return WkvChunked(r, log_w, k, v, kk, a, S, L);
}

}  // namespace linserve

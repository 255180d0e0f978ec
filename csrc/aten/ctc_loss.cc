// F.ctc_loss on tpu: _ctc_loss and _ctc_loss_backward (both overloads), which
// only CPU and CUDA implement, composed of ops that are lowered, so CTC runs
// without the CPU fallback. They run below autograd (derivatives.yaml).
//
// Graves et al., "Connectionist Temporal Classification", ICML 2006, in log
// space, as ATen's CPU kernel (LossCTC.cpp) computes it. With the extended
// target l' (blanks around and between the labels, length L = 2 S + 1) and
// y[t, s] = log_probs[t, n, l'_s]:
//   alpha[0, 0] = y[0, 0], alpha[0, 1] = y[0, 1];
//   alpha[t, s] = logsumexp(alpha[t-1, s], alpha[t-1, s-1], alpha[t-1, s-2] if
//                 l'_s is a label other than l'_{s-2}) + y[t, s]
//   nll = -logsumexp(alpha[T_n - 1, L_n - 1], alpha[T_n - 1, L_n - 2])
//   beta mirrors alpha from t = T_n - 1 down, and
//   grad[t, n, c] = (exp(lp) - exp(logsumexp_{s: l'_s = c}(alpha + beta) + nll - lp)) * g[n]
// Each time step is a few tensor ops on [N, L]; the per-sample lengths are
// host values (the int[] overloads; the Tensor ones read them once).
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <tuple>
#include <vector>

namespace ttpu::aten {
namespace {

constexpr double kLogZero = -std::numeric_limits<double>::infinity();

struct Ctc {
  int64_t t_max = 0, n = 0, c = 0, l = 0;
  std::vector<int64_t> input_lengths, target_lengths;
  at::Tensor y;        // [T, N, L] log-probabilities of the extended targets
  at::Tensor ext;      // [N, L] int64 extended targets
  at::Tensor skip;     // [N, L] bool: s may come from s - 2
  at::Tensor steps;    // [T, N, 1] int64: t, for masks against the lengths
  at::Tensor in_len;   // [1, N, 1] int64 on the device
  at::Tensor tgt_len;  // [N] int64 on the device
};

Ctc prepare(const at::Tensor& log_probs, const at::Tensor& targets, c10::IntArrayRef il,
            c10::IntArrayRef tl, int64_t blank) {
  TORCH_CHECK(log_probs.dim() == 3, "ctc_loss on tpu: expected log_probs of shape [T, N, C], got ",
              log_probs.sizes());
  Ctc x;
  x.t_max = log_probs.size(0);
  x.n = log_probs.size(1);
  x.c = log_probs.size(2);
  x.input_lengths.assign(il.begin(), il.end());
  x.target_lengths.assign(tl.begin(), tl.end());
  TORCH_CHECK(static_cast<int64_t>(il.size()) == x.n, "input_lengths must be of size batch_size");
  TORCH_CHECK(static_cast<int64_t>(tl.size()) == x.n, "target_lengths must be of size batch_size");
  TORCH_CHECK(blank >= 0 && blank < x.c, "blank must be in label range");
  for (int64_t i = 0; i < x.n; ++i) {
    TORCH_CHECK(il[i] >= 0 && il[i] <= x.t_max, "Expected input_lengths to have value at most ",
                x.t_max, ", but got value ", il[i], " (while checking arguments for ctc_loss_cpu)");
    TORCH_CHECK(tl[i] >= 0, "target lengths must be non-negative");
  }
  const int64_t s_max = x.n == 0 ? 0 : *std::max_element(tl.begin(), tl.end());
  x.l = 2 * s_max + 1;
  const auto longs = log_probs.options().dtype(at::kLong);
  at::Tensor padded = at::full({x.n, s_max}, blank, longs);
  if (targets.dim() == 2) {
    if (s_max > 0) padded.copy_(targets.narrow(1, 0, s_max));
  } else {
    int64_t offset = 0;
    for (int64_t i = 0; i < x.n; ++i) {
      if (tl[i] > 0) padded[i].narrow(0, 0, tl[i]).copy_(targets.narrow(0, offset, tl[i]));
      offset += tl[i];
    }
  }
  at::Tensor pairs = at::stack({at::full({x.n, s_max}, blank, longs), padded}, 2);
  x.ext = at::cat({pairs.reshape({x.n, 2 * s_max}), at::full({x.n, 1}, blank, longs)}, 1);
  x.y = log_probs.gather(2, x.ext.unsqueeze(0).expand({x.t_max, x.n, x.l}));
  at::Tensor before = x.l > 2
                          ? at::cat({at::full({x.n, 2}, -1, longs), x.ext.narrow(1, 0, x.l - 2)}, 1)
                          : at::full({x.n, x.l}, -1, longs);
  x.skip = x.ext.ne(blank).logical_and(x.ext.ne(before));
  x.steps = at::arange(x.t_max, longs).view({x.t_max, 1, 1});
  x.in_len = at::tensor(x.input_lengths, at::kLong).to(log_probs.device()).view({1, x.n, 1});
  x.tgt_len = at::tensor(x.target_lengths, at::kLong).to(log_probs.device());
  return x;
}

// logsumexp of three [N, L] terms, -inf where all are.
at::Tensor lse3(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  at::Tensor m = at::maximum(a, at::maximum(b, c));
  at::Tensor safe = at::where(m.isinf(), 0, m);
  return safe + ((a - safe).exp() + (b - safe).exp() + (c - safe).exp()).log();
}

at::Tensor ctc_shifted(const at::Tensor& v, int64_t by) {  // v[:, s - by], -inf before
  const int64_t l = v.size(1);
  if (by >= l) return at::full_like(v, kLogZero);
  return at::cat({at::full({v.size(0), by}, kLogZero, v.options()), v.narrow(1, 0, l - by)}, 1);
}

at::Tensor unshifted(const at::Tensor& v, int64_t by) {  // v[:, s + by], -inf past the end
  const int64_t l = v.size(1);
  if (by >= l) return at::full_like(v, kLogZero);
  return at::cat({v.narrow(1, by, l - by), at::full({v.size(0), by}, kLogZero, v.options())}, 1);
}

// log_alpha [N, T, L].
at::Tensor forward_variables(const Ctc& x) {
  at::Tensor pos = at::arange(x.l, x.ext.options()).unsqueeze(0);
  at::Tensor first = pos.lt(2).logical_and(pos.lt(2 * x.tgt_len.unsqueeze(1) + 1));
  at::Tensor alpha = at::where(first, x.y[0], kLogZero);
  std::vector<at::Tensor> all{alpha};
  for (int64_t t = 1; t < x.t_max; ++t) {
    at::Tensor two = at::where(x.skip, ctc_shifted(alpha, 2), kLogZero);
    at::Tensor next = lse3(alpha, ctc_shifted(alpha, 1), two) + x.y[t];
    alpha = at::where(x.in_len[0].gt(t), next, alpha);  // frozen past the input's length
    all.push_back(alpha);
  }
  return at::stack(all, 1);
}

// The per-sample log-likelihood from the last alpha of each input length.
at::Tensor log_likelihood(const Ctc& x, const at::Tensor& log_alpha) {
  at::Tensor last_t = (x.in_len.view({x.n}) - 1).clamp_min(0);
  at::Tensor end = log_alpha.index({at::arange(x.n, last_t.options()), last_t});  // [N, L]
  at::Tensor s1 = 2 * x.tgt_len, s2 = (2 * x.tgt_len - 1).clamp_min(0);
  at::Tensor a = end.gather(1, s1.unsqueeze(1)).squeeze(1);
  at::Tensor b = at::where(x.tgt_len.gt(0), end.gather(1, s2.unsqueeze(1)).squeeze(1), kLogZero);
  at::Tensor ll = at::logaddexp(a, b);
  return at::where(x.in_len.view({x.n}).eq(0), at::where(x.tgt_len.eq(0), 0.0, kLogZero), ll);
}

std::tuple<at::Tensor, at::Tensor> ctc_loss(const at::Tensor& log_probs, const at::Tensor& targets,
                                            c10::IntArrayRef il, c10::IntArrayRef tl, int64_t blank,
                                            bool zero_infinity) {
  Ctc x = prepare(log_probs, targets, il, tl, blank);
  at::Tensor log_alpha = forward_variables(x);
  // Infinite for an impossible alignment even with zero_infinity: ATen's
  // composite ctc_loss zeroes the loss, and the backward reads the infinity
  // to zero the gradient, as CPU's kernel pair does.
  (void)zero_infinity;
  return {-log_likelihood(x, log_alpha), log_alpha};
}

at::Tensor ctc_loss_backward(const at::Tensor& grad, const at::Tensor& log_probs,
                             const at::Tensor& targets, c10::IntArrayRef il, c10::IntArrayRef tl,
                             const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha,
                             int64_t blank, bool zero_infinity) {
  Ctc x = prepare(log_probs, targets, il, tl, blank);
  at::Tensor la = log_alpha.narrow(2, 0, x.l).transpose(0, 1);  // [T, N, L]
  at::Tensor pos = at::arange(x.l, x.ext.options()).unsqueeze(0);
  at::Tensor ends =
      pos.eq(2 * x.tgt_len.unsqueeze(1)).logical_or(pos.eq(2 * x.tgt_len.unsqueeze(1) - 1));
  at::Tensor skip_up = unshifted(x.skip.to(log_probs.scalar_type()), 2).gt(0);
  at::Tensor beta = at::full({x.n, x.l}, kLogZero, log_probs.options());
  std::vector<at::Tensor> betas(x.t_max);
  for (int64_t t = x.t_max - 1; t >= 0; --t) {
    at::Tensor two = at::where(skip_up, unshifted(beta, 2), kLogZero);
    at::Tensor rec = lse3(beta, unshifted(beta, 1), two) + x.y[t];
    at::Tensor init = at::where(ends, x.y[t], kLogZero);
    at::Tensor len = x.in_len[0];  // [N, 1]
    beta = at::where(len.eq(t + 1), init, at::where(len.gt(t + 1), rec, kLogZero));
    betas[t] = beta;
  }
  at::Tensor ab = la + at::stack(betas, 0);  // [T, N, L]
  at::Tensor top = ab.amax(2, /*keepdim=*/true);
  top = at::where(top.isinf(), 0, top);
  at::Tensor summed =
      at::zeros({x.t_max, x.n, x.c}, log_probs.options())
          .scatter_add_(2, x.ext.unsqueeze(0).expand({x.t_max, x.n, x.l}), (ab - top).exp());
  at::Tensor lcab = summed.log() + top;
  at::Tensor nll = neg_log_likelihood.view({1, x.n, 1});
  at::Tensor g = (log_probs.exp() - (lcab + nll - log_probs).exp()) * grad.view({1, x.n, 1});
  at::Tensor keep = x.steps.lt(x.in_len);
  if (zero_infinity) keep = keep.logical_and(nll.isinf().logical_not());
  return at::where(keep, g, 0);
}

std::vector<int64_t> host_lengths(const at::Tensor& t) {
  at::Tensor h = t.to(at::kCPU, at::kLong).contiguous();
  return {h.data_ptr<int64_t>(), h.data_ptr<int64_t>() + h.numel()};
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& log_probs,
                                                   const at::Tensor& targets, const at::Tensor& il,
                                                   const at::Tensor& tl, int64_t blank,
                                                   bool zero_infinity) {
  return ctc_loss(log_probs, targets, host_lengths(il), host_lengths(tl), blank, zero_infinity);
}

at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& log_probs,
                                    const at::Tensor& targets, const at::Tensor& il,
                                    const at::Tensor& tl, const at::Tensor& nll,
                                    const at::Tensor& log_alpha, int64_t blank,
                                    bool zero_infinity) {
  return ctc_loss_backward(grad, log_probs, targets, host_lengths(il), host_lengths(tl), nll,
                           log_alpha, blank, zero_infinity);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss", &ctc_loss);
  m.impl("_ctc_loss.Tensor", &ctc_loss_tensor);
  m.impl("_ctc_loss_backward", &ctc_loss_backward);
  m.impl("_ctc_loss_backward.Tensor", &ctc_loss_backward_tensor);
}

}  // namespace
}  // namespace ttpu::aten

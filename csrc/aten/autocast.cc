// torch.autocast("tpu"): the kernels at the AutocastPrivateUse1 dispatch key.
//
// Autocast is a dispatch key above autograd: while `torch.autocast("tpu")` is
// active, a call whose tensors are on tpu first reaches the kernel registered
// here, which casts the floating-point tpu arguments (to the autocast dtype,
// to float32, or to their widest type) and redispatches below Autocast. The
// casts therefore run before autograd records the op, so a lower-precision op
// saves its inputs for backward in that precision, as on CUDA.
//
// The op lists are PyTorch's own (ATen/autocast_mode.h: AT_FORALL_*), the ones
// CUDA registers, so a model gets the same per-op precisions on tpu as on a GPU.
// Every other op falls through unchanged and runs in whatever dtype its inputs
// have (elementwise ops then follow ordinary type promotion).
//
// The default autocast dtype for tpu (bfloat16, as on TPUs with PyTorch/XLA)
// is set by torchtpu/__init__.py: c10 keeps it per thread.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace ttpu::aten {
namespace {

// CUDA refuses binary_cross_entropy under autocast (its inputs come from a
// sigmoid, which in a lower precision saturates); tpu does the same so a
// script that runs on tpu also runs on a GPU.
at::Tensor binary_cross_entropy_refused(const at::Tensor&, const at::Tensor&,
                                        const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "tpu autocast: torch.nn.functional.binary_cross_entropy (nn.BCELoss) is not safe "
              "in a lower precision, as on CUDA. Apply the sigmoid inside the loss instead: "
              "torch.nn.functional.binary_cross_entropy_with_logits (nn.BCEWithLogitsLoss) "
              "runs in float32 under autocast.");
}

// AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE spells its signatures with the
// unqualified ATen type names.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// Ops without a kernel below run as they are: a fallthrough skips the key.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // Matmul-class ops (matmul, linear, conv, bmm, attention ...): autocast dtype.
#define TTPU_AUTOCAST_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TTPU_AUTOCAST_LOWER)
#undef TTPU_AUTOCAST_LOWER

  // Ops whose range or accuracy needs float32 (exp, log, pow, norms, losses).
#define TTPU_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TTPU_AUTOCAST_FP32)
#undef TTPU_AUTOCAST_FP32

  // Reductions and softmax with an optional dtype: run with dtype=float32
  // unless the caller gave one.
#define TTPU_AUTOCAST_FP32_OPT(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TTPU_AUTOCAST_FP32_OPT)
#undef TTPU_AUTOCAST_FP32_OPT

  // norm without a dtype argument: redispatched to the overload that takes one.
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)

  // Multi-input ops (addcmul, index_put, scatter_add ...): the widest input type.
#define TTPU_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TTPU_AUTOCAST_PROMOTE)
#undef TTPU_AUTOCAST_PROMOTE

  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN(binary_cross_entropy_refused));
}

}  // namespace
}  // namespace ttpu::aten

// F.one_hot on tpu with CPU's checks at the call.
//
// ATen's composite one_hot skips its range checks for CUDA, MPS, XLA and
// PrivateUse1 and leaves them to scatter's device assert, which here is a
// deferred check: an out-of-range class raised at some later read (in
// PyTorch's suites, inside the next test). CPU raises at the call, and
// Python code relies on that, so tpu does too: one host read of the min and
// max (the same reads CPU makes), then the composite's own construction.
// Registered at AutogradPrivateUse1 as well, since a CompositeImplicitAutograd
// op's kernel there would run the composite before PrivateUse1 is reached.
#include <ATen/Functions.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace ttpu::aten {
namespace {

at::Tensor one_hot(const at::Tensor& self, int64_t num_classes) {
  TORCH_CHECK(self.dtype() == at::kLong,
              "one_hot is only applicable to index tensor of type LongTensor.");
  if (self.key_set().has(c10::DispatchKey::Python)) {
    // A fake tensor (torch.compile tracing): no values to check; the
    // functional form ATen's composite takes for such tensors.
    if (num_classes == -1) num_classes = self.max().item<int64_t>() + 1;
    return at::eq(self.unsqueeze(-1), at::arange(num_classes, self.options())).to(at::kLong);
  }
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.numel() == 0) {
    TORCH_CHECK(num_classes > 0, "Can not infer total number of classes from empty tensor.");
    shape.push_back(num_classes);
    return at::empty(shape, self.options());
  }
  const at::Tensor range = at::stack({self.min(), self.max()}).cpu();
  const int64_t lo = range[0].item<int64_t>(), hi = range[1].item<int64_t>();
  TORCH_CHECK(lo >= 0, "Class values must be non-negative.");
  if (num_classes == -1) {
    num_classes = hi + 1;
  } else {
    TORCH_CHECK(num_classes > hi, "Class values must be smaller than num_classes.");
  }
  shape.push_back(num_classes);
  at::Tensor ret = at::zeros(shape, self.options());
  ret.scatter_(-1, self.unsqueeze(-1), 1);
  return ret;
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("one_hot", &one_hot); }
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("one_hot", &one_hot); }

}  // namespace
}  // namespace ttpu::aten

// The out= dtype checks of the lowered kernel (lowered_kernel.cc): which
// dtypes an op's CPU kernel accepts for its out= tensors, with its messages.
#include "aten/out_dtype.h"

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <string>
#include <unordered_set>

namespace ttpu::aten {

void check_castable(c10::ScalarType from, const at::Tensor& dst) {
  TORCH_CHECK(c10::canCast(from, dst.scalar_type()), "result type ", from,
              " can't be cast to the desired output type ", dst.scalar_type());
}

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

// Unary ops whose CPU kernel TensorIterator builds with check_all_same_dtype:
// an out of another dtype is refused before the kernel's own dtype check.
bool same_dtype_unary(const std::string& key) {
  static const std::unordered_set<std::string> kSameDtype = {
      "neg",  "floor", "ceil", "trunc",      "round", "round.decimals",
      "frac", "sign",  "sgn",  "bitwise_not"};
  return kSameDtype.count(key) != 0;
}

// The out= check of `key`'s CPU kernel, with its message. Unary ops
// TensorIterator builds with check_all_same_dtype (neg, floor, ...) take only
// an out of the result's dtype; structured kernels that allocate their
// outputs with a dtype (the LAPACK family) take only that dtype; some ops take
// a fixed out dtype (nonzero: int64; all/any: bool or uint8; isposinf,
// signbit: bool; complex/polar: the complex dtype of their inputs); abs,
// heaviside and nan_to_num compare with `self`, the first input's dtype;
// cat reports an uncastable out as TypeError; the rest cast safely.
void check_out_dtype(const std::string& key, c10::ScalarType from, c10::ScalarType self,
                     const at::Tensor& dst, size_t index) {
  static const std::unordered_set<std::string> kStructuredExact = {"linalg_cholesky_ex",
                                                                   "linalg_inv_ex",
                                                                   "_linalg_eigh",
                                                                   "linalg_lu_factor_ex",
                                                                   "linalg_lu",
                                                                   "linalg_lu_solve",
                                                                   "_linalg_solve_ex",
                                                                   "_linalg_det",
                                                                   "_linalg_slogdet",
                                                                   "linalg_qr",
                                                                   "_linalg_svd",
                                                                   "triangular_solve",
                                                                   "linalg_ldl_factor_ex",
                                                                   "linalg_ldl_solve",
                                                                   "max.dim",
                                                                   "min.dim"};
  const c10::ScalarType to = dst.scalar_type();
  if (key == "nonzero") {
    TORCH_CHECK(to == c10::kLong,
                "nonzero: Expected out tensor to have scalar type Long but got "
                "scalar type",
                to);
  } else if (key == "all" || key == "any" || starts_with(key, "all.") || starts_with(key, "any.")) {
    TORCH_CHECK(to == c10::kBool || to == c10::kByte, key.substr(0, 3),
                " only supports bool tensor for result, got: ", to);
  } else if (key == "isposinf" || key == "isneginf" || key == "signbit") {
    TORCH_CHECK(to == c10::kBool, key, " does not support non-boolean outputs.");
  } else if (key == "heaviside") {
    // heaviside's meta function (BinaryOps.cpp): no complex out, and the
    // out's dtype is self's.
    TORCH_CHECK(!c10::isComplexType(to), "heaviside is not yet implemented for complex tensors.");
    TORCH_CHECK(to == self, "heaviside is not yet implemented for tensors with different dtypes.");
  } else if (key == "nan_to_num") {
    TORCH_CHECK(to == self, "nan_to_num: dtype of out: ", to, " should be same as input: ", self);
  } else if (key == "abs") {
    // A real input's out has its dtype; a complex input's may be real (its
    // absolute value, safely cast) or exactly its own complex dtype.
    if (c10::isComplexType(self) && !c10::isComplexType(to)) {
      check_castable(from, dst);
    } else {
      TORCH_CHECK(to == self, "Found dtype ", to, " but expected ", self);
    }
  } else if (key == "mode") {
    // mode_out's check_dtype (Sorting.cpp): values take self's dtype, indices int64.
    TORCH_CHECK(to == from, "expected scalar type '", from, "' but got '", to, "' for ",
                index == 0 ? "values" : "indices", " output");
  } else if (key == "complex" || key == "polar") {
    TORCH_CHECK(to == from, "Expected object of scalar type ", from, " but got scalar type ", to,
                " for argument 'out'");
  } else if (key == "cholesky" || key == "cholesky_inverse" ||
             key == "linalg_householder_product") {
    // checkLinalgCompatibleDtype's text, under the name the user called.
    const std::string fn =
        key == "linalg_householder_product" ? "torch.linalg.householder_product" : key;
    TORCH_CHECK(c10::canCast(from, to), fn, ": Expected result to be safely castable from ", from,
                " dtype, but got result with dtype ", to);
  } else if (kStructuredExact.count(key) != 0) {
    TORCH_CHECK(to == from, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(from),
                ", but got ", dst.dtype(), " instead");
  } else if (same_dtype_unary(key)) {
    TORCH_CHECK(from == dst.scalar_type(), "Found dtype ", dst.scalar_type(), " but expected ",
                from);
  } else if (key == "cat") {
    TORCH_CHECK_TYPE(c10::canCast(from, dst.scalar_type()),
                     "torch.cat(): input types can't be "
                     "cast to the desired output type ",
                     dst.scalar_type());
  } else {
    check_castable(from, dst);
  }
}

}  // namespace ttpu::aten

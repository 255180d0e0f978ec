// Lowerings of the matrix products (mm, bmm, addmm, baddbmm, addbmm, mv, addmv,
// dot, vdot, addr) to dot_general. matmul, linear, outer, einsum... are
// CompositeImplicitAutograd and reach these ops after decomposition.
//
// Argument checks run before any IR is built and repeat the CPU kernels' checks
// in their order with their text (aten/src/ATen/native/LinearAlgebra.cpp and
// Blas.cpp), so a user sees the same RuntimeError on tpu as on CPU.
#include <ATen/ExpandUtils.h>
#include <ATen/native/TypeProperties.h>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Op;
using ir::Value;

// CPU's GEMM kernels have no bool instantiation; they raise NotImplementedError
// naming the kernel ("addmm_impl_cpu_"), which we repeat.
void check_not_bool(const at::Tensor& t, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(t.scalar_type() != at::kBool, "\"", kernel,
                              "\" not implemented for '", t.scalar_type(), "'");
}

// CPU's mm/bmm/mv return before their dtype dispatch when the result is empty or
// the contraction is (a zero-filled result), so bool passes there. The product
// of such bool operands, contracted in int32: XLA has no bool dot.
bool empty_product(int64_t result_numel, int64_t contraction) {
  return result_numel == 0 || contraction == 0;
}
Value bool_product(LoweringContext& ctx, const at::Tensor& a, const at::Tensor& b,
                   std::vector<int64_t> batch, std::vector<int64_t> ca, std::vector<int64_t> cb) {
  auto& g = ctx.g();
  Value p = g.dot_general(g.convert(ctx.tensor(a), ir::DType::kI32),
                          g.convert(ctx.tensor(b), ir::DType::kI32), batch, batch, ca, cb);
  return g.convert(p, ir::DType::kBool);
}

// `self` broadcast to `sizes` the way at::expand checks it, so a mismatch raises
// expand's own message ("The expanded size of the tensor (4) must match ...").
void check_expandable(const at::Tensor& self, c10::IntArrayRef sizes) {
  at::inferExpandGeometry_dimvector(self.sizes(), self.strides(), sizes);
}

// beta * self + alpha * product, PyTorch's addmm family. beta == 0 ignores self
// entirely, so NaN/inf in it do not propagate (documented for torch.addmm);
// beta/alpha == 1 skip their multiply. Other values are program parameters, so a
// changing scale never recompiles.
Value scaled_sum(LoweringContext& ctx, const at::Tensor& self, Value product,
                 const c10::Scalar& beta, const c10::Scalar& alpha) {
  auto& g = ctx.g();
  const ir::DType dt = dtype(ctx, product);
  const auto shape = dims(ctx, product);  // a copy: adding nodes moves the graph's storage
  if (!scalar_equals(alpha, 1)) {
    product = g.binary(Op::kMul, product, broadcast_to(ctx, ctx.scalar(alpha, dt), shape));
  }
  if (scalar_equals(beta, 0)) return product;
  Value s = broadcast_to(ctx, g.convert(ctx.tensor(self), dt), shape);
  if (!scalar_equals(beta, 1))
    s = g.binary(Op::kMul, s, broadcast_to(ctx, ctx.scalar(beta, dt), shape));
  return g.binary(Op::kAdd, s, product);
}

// Half-precision products accumulate in float32 and round once at the end, as
// the CPU kernels do (at::opmath_type); XLA:CPU would accumulate in bf16/f16.
bool is_half(ir::DType t) { return t == ir::DType::kBF16 || t == ir::DType::kF16; }
Value matmul_opmath(LoweringContext& ctx, Value v) {
  return is_half(dtype(ctx, v)) ? ctx.g().convert(v, ir::DType::kF32) : v;
}

// mat1 [n, k] @ mat2 [k, m] read straight from their storages: a matrix that is
// the transpose of a dense one (nn.Linear's weight.t(), and most of its
// backward) is contracted along its storage's inner dimension, so the program
// holds no transpose and XLA picks the layout. (XLA:CPU still runs x @ W.t()
// about 2x slower than x @ W at 256x1024x1024; measured, not yet understood.)
Value matmul2d(LoweringContext& ctx, const at::Tensor& mat1, const at::Tensor& mat2) {
  auto transposed = [](const at::Tensor& t) {
    return t.dim() == 2 && !t.is_contiguous() && t.t().is_contiguous();
  };
  const bool t1 = transposed(mat1), t2 = transposed(mat2);
  Value a = matmul_opmath(ctx, ctx.tensor(t1 ? mat1.t() : mat1));
  Value b = matmul_opmath(ctx, ctx.tensor(t2 ? mat2.t() : mat2));
  return ctx.g().dot_general(a, b, {}, {}, {t1 ? 0 : 1}, {t2 ? 1 : 0});
}

// [b, n, k] x [b, k, m] -> [b, n, m], in matmul_opmath precision.
Value matmul3d(LoweringContext& ctx, Value a, Value b) {
  return ctx.g().dot_general(matmul_opmath(ctx, a), matmul_opmath(ctx, b), {0}, {0}, {2}, {1});
}

// --------------------------------------------------------------------- mm / addmm

void check_mm_shapes(const at::Tensor& mat1, const at::Tensor& mat2) {
  TORCH_CHECK(mat1.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              mat1.size(0), "x", mat1.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
}

// mm(self, mat2): TORCH_META_FUNC(mm).
std::vector<Value> mm(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& mat2 = a.tensor(1);
  TORCH_CHECK(self.dim() == 2, "self must be a matrix");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(self.dtype() == mat2.dtype(),
              "expected m1 and m2 to have the same dtype, but got: ", self.dtype(),
              " != ", mat2.dtype());
  check_mm_shapes(self, mat2);
  if (self.scalar_type() == at::kBool && empty_product(self.size(0) * mat2.size(1), self.size(1))) {
    return {bool_product(ctx, self, mat2, {}, {1}, {0})};
  }
  check_not_bool(self, "addmm_impl_cpu_");
  return {ctx.g().convert(matmul2d(ctx, self, mat2), to_ir(self.scalar_type()))};
}

// The checks of addmm's meta function (ADDMM_META) in their order.
void check_addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2) {
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(),
              "self and mat2 must have the same dtype, but got ", self.scalar_type(), " and ",
              mat2.scalar_type());
  TORCH_CHECK(mat1.scalar_type() == mat2.scalar_type(),
              "mat1 and mat2 must have the same dtype, but got ", mat1.scalar_type(), " and ",
              mat2.scalar_type());
  TORCH_CHECK(mat1.dim() == 2, "mat1 must be a matrix, got ", mat1.dim(), "-D tensor");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix, got ", mat2.dim(), "-D tensor");
  check_mm_shapes(mat1, mat2);
}

// addmm(self, mat1, mat2, beta, alpha) = beta * self + alpha * (mat1 @ mat2).
std::vector<Value> addmm(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& mat1 = a.tensor(1);
  const at::Tensor& mat2 = a.tensor(2);
  check_addmm(self, mat1, mat2);
  check_expandable(self, {mat1.size(0), mat2.size(1)});
  check_not_bool(self, "addmm_impl_cpu_");
  Value product = matmul2d(ctx, mat1, mat2);
  return {ctx.g().convert(scaled_sum(ctx, self, product, a.scalar(3), a.scalar(4)),
                          to_ir(self.scalar_type()))};
}

// ------------------------------------------------------------ bmm / baddbmm / addbmm

// common_checks_baddbmm_bmm: batch1 [b, n, k], batch2 [b, k, m].
void check_bmm(const at::Tensor& batch1, const at::Tensor& batch2) {
  TORCH_CHECK(batch1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(batch2.dim() == 3, "batch2 must be a 3D tensor");
  const int64_t bs = batch1.size(0), contraction = batch1.size(2);
  TORCH_CHECK(batch2.size(0) == bs && batch2.size(1) == contraction,
              "Expected size for first two dimensions of batch2 tensor to be: [", bs, ", ",
              contraction, "] but got: [", batch2.size(0), ", ", batch2.size(1), "].");
}

// The CPU kernel dispatches on batch1's dtype and reads batch2 with it.
void check_bmm_dtypes(const at::Tensor& batch1, const at::Tensor& batch2) {
  TORCH_CHECK(batch1.scalar_type() == batch2.scalar_type(), "expected scalar type ",
              batch1.scalar_type(), " but found ", batch2.scalar_type());
}

std::vector<Value> bmm(LoweringContext& ctx, const Args& a) {
  const at::Tensor& batch1 = a.tensor(0);
  const at::Tensor& batch2 = a.tensor(1);
  check_bmm(batch1, batch2);
  if (batch1.scalar_type() == at::kBool && batch2.scalar_type() == at::kBool &&
      empty_product(batch1.size(0) * batch1.size(1) * batch2.size(2), batch1.size(2))) {
    return {bool_product(ctx, batch1, batch2, {0}, {2}, {1})};
  }
  check_not_bool(batch1, "bmm");
  check_bmm_dtypes(batch1, batch2);
  return {ctx.g().convert(matmul3d(ctx, ctx.tensor(batch1), ctx.tensor(batch2)),
                          to_ir(batch1.scalar_type()))};
}

// baddbmm(self, batch1, batch2, beta, alpha) = beta * self + alpha * bmm(batch1, batch2).
std::vector<Value> baddbmm(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& batch1 = a.tensor(1);
  const at::Tensor& batch2 = a.tensor(2);
  // TORCH_META_FUNC(baddbmm) expands self before the common checks.
  check_expandable(self, {batch1.size(0), batch1.size(1), batch2.size(2)});
  TORCH_CHECK(self.dtype() == batch1.dtype(), "Input dtypes must be the same, got: input ",
              self.dtype(), ", batch1: ", batch1.dtype(), ", batch2: ", batch2.dtype());
  check_bmm(batch1, batch2);
  check_not_bool(batch1, "baddbmm");
  check_bmm_dtypes(batch1, batch2);
  Value product = matmul3d(ctx, ctx.tensor(batch1), ctx.tensor(batch2));
  return {ctx.g().convert(scaled_sum(ctx, self, product, a.scalar(3), a.scalar(4)),
                          to_ir(self.scalar_type()))};
}

// addbmm(self, batch1, batch2, beta, alpha) = beta * self + alpha * sum_b batch1[b] @ batch2[b]:
// one dot_general contracting both the batch and the inner dimension.
std::vector<Value> addbmm(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& batch1 = a.tensor(1);
  const at::Tensor& batch2 = a.tensor(2);
  // addbmm_out: expand first, then addbmm_impl_'s checks, then addmm_'s per batch.
  check_expandable(self, {batch1.size(1), batch2.size(2)});
  TORCH_CHECK(batch1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(batch2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(batch1.size(0) == batch2.size(0),
              "batch1 and batch2 must have same number of batches, got ", batch1.size(0), " and ",
              batch2.size(0));
  TORCH_CHECK(batch1.size(2) == batch2.size(1), "Incompatible matrix sizes for bmm (",
              batch1.size(1), "x", batch1.size(2), " and ", batch2.size(1), "x", batch2.size(2),
              ")");
  if (batch1.size(0) > 0) {
    TORCH_CHECK(self.scalar_type() == batch2.scalar_type(),
                "self and mat2 must have the same dtype, but got ", self.scalar_type(), " and ",
                batch2.scalar_type());
    TORCH_CHECK(batch1.scalar_type() == batch2.scalar_type(),
                "mat1 and mat2 must have the same dtype, but got ", batch1.scalar_type(), " and ",
                batch2.scalar_type());
    check_not_bool(self, "addmm_impl_cpu_");
  }
  const ir::DType dt = to_ir(self.scalar_type());
  Value b1 = ctx.g().convert(ctx.tensor(batch1), dt);
  Value b2 = ctx.g().convert(ctx.tensor(batch2), dt);
  Value product = ctx.g().dot_general(b1, b2, {}, {}, {0, 2}, {0, 1});
  return {scaled_sum(ctx, self, product, a.scalar(3), a.scalar(4))};
}

// --------------------------------------------------------------------- mv / addmv

// TORCH_META_FUNC(addmv) with self of `self_dim` dims and `self_numel` elements.
void check_addmv(int64_t self_dim, int64_t self_numel, int64_t self_size0, const at::Tensor& mat,
                 const at::Tensor& vec) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self_dim <= 1,
              "vector + matrix @ vector expected, got ", self_dim, ", ", mat.dim(), ", ",
              vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0) && (mat.size(0) == self_numel || self_numel == 1),
              "size mismatch, got input (", self_size0, "), mat (", mat.size(0), "x", mat.size(1),
              "), vec (", vec.size(0), ")");
}

void check_addmv_dtypes(c10::ScalarType self, const at::Tensor& mat, const at::Tensor& vec) {
  TORCH_CHECK(self == mat.scalar_type() && mat.scalar_type() == vec.scalar_type(),
              "addmv input tensors must have the same dtype, but got ", self, ", ",
              mat.scalar_type(), ", and ", vec.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(mat.scalar_type() != at::kBool,
                              "\"addmv_impl_cpu\" not implemented for 'Bool'");
}

// [n, k] x [k] -> [n]
Value matvec(LoweringContext& ctx, const at::Tensor& mat, const at::Tensor& vec) {
  return ctx.g().dot_general(ctx.tensor(mat), ctx.tensor(vec), {}, {}, {1}, {0});
}

// mv(self, vec): ATen's composite allocates a result shaped like vec and calls
// addmv_(result, self, vec, 0, 1), so its errors are addmv's with that result.
std::vector<Value> mv(LoweringContext& ctx, const Args& a) {
  const at::Tensor& mat = a.tensor(0);
  const at::Tensor& vec = a.tensor(1);
  const int64_t rows = mat.size(0);
  check_addmv(1, rows, rows, mat, vec);
  if (mat.scalar_type() == at::kBool && vec.scalar_type() == at::kBool &&
      empty_product(rows, mat.size(1))) {
    return {bool_product(ctx, mat, vec, {}, {1}, {0})};
  }
  check_addmv_dtypes(vec.scalar_type(), mat, vec);
  return {matvec(ctx, mat, vec)};
}

std::vector<Value> addmv(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& mat = a.tensor(1);
  const at::Tensor& vec = a.tensor(2);
  check_addmv(self.dim(), self.numel(), self.dim() > 0 ? self.size(0) : self.numel(), mat, vec);
  check_addmv_dtypes(self.scalar_type(), mat, vec);
  return {scaled_sum(ctx, self, matvec(ctx, mat, vec), a.scalar(3), a.scalar(4))};
}

// --------------------------------------------------------------------- dot / vdot / addr

// dot_check (Blas.cpp).
void check_dot(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(),
              "D and ", other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(),
              "dot : expected both vectors to have same dtype, but found ", self.scalar_type(),
              " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [",
              self.numel(), "] and src [", other.numel(),
              "] to have the same number of elements, but got ", self.numel(), " and ",
              other.numel(), " elements respectively");
}

// dot and vdot agree on real dtypes (vdot conjugates its first argument).
std::vector<Value> dot(LoweringContext& ctx, const Args& a, const char* name) {
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& other = a.tensor(1);
  check_dot(self, other);
  check_not_bool(self, name);
  return {ctx.g().dot_general(ctx.tensor(self), ctx.tensor(other), {}, {}, {0}, {0})};
}

// check_addr_scalar (LinearAlgebra.cpp).
void check_addr_scalar(c10::ScalarType st, const c10::Scalar& s, const char* name) {
  TORCH_CHECK(!s.isBoolean() || st == at::kBool, "Boolean ", name,
              " only supported for Boolean results.");
  TORCH_CHECK(at::isFloatingType(st) || at::isComplexType(st) || s.isIntegral(true),
              "For integral input tensors, argument ", name,
              " must not be a floating point number.");
}

// addr(self, vec1, vec2, beta, alpha) = beta * self + alpha * outer(vec1, vec2) in
// the three tensors' promoted dtype; for bool, (beta && self) || (alpha && v1 && v2)
// as the CPU kernel (addr_kernel) computes it.
std::vector<Value> addr(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  const at::Tensor& self = a.tensor(0);
  const at::Tensor& vec1 = a.tensor(1);
  const at::Tensor& vec2 = a.tensor(2);
  TORCH_CHECK(vec1.dim() == 1, "addr: Expected 1-D argument vec1, but got ", vec1.dim(), "-D");
  TORCH_CHECK(vec2.dim() == 1, "addr: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  const std::vector<int64_t> shape{vec1.size(0), vec2.size(0)};
  check_expandable(self, shape);
  at::native::ResultTypeState state{};
  for (const at::Tensor* t : {&self, &vec1, &vec2}) {
    state = at::native::update_result_type_state(*t, state);
  }
  const c10::ScalarType st = at::native::result_type(state);
  const c10::Scalar beta = a.scalar(3), alpha = a.scalar(4);
  check_addr_scalar(st, beta, "beta");
  check_addr_scalar(st, alpha, "alpha");
  const ir::DType dt = to_ir(st);
  Value v1 = g.broadcast_in_dim(g.convert(ctx.tensor(vec1), dt), shape, {0});
  Value v2 = g.broadcast_in_dim(g.convert(ctx.tensor(vec2), dt), shape, {1});
  if (st == at::kBool) {
    Value outer = alpha.toBool() ? g.binary(Op::kAnd, v1, v2) : g.constant(0, {dt, shape});
    if (!beta.toBool()) return {outer};
    return {g.binary(Op::kOr, broadcast_to(ctx, g.convert(ctx.tensor(self), dt), shape), outer)};
  }
  return {scaled_sum(ctx, self, g.binary(Op::kMul, v1, v2), beta, alpha)};
}

RegisterLowering r_mm("mm", mm);
RegisterLowering r_addmm("addmm", addmm);
RegisterLowering r_bmm("bmm", bmm);
RegisterLowering r_baddbmm("baddbmm", baddbmm);
RegisterLowering r_addbmm("addbmm", addbmm);
RegisterLowering r_mv("mv", mv);
RegisterLowering r_addmv("addmv", addmv);
RegisterLowering r_dot("dot", [](LoweringContext& c, const Args& a) { return dot(c, a, "dot"); });
RegisterLowering r_vdot("vdot",
                        [](LoweringContext& c, const Args& a) { return dot(c, a, "vdot"); });
RegisterLowering r_addr("addr", addr);

}  // namespace
}  // namespace ttpu::aten

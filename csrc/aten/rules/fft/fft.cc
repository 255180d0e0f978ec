// The FFT primitives every torch.fft function (and stft) reduces to:
//   _fft_r2c(Tensor self, int[] dim, int normalization, bool onesided)
//   _fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size)
//   _fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward)
// (native_functions.yaml; the torch.fft wrappers in SpectralOps.cpp resize the
// input to n, promote dtypes, conjugate for hfft/ihfft and pick the norm).
//
// stablehlo.fft transforms the trailing 1 to 3 dims, so the requested dims
// are transposed to the end and back, at most 3 at a time (a multi-dimensional
// DFT is separable). r2c is a 1-D RFFT over the last requested dim followed by
// FFTs over the others; c2r is the reverse (inverse DFTs, then an IRFFT over
// the last dim). XLA's IRFFT divides by n; PyTorch's inverse transforms are
// unnormalized unless asked, so the result is rescaled once:
// `normalization` is SpectralOps.cpp's fft_norm_mode (0 none, 1 by 1/sqrt(n),
// 2 by 1/n), n the fft_size_product of the signal sizes over `dim` (the output sizes
// for c2r), as _fft_normalization_scale computes it.
#include <algorithm>
#include <cmath>

#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::FftType;
using ir::Op;
using ValueList = std::vector<ir::Value>;

// `dim` wrapped and checked for repeats (ATen's errors).
std::vector<int64_t> fft_dims(const std::vector<int64_t>& dim, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t d : dim) {
    const int64_t w = wrap_dim(d, std::max<int64_t>(rank, 1));
    TORCH_CHECK(std::find(out.begin(), out.end(), w) == out.end(), "dims must be unique");
    out.push_back(w);
  }
  return out;
}

double norm_scale(int64_t normalization, int64_t n) {
  TORCH_CHECK(normalization >= 0 && normalization <= 2,
              "Invalid normalization mode: ", normalization);
  if (normalization == 0) return 1.0;
  return normalization == 1 ? 1.0 / std::sqrt(static_cast<double>(n)) : 1.0 / n;
}

// One stablehlo.fft over `group` (1 to 3 dims of x, in this order), moved to
// the end and back.
ir::Value fft_group(LoweringContext& ctx, ir::Value x, const std::vector<int64_t>& group,
                    FftType type, int64_t irfft_length = 0) {
  auto& g = ctx.g();
  const std::vector<int64_t> in = dims(ctx, x);
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(group.begin(), group.end(), d) == group.end()) perm.push_back(d);
  }
  std::vector<int64_t> lengths;
  for (int64_t d : group) {
    perm.push_back(d);
    lengths.push_back(in[d]);
  }
  if (type == FftType::kIrfft) lengths.back() = irfft_length;
  bool identity = true;
  for (int64_t i = 0; i < rank; ++i) identity = identity && perm[i] == i;
  ir::Value y = identity ? x : g.transpose(x, perm);
  y = g.fft(y, type, lengths);
  if (identity) return y;
  std::vector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[perm[i]] = i;
  return g.transpose(y, inverse);
}

ir::Value fft_conj(ir::Graph& g, ir::Value z) {
  return g.complex(g.real(z), g.unary(Op::kNeg, g.imag(z)));
}

// Unnormalized complex DFTs over `dims`, three at a time. The backward one is
// fft_conj(FFT(fft_conj(x))) rather than XLA's IFFT, whose 1/n would have to be
// multiplied back (two more roundings).
ir::Value c2c_dims(LoweringContext& ctx, ir::Value x, const std::vector<int64_t>& dims_list,
                   bool forward) {
  if (dims_list.empty()) return x;
  auto& g = ctx.g();
  if (!forward) x = fft_conj(g, x);
  for (size_t i = 0; i < dims_list.size(); i += 3) {
    const size_t end = std::min(dims_list.size(), i + 3);
    std::vector<int64_t> group(dims_list.begin() + i, dims_list.begin() + end);
    x = fft_group(ctx, x, group, FftType::kFft);
  }
  return forward ? x : fft_conj(g, x);
}

ir::Value fft_scaled(LoweringContext& ctx, ir::Value x, double factor) {
  if (factor == 1.0) return x;
  return ctx.g().binary(Op::kMul, x, full_like(ctx, x, factor));
}

int64_t fft_size_product(const std::vector<int64_t>& sizes, const std::vector<int64_t>& over) {
  int64_t n = 1;
  for (int64_t d : over) n *= sizes[d];
  return n;
}

bool has_zero(const std::vector<int64_t>& sizes) {
  return std::find(sizes.begin(), sizes.end(), 0) != sizes.end();
}

// _fft_r2c: a real float input; onesided keeps n/2+1 outputs along dim[-1].
ValueList fft_r2c(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  TORCH_CHECK(self.scalar_type() == at::kFloat || self.scalar_type() == at::kDouble,
              "Unsupported dtype ", self.scalar_type());
  const auto d = fft_dims(a.ints(1), self.dim());
  TORCH_CHECK(!d.empty(), "_fft_r2c: expected at least one dim");
  const int64_t normalization = a.integer(2);
  const bool onesided = a.boolean(3);
  const std::vector<int64_t> in = self.sizes().vec();
  std::vector<int64_t> out = in;
  if (onesided) out[d.back()] = in[d.back()] / 2 + 1;
  const DType ct = ir::complex_of(to_ir(self.scalar_type()));
  auto& g = ctx.g();
  if (has_zero(in)) return {g.constant(0, {ct, out})};
  ir::Value x = ctx.tensor(self);
  ir::Value y;
  if (onesided) {
    y = fft_group(ctx, x, {d.back()}, FftType::kRfft);
    y = c2c_dims(ctx, y, std::vector<int64_t>(d.begin(), d.end() - 1), true);
  } else {
    y = c2c_dims(ctx, g.convert(x, ct), d, true);
  }
  return {fft_scaled(ctx, y, norm_scale(normalization, fft_size_product(in, d)))};
}

// _fft_c2r: a Hermitian complex input, real output of size last_dim_size along
// dim[-1], whose first last_dim_size/2+1 input entries are read.
ValueList fft_c2r(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  TORCH_CHECK(self.is_complex(), "_fft_c2r expects a complex input tensor, but got ",
              self.scalar_type());
  const auto d = fft_dims(a.ints(1), self.dim());
  TORCH_CHECK(!d.empty(), "_fft_c2r: expected at least one dim");
  const int64_t normalization = a.integer(2);
  const int64_t n = a[3].toSymInt().expect_int();
  TORCH_CHECK(n >= 1, "Invalid number of data points (", n, ") specified");
  const int64_t last = d.back();
  std::vector<int64_t> out = self.sizes().vec();
  out[last] = n;
  const DType rt = ir::complex_part(to_ir(self.scalar_type()));
  auto& g = ctx.g();
  if (has_zero(out) || self.numel() == 0) return {g.constant(0, {rt, out})};
  ir::Value x = ctx.tensor(self);
  // Read exactly n/2+1 entries along the last dim (zero-padded when short).
  std::vector<int64_t> in = dims(ctx, x);
  const int64_t half = n / 2 + 1;
  if (in[last] > half) {
    std::vector<int64_t> start(in.size(), 0), limit = in, strides(in.size(), 1);
    limit[last] = half;
    x = g.slice(x, start, limit, strides);
  } else if (in[last] < half) {
    std::vector<int64_t> lo(in.size(), 0), hi(in.size(), 0), interior(in.size(), 0);
    hi[last] = half - in[last];
    x = g.pad(x, ctx.constant(0, dtype(ctx, x)), lo, hi, interior);
  }
  x = c2c_dims(ctx, x, std::vector<int64_t>(d.begin(), d.end() - 1), false);
  ir::Value y = fft_group(ctx, x, {last}, FftType::kIrfft, n);
  // XLA's IRFFT divided by n; undo that and normalize in one multiply.
  const int64_t total = fft_size_product(out, d);
  return {fft_scaled(ctx, y, static_cast<double>(n) * norm_scale(normalization, total))};
}

// _fft_c2c: complex to complex, forward (FFT) or backward (unnormalized IFFT).
ValueList fft_c2c(LoweringContext& ctx, const Args& a) {
  const at::Tensor& self = a.tensor(0);
  TORCH_CHECK(self.is_complex(), "_fft_c2c expects a complex input tensor, but got ",
              self.scalar_type());
  std::vector<int64_t> raw;
  for (const auto& s : a[1].toSymIntVector()) raw.push_back(s.expect_int());
  const auto d = fft_dims(raw, self.dim());
  const int64_t normalization = a.integer(2);
  const bool forward = a.boolean(3);
  const std::vector<int64_t> sizes = self.sizes().vec();
  ir::Value x = ctx.tensor(self);
  if (d.empty() || has_zero(sizes)) return {x};
  ir::Value y = c2c_dims(ctx, x, d, forward);
  return {fft_scaled(ctx, y, norm_scale(normalization, fft_size_product(sizes, d)))};
}

RegisterLowering r_r2c("_fft_r2c", fft_r2c);
RegisterLowering r_c2r("_fft_c2r", fft_c2r);
RegisterLowering r_c2c("_fft_c2c", fft_c2c);
// Complex in or out by definition: the same rules serve (complex.cc explains).
RegisterComplex c_r2c("_fft_r2c");
RegisterComplex c_c2r("_fft_c2r");
RegisterComplex c_c2c("_fft_c2c");

}  // namespace
}  // namespace ttpu::aten

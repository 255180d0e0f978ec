// End-to-end: complex types, real/imag/complex and the four FFT types compiled
// and run on the plugin, against a direct DFT.
#include <complex>
#include <numbers>

#include "stablehlo_run_util.h"

namespace ttpu::testing {
namespace {

using ir::DType;
using ir::FftType;
using ir::Graph;
using ir::Op;
using ir::Value;
using C = std::complex<double>;

// The unnormalized DFT of x (sign -1 forward, +1 inverse).
std::vector<C> dft(const std::vector<C>& x, int sign) {
  const size_t n = x.size();
  std::vector<C> out(n);
  for (size_t k = 0; k < n; ++k) {
    for (size_t j = 0; j < n; ++j) {
      out[k] += x[j] * std::polar(1.0, sign * 2 * std::numbers::pi * double(j * k) / double(n));
    }
  }
  return out;
}

template <typename T>
std::vector<C> complexes(const Array& a) {
  std::vector<C> out;
  for (const auto& z : a.as<std::complex<T>>()) out.emplace_back(z.real(), z.imag());
  return out;
}

void expect_close(const std::vector<C>& got, const std::vector<C>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::abs(got[i] - want[i]), tol * (1 + std::abs(want[i])))
        << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
  }
}

TEST(RunComplex, PartsAndConstant) {
  Graph g;
  Value re = g.parameter({DType::kF32, {3}});
  Value im = g.parameter({DType::kF32, {3}});
  Value z = g.binary(Op::kMul, g.complex(re, im), g.constant(2, {DType::kC64, {3}}));
  g.set_outputs({z, g.real(z), g.imag(z)});
  auto out =
      run(g, {array_of(DType::kF32, {3}, {1, -2, 0.5}), array_of(DType::kF32, {3}, {3, 4, -1})});
  expect_close(complexes<float>(out[0]), {C(2, 6), C(-4, 8), C(1, -2)}, 0, "z");
  expect_near(out[1].doubles(), {2, -4, 1}, 0, 0, "real");
  expect_near(out[2].doubles(), {6, 8, -2}, 0, 0, "imag");
}

TEST(RunComplex, FftTypes) {
  const std::vector<double> x{1, 2, -3, 0.5, 4};
  std::vector<C> xc(x.begin(), x.end());
  const std::vector<C> want = dft(xc, -1);
  for (DType real : {DType::kF32, DType::kF64}) {
    const DType cplx = ir::complex_of(real);
    const double tol = real == DType::kF32 ? 1e-5 : 1e-12;
    // RFFT: the first n/2+1 outputs.
    Graph g;
    Value p = g.parameter({real, {5}});
    Value spectrum = g.fft(p, FftType::kRfft, {5});
    g.set_outputs({spectrum, g.fft(spectrum, FftType::kIrfft, {5}),
                   g.fft(g.convert(p, cplx), FftType::kFft, {5})});
    auto out = run(g, {array_of(real, {5}, x)});
    auto got = real == DType::kF32 ? complexes<float>(out[0]) : complexes<double>(out[0]);
    expect_close(got, std::vector<C>(want.begin(), want.begin() + 3), tol, "rfft");
    expect_near(out[1].doubles(), x, tol, tol, "irfft(rfft(x)) == x");
    got = real == DType::kF32 ? complexes<float>(out[2]) : complexes<double>(out[2]);
    expect_close(got, want, tol, "fft");
  }
  // IFFT divides by n (XLA), so ifft(fft(x)) == x.
  Graph g;
  Value p = g.parameter({DType::kC64, {5}});
  g.set_outputs({g.fft(g.fft(p, FftType::kFft, {5}), FftType::kIfft, {5})});
  std::vector<std::complex<float>> v{{1, 1}, {2, 0}, {0, -1}, {3, 2}, {-1, 0}};
  auto out = run(g, {array<std::complex<float>>(DType::kC64, {5}, v)});
  std::vector<C> vc(v.begin(), v.end());
  expect_close(complexes<float>(out[0]), vc, 1e-5, "ifft(fft(x))");
}

// A 2-D FFT equals 1-D FFTs along each dim.
TEST(RunComplex, Fft2d) {
  Graph g;
  Value p = g.parameter({DType::kC128, {2, 3}});
  g.set_outputs({g.fft(p, FftType::kFft, {2, 3})});
  std::vector<std::complex<double>> v{{1, 0}, {2, 1}, {0, 0}, {-1, 3}, {0.5, 0}, {2, -2}};
  auto got = complexes<double>(run(g, {array<std::complex<double>>(DType::kC128, {2, 3}, v)})[0]);
  std::vector<C> rows;
  for (int r = 0; r < 2; ++r) {
    auto f = dft({v[3 * r], v[3 * r + 1], v[3 * r + 2]}, -1);
    rows.insert(rows.end(), f.begin(), f.end());
  }
  std::vector<C> want(6);
  for (int c = 0; c < 3; ++c) {
    auto f = dft({rows[c], rows[3 + c]}, -1);
    want[c] = f[0];
    want[3 + c] = f[1];
  }
  expect_close(got, want, 1e-12, "fft2");
}

}  // namespace
}  // namespace ttpu::testing

// Lowerings of the modified Bessel functions of the first and second kind:
// i0, special_i0e, special_i1, special_i1e and special_modified_bessel_{i0,i1,
// k0,k1}, special_scaled_modified_bessel_{k0,k1}.
//
// Each is ATen's scalar code (aten/src/ATen/native/Math.h: calc_i0, calc_i0e,
// calc_i1, calc_i1e, modified_bessel_*_forward), itself derived from the Cephes
// Mathematical Library's i0.c, i1.c, k0.c and k1.c (S. L. Moshier): Chebyshev
// expansions on [0, 8] and in 1/x beyond for I, on [0, 2] and in 1/x beyond
// for K. See special_util.h for how branches and dtypes are handled.
#include "aten/rules/special/special_util.h"

namespace ttpu::aten {
namespace {

using special::Math;
using ValueList = std::vector<ir::Value>;

// Cephes i0.c: Chebyshev coefficients for exp(-x) I0(x) on [0, 8]
// (lim x->0 = 1).
constexpr double kI0A[] = {
    -4.41534164647933937950E-18, 3.33079451882223809783E-17,  -2.43127984654795469359E-16,
    1.71539128555513303061E-15,  -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12,  -1.72682629144155570723E-11,
    9.67580903537323691224E-11,  -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8,  6.04699502254191894932E-8,   -2.67079385394061173391E-7,
    1.11738753912010371815E-6,   -4.41673835845875056359E-6,  1.64484480707288970893E-5,
    -5.75419501008210370398E-5,  1.88502885095841655729E-4,   -5.76375574538582365885E-4,
    1.63947561694133579842E-3,   -4.32430999505057594430E-3,  1.05464603945949983183E-2,
    -2.37374148058994688156E-2,  4.93052842396707084878E-2,   -9.49010970480476444210E-2,
    1.71620901522208775349E-1,   -3.04682672343198398683E-1,  6.76795274409476084995E-1};

// Cephes i0.c: Chebyshev coefficients for exp(-x) sqrt(x) I0(x) in the
// inverted interval [8, inf) (lim x->inf = 1/sqrt(2 pi)).
constexpr double kI0B[] = {
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17,  -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15,  3.81168066935262242075E-15,  -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14,  3.85277838274214270114E-13,
    7.18012445138366623367E-13,  -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11,  4.94060238822496958910E-10,
    3.39623202570838634515E-9,   2.26666899049817806459E-8,   2.04891858946906374183E-7,
    2.89137052083475648297E-6,   6.88975834691682398426E-5,   3.36911647825569408990E-3,
    8.04490411014108831608E-1};

// Cephes i1.c: Chebyshev coefficients for exp(-x) I1(x) / x on [0, 8]
// (lim x->0 = 1/2). ATen's float kernels use only the last 17 (Math.h
// chebyshev_coefficients_i1e_A<float>); the dropped ones are below f32's
// resolution.
constexpr double kI1A[] = {
    2.77791411276104639959E-18,  -2.11142121435816608115E-17, 1.55363195773620046921E-16,
    -1.10559694773538630805E-15, 7.60068429473540693410E-15,  -5.04218550472791168711E-14,
    3.22379336594557470981E-13,  -1.98397439776494371520E-12, 1.17361862988909016308E-11,
    -6.66348972350202774223E-11, 3.62559028155211703701E-10,  -1.88724975172282928790E-9,
    9.38153738649577178388E-9,   -4.44505912879632808065E-8,  2.00329475355213526229E-7,
    -8.56872026469545474066E-7,  3.47025130813767847674E-6,   -1.32731636560394358279E-5,
    4.78156510755005422638E-5,   -1.61760815825896745588E-4,  5.12285956168575772895E-4,
    -1.51357245063125314899E-3,  4.15642294431288815669E-3,   -1.05640848946261981558E-2,
    2.47264490306265168283E-2,   -5.29459812080949914269E-2,  1.02643658689847095384E-1,
    -1.76416518357834055153E-1,  2.52587186443633654823E-1};
constexpr size_t kI1AFloat = 17;

// Cephes i1.c: Chebyshev coefficients for exp(-x) sqrt(x) I1(x) in the
// inverted interval [8, inf) (lim x->inf = 1/sqrt(2 pi)); the float kernels
// use the last 7.
constexpr double kI1B[] = {
    7.51729631084210481353E-18,  4.41434832307170791151E-18,  -4.65030536848935832153E-17,
    -3.20952592199342395980E-17, 2.96262899764595013876E-16,  3.30820231092092828324E-16,
    -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
    4.27244001671195135429E-14,  -2.10154184277266431302E-14, -4.08355111109219731823E-13,
    -7.19855177624590851209E-13, 2.03562854414708950722E-12,  1.41258074366137813316E-11,
    3.25260358301548823856E-11,  -1.89749581235054123450E-11, -5.58974346219658380687E-10,
    -3.83538038596423702205E-9,  -2.63146884688951950684E-8,  -2.51223623787020892529E-7,
    -3.88256480887769039346E-6,  -1.10588938762623716291E-4,  -9.76109749136146840777E-3,
    7.78576235018280120474E-1};
constexpr size_t kI1BFloat = 7;

// Cephes k0.c: Chebyshev coefficients for K0(x) + log(x/2) I0(x) on [0, 2].
constexpr double kK0A[] = {1.37446543561352307156E-16, 4.25981614279661018399E-14,
                           1.03496952576338420167E-11, 1.90451637722020886025E-9,
                           2.53479107902614945675E-7,  2.28621210311945178607E-5,
                           1.26461541144692592338E-3,  3.59799365153615016266E-2,
                           3.44289899924628486886E-1,  -5.35327393233902768720E-1};

// Cephes k0.c: Chebyshev coefficients for exp(x) sqrt(x) K0(x) in the
// inverted interval [2, inf) (lim x->inf = sqrt(pi/2)).
constexpr double kK0B[] = {
    5.30043377268626276149E-18,  -1.64758043015242134646E-17, 5.21039150503902756861E-17,
    -1.67823109680541210385E-16, 5.51205597852431940784E-16,  -1.84859337734377901440E-15,
    6.34007647740507060557E-15,  -2.22751332699166985548E-14, 8.03289077536357521100E-14,
    -2.98009692317273043925E-13, 1.14034058820847496303E-12,  -4.51459788337394416547E-12,
    1.85594911495471785253E-11,  -7.95748924447710747776E-11, 3.57739728140030116597E-10,
    -1.69753450938905987466E-9,  8.57403401741422608519E-9,   -4.66048989768794782956E-8,
    2.76681363944501510342E-7,   -1.83175552271911948767E-6,  1.39498137188764993662E-5,
    -1.28495495816278026384E-4,  1.56988388573005337491E-3,   -3.14481013119645005427E-2,
    2.44030308206595545468E0};

// Cephes k1.c: Chebyshev coefficients for x (K1(x) - log(x/2) I1(x)) on [0, 2].
constexpr double kK1A[] = {
    -7.02386347938628759343E-18, -2.42744985051936593393E-15, -6.66690169419932900609E-13,
    -1.41148839263352776110E-10, -2.21338763073472585583E-8,  -2.43340614156596823496E-6,
    -1.73028895751305206302E-4,  -6.97572385963986435018E-3,  -1.22611180822657148235E-1,
    -3.53155960776544875667E-1,  1.52530022733894777053E0};

// Cephes k1.c: Chebyshev coefficients for exp(x) sqrt(x) K1(x) in the
// inverted interval [2, inf) (lim x->inf = sqrt(pi/2)).
constexpr double kK1B[] = {
    -5.75674448366501715755E-18, 1.79405087314755922667E-17,  -5.68946255844285935196E-17,
    1.83809354436663880070E-16,  -6.05704724837331885336E-16, 2.03870316562433424052E-15,
    -7.01983709041831346144E-15, 2.47715442448130437068E-14,  -8.97670518232499435011E-14,
    3.34841966607842919884E-13,  -1.28917396095102890680E-12, 5.13963967348173025100E-12,
    -2.12996783842756842877E-11, 9.21831518760500529508E-11,  -4.19035475934189648750E-10,
    2.01504975519703286596E-9,   -1.03457624656780970260E-8,  5.74108412545004946722E-8,
    -3.50196060308781257119E-7,  2.40648494783721712015E-6,   -1.93619797416608296024E-5,
    1.95215518471351631108E-4,   -2.85781685962277938680E-3,  1.03923736576817238437E-1,
    2.72062619048444266945E0};

// The two Chebyshev arguments of the I functions, for a = |x|.
ir::Value small_arg(Math& m, ir::Value a) { return m.sub(m.div(a, 2.0), 2.0); }
ir::Value large_arg(Math& m, ir::Value a) { return m.sub(m.div(32.0, a), 2.0); }

// exp(-|x|) I0(x) (calc_i0e).
ir::Value i0e(Math& m, ir::Value x) {
  ir::Value a = m.abs(x);
  ir::Value lo = m.chbevl(small_arg(m, a), kI0A);
  ir::Value hi = m.div(m.chbevl(large_arg(m, a), kI0B), m.sqrt(a));
  return m.sel(m.le(a, 8.0), lo, hi);
}

// I0(x) (calc_i0 and modified_bessel_i0_forward, the same arithmetic).
ir::Value i0(Math& m, ir::Value x) {
  ir::Value a = m.abs(x);
  ir::Value e = m.exp(a);
  ir::Value lo = m.mul(e, m.chbevl(small_arg(m, a), kI0A));
  ir::Value hi = m.div(m.mul(e, m.chbevl(large_arg(m, a), kI0B)), m.sqrt(a));
  return m.sel(m.le(a, 8.0), lo, hi);
}

// The Chebyshev sums of I1: `full` selects the whole tables (f64 kernels and
// modified_bessel_i1), else ATen's shortened float tables.
ir::Value i1_small_sum(Math& m, ir::Value a, bool full) {
  size_t n = full ? std::size(kI1A) : kI1AFloat;
  return m.chbevl(small_arg(m, a), kI1A + std::size(kI1A) - n, n);
}
ir::Value i1_large_sum(Math& m, ir::Value a, bool full) {
  size_t n = full ? std::size(kI1B) : kI1BFloat;
  return m.chbevl(large_arg(m, a), kI1B + std::size(kI1B) - n, n);
}

// I1 is odd: the value at |x|, negated below 0.
ir::Value odd(Math& m, ir::Value x, ir::Value at_abs) {
  return m.sel(m.lt(x, 0.0), m.neg(at_abs), at_abs);
}

// I1(x): calc_i1 (exp(x) x chbevl(...), the float tables for f32) or
// modified_bessel_i1_forward (chbevl(...) |x| exp(|x|), the whole tables).
ir::Value i1_impl(Math& m, ir::Value x, bool modified) {
  bool full = modified || m.dt() == ir::DType::kF64;
  ir::Value a = m.abs(x);
  ir::Value e = m.exp(a);
  ir::Value hi = m.div(m.mul(e, i1_large_sum(m, a, full)), m.sqrt(a));
  ir::Value lo = modified ? m.mul(m.mul(i1_small_sum(m, a, full), a), e)
                          : m.mul(m.mul(e, a), i1_small_sum(m, a, full));
  return odd(m, x, m.sel(m.le(a, 8.0), lo, hi));
}
ir::Value i1(Math& m, ir::Value x) { return i1_impl(m, x, false); }
ir::Value modified_i1(Math& m, ir::Value x) { return i1_impl(m, x, true); }

// exp(-|x|) I1(x) (calc_i1e).
ir::Value i1e(Math& m, ir::Value x) {
  bool full = m.dt() == ir::DType::kF64;
  ir::Value a = m.abs(x);
  ir::Value lo = m.mul(i1_small_sum(m, a, full), a);
  ir::Value hi = m.div(i1_large_sum(m, a, full), m.sqrt(a));
  return odd(m, x, m.sel(m.le(a, 8.0), lo, hi));
}

// K0 and K1 share their domain handling: inf at 0, NaN below (NaN stays NaN
// through the large-x branch).
ir::Value k_domain(Math& m, ir::Value x, ir::Value v) {
  v = m.sel(m.lt(x, 0.0), m.nan(), v);
  return m.sel(m.eq(x, 0.0), m.inf(), v);
}

// The small-x forms: K0 = chbevl(x^2 - 2, A) - log(x/2) I0(x) and
// K1 = log(x/2) I1(x) + chbevl(x^2 - 2, A) / x (modified_bessel_k*_forward).
ir::Value k0_small(Math& m, ir::Value x) {
  ir::Value s = m.chbevl(m.sub(m.mul(x, x), 2.0), kK0A);
  return m.sub(s, m.mul(m.log(m.mul(0.5, x)), i0(m, x)));
}
ir::Value k1_small(Math& m, ir::Value x) {
  ir::Value s = m.chbevl(m.sub(m.mul(x, x), 2.0), kK1A);
  return m.add(m.mul(m.log(m.mul(0.5, x)), modified_i1(m, x)), m.div(s, x));
}
// exp(x) sqrt(x) K(x) for x > 2.
ir::Value k_large_sum(Math& m, ir::Value x, const double* c, size_t n) {
  return m.chbevl(m.sub(m.div(8.0, x), 2.0), c, n);
}

ir::Value k0(Math& m, ir::Value x) {
  ir::Value hi = m.div(m.mul(m.exp(m.neg(x)), k_large_sum(m, x, kK0B, std::size(kK0B))), m.sqrt(x));
  return k_domain(m, x, m.sel(m.le(x, 2.0), k0_small(m, x), hi));
}
ir::Value k1(Math& m, ir::Value x) {
  ir::Value hi = m.div(m.mul(m.exp(m.neg(x)), k_large_sum(m, x, kK1B, std::size(kK1B))), m.sqrt(x));
  return k_domain(m, x, m.sel(m.le(x, 2.0), k1_small(m, x), hi));
}
// exp(x) K(x).
ir::Value k0e(Math& m, ir::Value x) {
  ir::Value hi = m.div(k_large_sum(m, x, kK0B, std::size(kK0B)), m.sqrt(x));
  ir::Value lo = m.mul(k0_small(m, x), m.exp(x));
  return k_domain(m, x, m.sel(m.le(x, 2.0), lo, hi));
}
ir::Value k1e(Math& m, ir::Value x) {
  ir::Value hi = m.div(k_large_sum(m, x, kK1B, std::size(kK1B)), m.sqrt(x));
  ir::Value lo = m.mul(k1_small(m, x), m.exp(x));
  return k_domain(m, x, m.sel(m.le(x, 2.0), lo, hi));
}

// i0 and i0e/i1/i1e take f16 and bf16, computed in f32 as CPU's
// vectorized kernels do (for i0e, CPU's scalar path, which small tensors
// take, runs the expansion in f16/bf16 arithmetic and is a few ulps less
// accurate). The modified_bessel_* kernels take neither.
template <ir::Value (*Fn)(Math&, ir::Value)>
ValueList halves_ok(LoweringContext& c, const Args& a) {
  return special::unary_rule<Fn>(c, a, "", true);
}
#define TTPU_NO_HALVES(fn, kernel) \
  [](LoweringContext& c, const Args& a) { return special::unary_rule<fn>(c, a, kernel, false); }

RegisterLowering kSpecialBesselRules[] = {
    {"i0", halves_ok<i0>},
    {"special_i0e", halves_ok<i0e>},
    {"special_i1", halves_ok<i1>},
    {"special_i1e", halves_ok<i1e>},
    {"special_modified_bessel_i0", TTPU_NO_HALVES(i0, "modified_bessel_i0_cpu")},
    {"special_modified_bessel_i1", TTPU_NO_HALVES(modified_i1, "modified_bessel_i1_cpu")},
    {"special_modified_bessel_k0", TTPU_NO_HALVES(k0, "modified_bessel_k0_cpu")},
    {"special_modified_bessel_k1", TTPU_NO_HALVES(k1, "modified_bessel_k1_cpu")},
    {"special_scaled_modified_bessel_k0", TTPU_NO_HALVES(k0e, "scaled_modified_bessel_k0_cpu")},
    {"special_scaled_modified_bessel_k1", TTPU_NO_HALVES(k1e, "scaled_modified_bessel_k1_cpu")},
};
#undef TTPU_NO_HALVES

}  // namespace
}  // namespace ttpu::aten

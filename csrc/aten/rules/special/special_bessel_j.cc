// Lowerings of the Bessel functions of the first and second kind of orders 0
// and 1 and the spherical Bessel function j0: special_bessel_{j0,j1,y0,y1},
// special_spherical_bessel_j0.
//
// Each is ATen's scalar code (aten/src/ATen/native/Math.h
// bessel_*_forward, spherical_bessel_j0_forward), itself Cephes' j0.c and
// j1.c (S. L. Moshier): a rational approximation in x^2 up to 5, beyond it
// Hankel's asymptotic form sqrt(2 / (pi x)) (P cos(x - phase) - Q sin(...))
// with P and Q rational in 25 / x^2. See special_util.h for how branches
// and dtypes are handled. The CPU kernels take f32 and f64 only.
#include "aten/rules/special/special_util.h"

namespace ttpu::aten {
namespace {

using special::Math;

constexpr double kPiOver4 = 0.785398163397448309615660845819875721;
constexpr double k3PiOver4 = 2.356194490192344928846982537459627163;
constexpr double kSqrt2OverPi = 0.797884560802865355879892119868763737;
constexpr double k2OverPi = 0.636619772367581343075535053490057448;

// Cephes j0.c: P0(25/x^2)/Q0 and Q0's numerator/denominator of the
// asymptotic form for x > 5, shared by J0 and Y0.
constexpr std::initializer_list<double> kJ0PP = {
    7.96936729297347051624E-4, 8.28352392107440799803E-2, 1.23953371646414299388E0,
    5.44725003058768775090E0,  8.74716500199817011941E0,  5.30324038235394892183E0,
    9.99999999999999997821E-1};
constexpr std::initializer_list<double> kJ0PQ = {
    9.24408810558863637013E-4, 8.56288474354474431428E-2, 1.25352743901058953537E0,
    5.47097740330417105182E0,  8.76190883237069594232E0,  5.30605288235394617618E0,
    1.00000000000000000218E0};
constexpr std::initializer_list<double> kJ0QP = {
    -1.13663838898469149931E-2, -1.28252718670509318512E0, -1.95539544257735972385E1,
    -9.32060152123768231369E1,  -1.77681167980488050595E2, -1.47077505154951170175E2,
    -5.14105326766599330220E1,  -6.05014350600728481186E0};
constexpr std::initializer_list<double> kJ0QQ = {6.43178256118178023184E1, 8.56430025976980587198E2,
                                                 3.88240183605401609683E3, 7.24046774195652478189E3,
                                                 5.93072701187316984827E3, 2.06209331660327847417E3,
                                                 2.42005740240291393179E2};
// Cephes j0.c: J0(x) / ((x^2 - r1)(x^2 - r2)) on [0, 5] as RP(x^2)/RQ(x^2),
// r1 and r2 the squares of J0's first two zeros.
constexpr std::initializer_list<double> kJ0RP = {
    -4.79443220978201773821E9, 1.95617491946556577543E12, -2.49248344360967716204E14,
    9.70862251047306323952E15};
constexpr std::initializer_list<double> kJ0RQ = {
    4.99563147152651017219E2,  1.73785401676374683123E5,  4.84409658339962045305E7,
    1.11855537045356834862E10, 2.11277520115489217587E12, 3.10518229857422583814E14,
    3.18121955943204943306E16, 1.71086294081043136091E18};
constexpr double kJ0R1 = 5.78318596294678452118E0;
constexpr double kJ0R2 = 3.04712623436620863991E1;
// Cephes j0.c: Y0(x) - (2/pi) log(x) J0(x) on [0, 5] as YP(x^2)/YQ(x^2).
constexpr std::initializer_list<double> kY0YP = {
    1.55924367855235737965E4,   -1.46639295903971606143E7, 5.43526477051876500413E9,
    -9.82136065717911466409E11, 8.75906394395366999549E13, -3.46628303384729719441E15,
    4.42733268572569800351E16,  -1.84950800436986690637E16};
constexpr std::initializer_list<double> kY0YQ = {
    1.04128353664259848412E3,  6.26107330137134956842E5,  2.68919633393814121987E8,
    8.64002487103935000337E10, 2.02979612750105546709E13, 3.17157752842975028269E15,
    2.50596256172653059228E17};

// Cephes j1.c: the same tables for order 1.
constexpr std::initializer_list<double> kJ1PP = {
    7.62125616208173112003E-4, 7.31397056940917570436E-2, 1.12719608129684925192E0,
    5.11207951146807644818E0,  8.42404590141772420927E0,  5.21451598682361504063E0,
    1.00000000000000000254E0};
constexpr std::initializer_list<double> kJ1PQ = {
    5.71323128072548699714E-4, 6.88455908754495404082E-2, 1.10514232634061696926E0,
    5.07386386128601488557E0,  8.39985554327604159757E0,  5.20982848682361821619E0,
    9.99999999999999997461E-1};
constexpr std::initializer_list<double> kJ1QP = {
    5.10862594750176621635E-2, 4.98213872951233449420E0, 7.58238284132545283818E1,
    3.66779609360150777800E2,  7.10856304998926107277E2, 5.97489612400613639965E2,
    2.11688757100572135698E2,  2.52070205858023719784E1};
constexpr std::initializer_list<double> kJ1QQ = {7.42373277035675149943E1, 1.05644886038262816351E3,
                                                 4.98641058337653607651E3, 9.56231892404756170795E3,
                                                 7.99704160447350683650E3, 2.82619278517639096600E3,
                                                 3.36093607810698293419E2};
constexpr std::initializer_list<double> kJ1RP = {
    -8.99971225705559398224E8, 4.52228297998194034323E11, -7.27494245221818276015E13,
    3.68295732863852883286E15};
constexpr std::initializer_list<double> kJ1RQ = {
    6.20836478118054335476E2,  2.56987256757748830383E5,  8.35146791431949253037E7,
    2.21511595479792499675E10, 4.74914122079991414898E12, 7.84369607876235854894E14,
    8.95222336184627338078E16, 5.32278620332680085395E18};
constexpr double kJ1R1 = 1.46819706421238932572E1;
constexpr double kJ1R2 = 4.92184563216946036703E1;
constexpr std::initializer_list<double> kY1YP = {
    1.26320474790178026440E9,   -6.47355876379160291031E11, 1.14509511541823727583E14,
    -8.12770255501325109621E15, 2.02439475713594898196E17,  -7.78877196265950026825E17};
constexpr std::initializer_list<double> kY1YQ = {
    5.94301592346128195359E2,  2.35564092943068577943E5,  7.34811944459721705660E7,
    1.87601316108706159478E10, 3.88231277496238566008E12, 6.20557727146953693363E14,
    6.87141087355300489866E16, 3.97270608116560655612E18};

// The tables of one order's asymptotic form.
struct Hankel {
  std::initializer_list<double> pp, pq, qp, qq;
  double phase;
};
const Hankel kOrder0{kJ0PP, kJ0PQ, kJ0QP, kJ0QQ, kPiOver4};
const Hankel kOrder1{kJ1PP, kJ1PQ, kJ1QP, kJ1QQ, k3PiOver4};

// sqrt(2/(pi x)) (P cos(x - phase) - (5/x) Q sin(x - phase)) for J, or
// sqrt(2/(pi x)) (P sin(x - phase) + (5/x) Q cos(x - phase)) for Y, where
// P = pp/pq and Q = qp/qq are evaluated at `w` (25/x^2 for order 0, (5/x)^2
// for order 1, as ATen writes them).
ir::Value hankel(Math& m, ir::Value x, ir::Value w, const Hankel& h, bool y) {
  ir::Value p = m.div(m.polevl(w, h.pp), m.polevl(w, h.pq));
  ir::Value q = m.mul(m.div(5.0, x), m.div(m.polevl(w, h.qp), m.polevl(w, h.qq)));
  ir::Value shifted = m.sub(x, h.phase);
  ir::Value s = m.sin(shifted), c = m.cos(shifted);
  ir::Value v = y ? m.add(m.mul(p, s), m.mul(q, c)) : m.sub(m.mul(p, c), m.mul(q, s));
  return m.div(m.mul(v, m.k(kSqrt2OverPi)), m.sqrt(x));
}
ir::Value w0(Math& m, ir::Value x) { return m.div(25.0, m.mul(x, x)); }
ir::Value w1(Math& m, ir::Value x) {
  ir::Value r = m.div(5.0, x);
  return m.mul(r, r);
}

// J0 (bessel_j0_forward), for x >= 0 or NaN.
ir::Value j0_nonneg(Math& m, ir::Value x) {
  ir::Value x2 = m.mul(x, x);
  ir::Value r = m.div(m.mul(m.mul(m.sub(x2, kJ0R1), m.sub(x2, kJ0R2)), m.polevl(x2, kJ0RP)),
                      m.polevl(x2, kJ0RQ));
  ir::Value tiny = m.sub(1.0, m.div(x2, 4.0));
  r = m.sel(m.lt(x, 1e-5), tiny, r);
  return m.sel(m.le(x, 5.0), r, hankel(m, x, w0(m, x), kOrder0, false));
}
ir::Value j0(Math& m, ir::Value x) { return j0_nonneg(m, m.abs(x)); }

// J1 (bessel_j1_forward): odd, so -J1(-x) below 0.
ir::Value j1_nonneg(Math& m, ir::Value x) {
  ir::Value x2 = m.mul(x, x);
  ir::Value r = m.div(m.polevl(x2, kJ1RP), m.polevl(x2, kJ1RQ));
  r = m.mul(m.mul(m.mul(r, x), m.sub(x2, kJ1R1)), m.sub(x2, kJ1R2));
  return m.sel(m.le(x, 5.0), r, hankel(m, x, w1(m, x), kOrder1, false));
}
ir::Value j1(Math& m, ir::Value x) {
  ir::Value neg = m.lt(x, 0.0);
  ir::Value v = j1_nonneg(m, m.sel(neg, m.neg(x), x));
  return m.sel(neg, m.neg(v), v);
}

// Y0 and Y1 are -inf at 0 and NaN below.
ir::Value y_domain(Math& m, ir::Value x, ir::Value v) {
  v = m.sel(m.lt(x, 0.0), m.nan(), v);
  return m.sel(m.eq(x, 0.0), m.k(-INFINITY), v);
}
ir::Value y0(Math& m, ir::Value x) {
  ir::Value x2 = m.mul(x, x);
  ir::Value r = m.div(m.polevl(x2, kY0YP), m.polevl(x2, kY0YQ));
  r = m.add(r, m.mul(m.mul(m.k(k2OverPi), m.log(x)), j0_nonneg(m, x)));
  return y_domain(m, x, m.sel(m.le(x, 5.0), r, hankel(m, x, w0(m, x), kOrder0, true)));
}
ir::Value y1(Math& m, ir::Value x) {
  ir::Value x2 = m.mul(x, x);
  ir::Value r = m.mul(x, m.div(m.polevl(x2, kY1YP), m.polevl(x2, kY1YQ)));
  ir::Value t = m.sub(m.mul(j1_nonneg(m, x), m.log(x)), m.div(1.0, x));
  r = m.add(r, m.mul(m.k(k2OverPi), t));
  return y_domain(m, x, m.sel(m.le(x, 5.0), r, hankel(m, x, w1(m, x), kOrder1, true)));
}

// j0(x) = sin(x)/x, by its Taylor series below 0.5 and 0 at +-inf
// (spherical_bessel_j0_forward).
ir::Value spherical_j0(Math& m, ir::Value x) {
  ir::Value x2 = m.mul(x, x);
  // 1 + x^2 (-1/6 + x^2 (1/120 + x^2 (-1/5040 + ...))), innermost first.
  const double coeffs[] = {-1.0 / 6.0,     1.0 / 120.0,       -1.0 / 5040.0,
                           1.0 / 362880.0, -1.0 / 39916800.0, 1.0 / 6227020800.0};
  ir::Value series = m.k(coeffs[5]);
  for (int i = 4; i >= 0; --i) series = m.add(m.k(coeffs[i]), m.mul(x2, series));
  series = m.add(m.k(1.0), m.mul(x2, series));
  ir::Value v = m.sel(m.lt(m.abs(x), 0.5), series, m.div(m.sin(x), x));
  return m.sel(m.is_inf(x), m.k(0.0), v);
}

#define TTPU_RULE(fn, kernel) \
  [](LoweringContext& c, const Args& a) { return special::unary_rule<fn>(c, a, kernel, false); }

RegisterLowering kSpecialBesselJRules[] = {
    {"special_bessel_j0", TTPU_RULE(j0, "bessel_j0_cpu")},
    {"special_bessel_j1", TTPU_RULE(j1, "bessel_j1_cpu")},
    {"special_bessel_y0", TTPU_RULE(y0, "bessel_y0_cpu")},
    {"special_bessel_y1", TTPU_RULE(y1, "bessel_y1_cpu")},
    {"special_spherical_bessel_j0", TTPU_RULE(spherical_j0, "spherical_bessel_j0_cpu")},
};
#undef TTPU_RULE

}  // namespace
}  // namespace ttpu::aten

// Lowerings of the normal-distribution special functions: special_ndtri,
// special_log_ndtr and special_erfcx. The CPU kernels take f32 and f64 only.
//
// ndtri is ATen's calc_ndtri (aten/src/ATen/native/Math.h), Cephes' ndtri.c
// (S. L. Moshier), in the input's dtype: a rational approximation in y - 1/2
// in the centre and in 1/sqrt(-2 log y) in the tails.
//
// erfcx(x) = exp(x^2) erfc(x). ATen evaluates it with S. G. Johnson's
// Faddeeva package (a table of 100 Chebyshev pieces). Here it is evaluated in
// f64 (for f32 too) from Cephes' erfc (ndtr.c), whose rational
// approximations for x >= 1 are of exp(x^2) erfc(x) itself: P(x)/Q(x) on
// [1, 8), R(x)/S(x) beyond; below 1, exp(x^2) (1 - erf(x)) has no
// cancellation. Past 50 it uses Johnson's continued fraction (as ATen does)
// and past 5e7 its first term 1/(x sqrt(pi)). Negative x use
// erfcx(x) = 2 exp(x^2) - erfcx(-x), which overflows (to inf) where CPU's
// does. f64 inside keeps the f32 result within an ulp or two of the true
// value, which CPU's f32 evaluation is too, except where CPU rounds x^2 to
// f32 before exponentiating it (x < 0): that rounding is repeated.
//
// log_ndtr is ATen's calc_log_ndtr with t = x / sqrt(2):
// log(erfcx(-t) / 2) - t^2 below -1, else log1p(-erfc(t) / 2), with the
// erfc/erfcx and logarithms in f64.
#include "aten/rules/special/special_util.h"

namespace ttpu::aten {
namespace {

using special::Math;

// Cephes ndtri.c: approximation for 0 <= |y - 0.5| <= 3/8.
constexpr std::initializer_list<double> kP0 = {-5.99633501014107895267E1, 9.80010754185999661536E1,
                                               -5.66762857469070293439E1, 1.39312609387279679503E1,
                                               -1.23916583867381258016E0};
constexpr std::initializer_list<double> kQ0 = {
    1.00000000000000000000E0,  1.95448858338141759834E0,  4.67627912898881538453E0,
    8.63602421390890590575E1,  -2.25462687854119370527E2, 2.00260212380060660359E2,
    -8.20372256168333339912E1, 1.59056225126211695515E1,  -1.18331621121330003142E0};
// Cephes ndtri.c: z = sqrt(-2 log y) in [2, 8], y in [exp(-32), exp(-2)].
constexpr std::initializer_list<double> kP1 = {
    4.05544892305962419923E0,   3.15251094599893866154E1,   5.71628192246421288162E1,
    4.40805073893200834700E1,   1.46849561928858024014E1,   2.18663306850790267539E0,
    -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4};
constexpr std::initializer_list<double> kQ1 = {
    1.00000000000000000000E0,   1.57799883256466749731E1,   4.53907635128879210584E1,
    4.13172038254672030440E1,   1.50425385692907503408E1,   2.50464946208309415979E0,
    -1.42182922854787788574E-1, -3.80806407691578277194E-2, -9.33259480895457427372E-4};
// Cephes ndtri.c: z in [8, 64], y down to exp(-2048).
constexpr std::initializer_list<double> kP2 = {
    3.23774891776946035970E0,  6.91522889068984211695E0,  3.93881025292474443415E0,
    1.33303460815807542389E0,  2.01485389549179081538E-1, 1.23716634817820021358E-2,
    3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9};
constexpr std::initializer_list<double> kQ2 = {
    1.00000000000000000000E0,  6.02427039364742014255E0,  3.67983563856160859403E0,
    1.37702099489081330271E0,  2.16236993594496635890E-1, 1.34204006088543189037E-2,
    3.28014464682127739104E-4, 2.89247864745380683936E-6, 6.79019408009981274425E-9};
constexpr double kExpM2 = 0.13533528323661269189;  // exp(-2)
constexpr double kSqrt2Pi = 2.50662827463100050242E0;

// Cephes ndtr.c erfc: exp(x^2) erfc(x) = P(x)/Q(x) on [1, 8) and R(x)/S(x)
// for x >= 8 (Q and S with their leading 1 written out).
constexpr std::initializer_list<double> kErfcP = {
    2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
    4.86371970985681366614E1,   1.96520832956077098242E2,  5.26445194995477358631E2,
    9.34528527171957607540E2,   1.02755188689515710272E3,  5.57535335369399327526E2};
constexpr std::initializer_list<double> kErfcQ = {1.0,
                                                  1.32281951154744992508E1,
                                                  8.67072140885989742329E1,
                                                  3.54937778887819891062E2,
                                                  9.75708501743205489753E2,
                                                  1.82390916687909736289E3,
                                                  2.24633760818710981792E3,
                                                  1.65666309194161350182E3,
                                                  5.57535340817727675546E2};
constexpr std::initializer_list<double> kErfcR = {
    5.64189583547755073984E-1, 1.27536670759978104416E0, 5.01905042251180477414E0,
    6.16021097993053585195E0,  7.40974269950448939160E0, 2.97886665372100240670E0};
constexpr std::initializer_list<double> kErfcS = {1.0,
                                                  2.26052863220117276590E0,
                                                  9.39603524938001434673E0,
                                                  1.20489539808096656605E1,
                                                  1.70814450747565897222E1,
                                                  9.60896809063285878198E0,
                                                  3.36907645100081516050E0};
constexpr double kInvSqrtPi = 0.56418958354775628694807945156;

ir::Value ndtri(Math& m, ir::Value y0) {
  ir::Value upper = m.gt(y0, m.sub(m.k(1.0), m.k(kExpM2)));
  ir::Value y = m.sel(upper, m.sub(1.0, y0), y0);
  // Centre.
  ir::Value c = m.sub(y, 0.5);
  ir::Value c2 = m.mul(c, c);
  ir::Value centre = m.add(c, m.mul(c, m.div(m.mul(c2, m.polevl(c2, kP0)), m.polevl(c2, kQ0))));
  centre = m.mul(centre, m.k(kSqrt2Pi));
  // Tails.
  ir::Value x = m.sqrt(m.mul(-2.0, m.log(y)));
  ir::Value x0 = m.sub(x, m.div(m.log(x), x));
  ir::Value z = m.div(1.0, x);
  ir::Value x1_near = m.div(m.mul(z, m.polevl(z, kP1)), m.polevl(z, kQ1));
  ir::Value x1_far = m.div(m.mul(z, m.polevl(z, kP2)), m.polevl(z, kQ2));
  ir::Value tail = m.sub(x0, m.sel(m.lt(x, 8.0), x1_near, x1_far));
  tail = m.sel(upper, tail, m.neg(tail));
  ir::Value r = m.sel(m.gt(y, kExpM2), centre, tail);
  r = m.sel(m.or_(m.lt(y0, 0.0), m.gt(y0, 1.0)), m.nan(), r);
  r = m.sel(m.eq(y0, 1.0), m.inf(), r);
  return m.sel(m.eq(y0, 0.0), m.k(-INFINITY), r);
}

// exp(x^2) erfc(x) for x >= 0 (and NaN), f64; see the file comment.
ir::Value erfcx_nonneg(Math& m, ir::Value x) {
  ir::Value x2 = m.mul(x, x);
  ir::Value small = m.mul(m.exp(x2), m.sub(1.0, m.erf(x)));
  ir::Value mid = m.div(m.polevl(x, kErfcP), m.polevl(x, kErfcQ));
  ir::Value large = m.div(m.polevl(x, kErfcR), m.polevl(x, kErfcS));
  // Johnson: 1/sqrt(pi) / (x + 0.5/(x + 1/(x + 1.5/(x + 2/x)))), simplified.
  ir::Value cf = m.div(m.mul(m.k(kInvSqrtPi), m.add(m.mul(x2, m.add(x2, 4.5)), m.k(2.0))),
                       m.mul(x, m.add(m.mul(x2, m.add(x2, 5.0)), m.k(3.75))));
  ir::Value huge = m.div(kInvSqrtPi, x);
  ir::Value r = m.sel(m.gt(x, 5e7), huge, cf);
  r = m.sel(m.le(x, 50.0), large, r);
  r = m.sel(m.lt(x, 8.0), mid, r);
  return m.sel(m.lt(x, 1.0), small, r);
}

// `x2` is x * x, which CPU's kernel rounds to the input dtype before the
// exponential of the reflection formula: with f32 that rounding changes
// 2 exp(x^2) by up to 88 ulps of f32 near the overflow, so it is repeated.
ir::Value erfcx64(Math& m, ir::Value x, ir::Value x2) {
  ir::Value pos = erfcx_nonneg(m, m.abs(x));
  ir::Value reflected = m.sub(m.mul(2.0, m.exp(x2)), pos);
  return m.sel(m.lt(x, 0.0), reflected, pos);
}

// erfc(t) = exp(-t^2) erfcx(t) for t >= 1, 1 - erf(t) below.
ir::Value erfc64(Math& m, ir::Value t) {
  ir::Value via_erfcx = m.mul(m.exp(m.neg(m.mul(t, t))), erfcx_nonneg(m, m.abs(t)));
  return m.sel(m.lt(t, 1.0), m.sub(1.0, m.erf(t)), via_erfcx);
}

// log_ndtr with t = x / sqrt(2) and t * t rounded to the input dtype, and
// below -1 the difference log(erfcx(-t) / 2) - t^2 taken in the input dtype,
// as CPU's kernel rounds them: there t^2 dominates and one rounding of it is
// already several f32 ulps of the result's magnitude, which a backward pass
// (exp(-x^2/2 - log_ndtr(x))) turns into a relative error beyond
// torch.testing's f32 tolerance if the rounding differs. The logarithms are
// taken in f64.
ir::Value log_ndtr(Math& m, ir::Value x) {
  auto& g = m.g();
  ir::Value t = m.mul(x, m.k(M_SQRT1_2));
  ir::Value t2 = m.mul(t, t);
  ir::Value t64 = g.convert(t, ir::DType::kF64);
  Math m64(m.ctx(), t64);
  ir::Value erfcx_neg_t = erfcx64(m64, m64.neg(t64), g.convert(t2, ir::DType::kF64));
  ir::Value log_erfcx = m64.log(m64.div(erfcx_neg_t, 2.0));
  ir::Value lower = m.sub(g.convert(log_erfcx, m.dt()), t2);
  ir::Value upper = m64.log1p(m64.neg(m64.div(erfc64(m64, t64), 2.0)));
  return m.sel(m.lt(x, -1.0), lower, g.convert(upper, m.dt()));
}
ir::Value erfcx(Math& m, ir::Value x) {
  ir::Value wide = m.g().convert(x, ir::DType::kF64);
  ir::Value x2 = m.g().convert(m.mul(x, x), ir::DType::kF64);
  Math m64(m.ctx(), wide);
  return m.g().convert(erfcx64(m64, wide, x2), m.dt());
}

RegisterLowering kSpecialNormalRules[] = {
    {"special_ndtri",
     [](LoweringContext& c, const Args& a) {
       return special::unary_rule<ndtri>(c, a, "ndtri_cpu", false);
     }},
    {"special_erfcx",
     [](LoweringContext& c, const Args& a) {
       return special::unary_rule<erfcx>(c, a, "erfcx_cpu", false);
     }},
    {"special_log_ndtr",
     [](LoweringContext& c, const Args& a) {
       return special::unary_rule<log_ndtr>(c, a, "log_ndtr_cpu", false);
     }},
};

}  // namespace
}  // namespace ttpu::aten

// Lowerings of elementwise binary ATen ops: PyTorch type promotion
// (at::native::result_type), broadcasting, and the alpha/rounding arguments.
#include "aten/ops_util.h"

namespace ttpu::aten {
namespace {

using ir::Op;

// Both operands promoted to PyTorch's result type and broadcast.
std::pair<ir::Value, ir::Value> promoted(LoweringContext& ctx, const Args& a, ir::DType* out) {
  *out = to_ir(result_type(a[0], a[1]));
  return broadcast_pair(ctx, operand(ctx, a[0], *out), operand(ctx, a[1], *out));
}

// add/sub: self op other * alpha. Bool add is logical or (PyTorch's behaviour).
std::vector<ir::Value> add_sub(LoweringContext& ctx, const Args& a, Op op) {
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  if (a.size() > 2 && !a.is_none(2)) {
    c10::Scalar alpha = a.scalar(2);
    TORCH_CHECK(ir::is_float(dt) || !alpha.isFloatingPoint(),
                "For integral input tensors, argument alpha must not be a floating point number.");
    TORCH_CHECK(dt != ir::DType::kBool || !alpha.isIntegral(false) || alpha.toLong() == 1 ||
                    op != Op::kSub,
                "Subtraction, the `-` operator, with two bool tensors is not supported.");
    bool is_one = alpha.isIntegral(true) ? alpha.toLong() == 1 : alpha.toDouble() == 1.0;
    if (!is_one) y = ctx.g().binary(Op::kMul, y, broadcast_to(ctx, ctx.scalar(alpha, dt), dims(ctx, y)));
  }
  if (dt == ir::DType::kBool) {
    TORCH_CHECK(op != Op::kSub, "Subtraction, the `-` operator, with two bool tensors is not "
                "supported. Use the `^` or `logical_xor()` operator instead.");
    return {ctx.g().binary(Op::kOr, x, y)};
  }
  return {ctx.g().binary(op, x, y)};
}

std::vector<ir::Value> mul(LoweringContext& ctx, const Args& a) {
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  return {ctx.g().binary(dt == ir::DType::kBool ? Op::kAnd : Op::kMul, x, y)};
}

// Python-style floor division / modulo on a truncating machine op.
ir::Value floor_divide(LoweringContext& ctx, ir::Value x, ir::Value y) {
  auto& g = ctx.g();
  ir::DType dt = dtype(ctx, x);
  if (ir::is_float(dt)) {
    // floor(x / y) computed as PyTorch does: (x - fmod(x, y)) / y, then floored,
    // which keeps exact quotients exact.
    ir::Value mod = g.binary(Op::kRem, x, y);
    ir::Value div = g.binary(Op::kDiv, g.binary(Op::kSub, x, mod), y);
    ir::Value zero = full_like(ctx, x, 0);
    ir::Value sign_differs = g.compare(ir::Cmp::kNE, g.compare(ir::Cmp::kLT, mod, zero),
                                       g.compare(ir::Cmp::kLT, y, zero));
    ir::Value adjust = g.select(g.binary(Op::kAnd, g.compare(ir::Cmp::kNE, mod, zero), sign_differs),
                                g.binary(Op::kSub, div, full_like(ctx, x, 1)), div);
    ir::Value floored = g.unary(Op::kFloor, adjust);
    // Round-off can leave floor one below the true quotient.
    ir::Value fixed = g.select(g.compare(ir::Cmp::kGT, g.binary(Op::kSub, adjust, floored),
                                         full_like(ctx, x, 0.5)),
                               g.binary(Op::kAdd, floored, full_like(ctx, x, 1)), floored);
    ir::Value q = g.binary(Op::kDiv, x, y);
    // Division by zero follows true division (inf/nan).
    return g.select(g.compare(ir::Cmp::kEQ, y, zero), q, fixed);
  }
  ir::Value q = g.binary(Op::kDiv, x, y);
  if (ir::is_unsigned(dt)) return q;
  ir::Value zero = full_like(ctx, x, 0);
  ir::Value r = g.binary(Op::kRem, x, y);
  ir::Value needs = g.binary(Op::kAnd, g.compare(ir::Cmp::kNE, r, zero),
                             g.compare(ir::Cmp::kNE, g.compare(ir::Cmp::kLT, r, zero),
                                       g.compare(ir::Cmp::kLT, y, zero)));
  return g.select(needs, g.binary(Op::kSub, q, full_like(ctx, x, 1)), q);
}

std::vector<ir::Value> div(LoweringContext& ctx, const Args& a,
                           std::optional<std::string> mode) {
  auto& g = ctx.g();
  ir::DType common = to_ir(result_type(a[0], a[1]));
  if (!mode.has_value()) {
    // True division: integers promote to the default float dtype.
    ir::DType dt = ir::is_float(common) ? common : to_ir(c10::get_default_dtype_as_scalartype());
    auto [x, y] = broadcast_pair(ctx, operand(ctx, a[0], dt), operand(ctx, a[1], dt));
    return {g.binary(Op::kDiv, x, y)};
  }
  auto [x, y] = broadcast_pair(ctx, operand(ctx, a[0], common), operand(ctx, a[1], common));
  if (*mode == "trunc") {
    if (ir::is_float(common)) {
      ir::Value q = g.binary(Op::kDiv, x, y);
      ir::Value zero = full_like(ctx, q, 0);
      return {g.select(g.compare(ir::Cmp::kLT, q, zero), g.unary(Op::kCeil, q),
                       g.unary(Op::kFloor, q))};
    }
    return {g.binary(Op::kDiv, x, y)};
  }
  TORCH_CHECK(*mode == "floor", "div expected rounding_mode to be one of None, 'trunc', or "
              "'floor' but found '", *mode, "'");
  return {floor_divide(ctx, x, y)};
}

std::vector<ir::Value> remainder(LoweringContext& ctx, const Args& a) {
  auto& g = ctx.g();
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  ir::Value r = g.binary(Op::kRem, x, y);
  if (ir::is_unsigned(dt)) return {r};
  ir::Value zero = full_like(ctx, r, 0);
  ir::Value fix = g.binary(Op::kAnd, g.compare(ir::Cmp::kNE, r, zero),
                           g.compare(ir::Cmp::kNE, g.compare(ir::Cmp::kLT, r, zero),
                                     g.compare(ir::Cmp::kLT, y, zero)));
  return {g.select(fix, g.binary(Op::kAdd, r, y), r)};
}

std::vector<ir::Value> simple(LoweringContext& ctx, const Args& a, Op op) {
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  return {ctx.g().binary(op, x, y)};
}

std::vector<ir::Value> bitwise(LoweringContext& ctx, const Args& a, Op op) {
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  TORCH_CHECK(!ir::is_float(dt), "\"bitwise_", op == Op::kAnd ? "and" : op == Op::kOr ? "or" : "xor",
              "_cpu\" not implemented for '", to_aten(dt), "'");
  return {ctx.g().binary(op, x, y)};
}

std::vector<ir::Value> logical(LoweringContext& ctx, const Args& a, Op op) {
  auto& g = ctx.g();
  auto as_bool = [&](const c10::IValue& v) {
    ir::Value t = ctx.tensor(v.toTensor());
    if (dtype(ctx, t) == ir::DType::kBool) return t;
    return g.compare(ir::Cmp::kNE, t, full_like(ctx, t, 0));
  };
  auto [x, y] = broadcast_pair(ctx, as_bool(a[0]), as_bool(a[1]));
  return {g.binary(op, x, y)};
}

std::vector<ir::Value> comparison(LoweringContext& ctx, const Args& a, ir::Cmp cmp) {
  ir::DType dt;
  auto [x, y] = promoted(ctx, a, &dt);
  return {ctx.g().compare(cmp, x, y)};
}

std::vector<ir::Value> pow_rule(LoweringContext& ctx, const Args& a) {
  return simple(ctx, a, Op::kPow);
}

std::vector<ir::Value> add(LoweringContext& c, const Args& a) { return add_sub(c, a, Op::kAdd); }
std::vector<ir::Value> sub(LoweringContext& c, const Args& a) { return add_sub(c, a, Op::kSub); }

RegisterLowering r_add_t("add.Tensor", add);
RegisterLowering r_add_s("add.Scalar", add);
RegisterLowering r_sub_t("sub.Tensor", sub);
RegisterLowering r_sub_s("sub.Scalar", sub);
RegisterLowering r_rsub_t("rsub.Tensor", [](LoweringContext& c, const Args& a) {
  std::vector<c10::IValue> swapped{a[1], a[0], a[2]};
  return add_sub(c, Args(swapped), Op::kSub);
});
RegisterLowering r_rsub_s("rsub.Scalar", [](LoweringContext& c, const Args& a) {
  std::vector<c10::IValue> swapped{a[1], a[0], a[2]};
  return add_sub(c, Args(swapped), Op::kSub);
});
RegisterLowering r_mul_t("mul.Tensor", mul);
RegisterLowering r_mul_s("mul.Scalar", mul);
RegisterLowering r_div_t("div.Tensor", [](LoweringContext& c, const Args& a) {
  return div(c, a, std::nullopt);
});
RegisterLowering r_div_s("div.Scalar", [](LoweringContext& c, const Args& a) {
  return div(c, a, std::nullopt);
});
RegisterLowering r_div_tm("div.Tensor_mode", [](LoweringContext& c, const Args& a) {
  return div(c, a, a.is_none(2) ? std::nullopt : std::optional(a[2].toStringRef()));
});
RegisterLowering r_div_sm("div.Scalar_mode", [](LoweringContext& c, const Args& a) {
  return div(c, a, a.is_none(2) ? std::nullopt : std::optional(a[2].toStringRef()));
});
RegisterLowering r_floor_divide("floor_divide", [](LoweringContext& c, const Args& a) {
  return div(c, a, std::string("floor"));
});
RegisterLowering r_rem_t("remainder.Tensor", remainder);
RegisterLowering r_rem_s("remainder.Scalar", remainder);
RegisterLowering r_fmod_t("fmod.Tensor", [](LoweringContext& c, const Args& a) {
  return simple(c, a, Op::kRem);
});
RegisterLowering r_fmod_s("fmod.Scalar", [](LoweringContext& c, const Args& a) {
  return simple(c, a, Op::kRem);
});
RegisterLowering r_maximum("maximum", [](LoweringContext& c, const Args& a) {
  return simple(c, a, Op::kMax);
});
RegisterLowering r_minimum("minimum", [](LoweringContext& c, const Args& a) {
  return simple(c, a, Op::kMin);
});
RegisterLowering r_atan2("atan2", [](LoweringContext& c, const Args& a) {
  ir::DType common = to_ir(result_type(a[0], a[1]));
  ir::DType dt = ir::is_float(common) ? common : to_ir(c10::get_default_dtype_as_scalartype());
  auto [x, y] = broadcast_pair(c, operand(c, a[0], dt), operand(c, a[1], dt));
  return std::vector<ir::Value>{c.g().binary(Op::kAtan2, x, y)};
});
RegisterLowering r_pow_tt("pow.Tensor_Tensor", pow_rule);
RegisterLowering r_pow_ts("pow.Tensor_Scalar", pow_rule);
RegisterLowering r_pow_st("pow.Scalar", pow_rule);
RegisterLowering r_and_t("bitwise_and.Tensor", [](LoweringContext& c, const Args& a) {
  return bitwise(c, a, Op::kAnd);
});
RegisterLowering r_or_t("bitwise_or.Tensor", [](LoweringContext& c, const Args& a) {
  return bitwise(c, a, Op::kOr);
});
RegisterLowering r_xor_t("bitwise_xor.Tensor", [](LoweringContext& c, const Args& a) {
  return bitwise(c, a, Op::kXor);
});
RegisterLowering r_land("logical_and", [](LoweringContext& c, const Args& a) {
  return logical(c, a, Op::kAnd);
});
RegisterLowering r_lor("logical_or", [](LoweringContext& c, const Args& a) {
  return logical(c, a, Op::kOr);
});
RegisterLowering r_lxor("logical_xor", [](LoweringContext& c, const Args& a) {
  return logical(c, a, Op::kXor);
});
RegisterLowering r_eq_t("eq.Tensor", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kEQ); });
RegisterLowering r_eq_s("eq.Scalar", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kEQ); });
RegisterLowering r_ne_t("ne.Tensor", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kNE); });
RegisterLowering r_ne_s("ne.Scalar", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kNE); });
RegisterLowering r_lt_t("lt.Tensor", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kLT); });
RegisterLowering r_lt_s("lt.Scalar", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kLT); });
RegisterLowering r_le_t("le.Tensor", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kLE); });
RegisterLowering r_le_s("le.Scalar", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kLE); });
RegisterLowering r_gt_t("gt.Tensor", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kGT); });
RegisterLowering r_gt_s("gt.Scalar", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kGT); });
RegisterLowering r_ge_t("ge.Tensor", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kGE); });
RegisterLowering r_ge_s("ge.Scalar", [](LoweringContext& c, const Args& a) { return comparison(c, a, ir::Cmp::kGE); });

}  // namespace
}  // namespace ttpu::aten

// Lowerings of the fused LSTM and GRU cells and their backward ops.
//
// ATen's nn.LSTM / nn.GRU / LSTMCell / GRUCell compute the two gate GEMMs
// themselves and, on CUDA and on a PrivateUse1 device, hand the pointwise rest
// to _thnn_fused_lstm_cell / _thnn_fused_gru_cell. Those have no CPU kernel, so
// the CPU fallback cannot run them: without these rules every LSTM or GRU on
// tpu failed. The math is the cell's definition (torch.nn.LSTMCell/GRUCell
// docs); it is checked against CPU's unfused path in tests/ops/test_rnn_cell.py.
//
// The workspace is private to a forward/backward pair (autograd passes the
// forward's to the backward): LSTM keeps its four activated gates [i, f, g, o]
// as [B, 4H]; GRU keeps [r, z, n, hn, hx] as [B, 5H] (hn = hidden's n part with
// its bias). Half and bfloat16 inputs (autocast) are computed in float32 and
// rounded once, as CUDA's kernels do with their accumulate type.
#include "aten/rules/reduce/reduce_util.h"

namespace ttpu::aten {
namespace {

using ir::DType;
using ir::Op;
using ir::Value;

struct Cell {
  LoweringContext& ctx;
  DType io;   // the tensors' dtype
  DType acc;  // the compute dtype
  int64_t batch = 0;
  int64_t hidden = 0;

  ir::Graph& g() { return ctx.g(); }

  Value in(const at::Tensor& t) { return g().convert(ctx.tensor(t), acc); }
  Value out(Value v) { return g().convert(v, io); }
  // Columns [k * H, (k + 1) * H) of a [B, n * H] value.
  Value part(Value v, int64_t k) {
    return g().slice(v, {0, k * hidden}, {batch, (k + 1) * hidden}, {1, 1});
  }
  Value one() { return g().constant(1, {acc, {batch, hidden}}); }
  Value sigmoid(Value v) { return g().unary(Op::kLogistic, v); }
  Value tanh(Value v) { return g().unary(Op::kTanh, v); }
  Value add(Value a, Value b) { return g().binary(Op::kAdd, a, b); }
  Value sub(Value a, Value b) { return g().binary(Op::kSub, a, b); }
  Value mul(Value a, Value b) { return g().binary(Op::kMul, a, b); }
  // d sigmoid = s (1 - s); d tanh = 1 - t^2, from the activated values.
  Value dsigmoid(Value s) { return mul(s, sub(one(), s)); }
  Value dtanh(Value t) { return sub(one(), mul(t, t)); }
  // gates (+ bias broadcast over the batch).
  Value with_bias(Value gates, const std::optional<at::Tensor>& bias) {
    if (!bias.has_value() || !bias->defined()) return gates;
    return add(gates, broadcast_to(ctx, in(*bias), dims(ctx, gates)));
  }
  Value bias_grad(Value grad_gates) {
    return out(reduce(ctx, grad_gates, {0}, false, ir::Reducer::kAdd));
  }
};

Cell make_cell(LoweringContext& ctx, const at::Tensor& gates, const at::Tensor& state,
               int64_t n_gates) {
  TORCH_CHECK(gates.dim() == 2 && state.dim() == 2, ctx.op(),
              ": expected 2-d gates and state, got ", gates.sizes(), " and ", state.sizes());
  TORCH_CHECK(gates.size(0) == state.size(0) && gates.size(1) == n_gates * state.size(1), ctx.op(),
              ": gates of size ", gates.sizes(), " do not fit a state of size ", state.sizes());
  const DType io = to_ir(gates.scalar_type());
  const DType acc = (io == DType::kF16 || io == DType::kBF16) ? DType::kF32 : io;
  return Cell{ctx, io, acc, state.size(0), state.size(1)};
}

// _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?, hidden_bias?)
//   -> (hy, cy, workspace)
std::vector<Value> lstm_cell(LoweringContext& ctx, const Args& a) {
  Cell c = make_cell(ctx, a.tensor(0), a.tensor(2), 4);
  TORCH_CHECK(a.tensor(1).sizes() == a.tensor(0).sizes(), ctx.op(),
              ": input_gates and hidden_gates differ in size");
  Value gates = c.add(c.in(a.tensor(0)), c.in(a.tensor(1)));
  gates = c.with_bias(c.with_bias(gates, a.opt_tensor(3)), a.opt_tensor(4));
  const Value i = c.sigmoid(c.part(gates, 0)), f = c.sigmoid(c.part(gates, 1));
  const Value gg = c.tanh(c.part(gates, 2)), o = c.sigmoid(c.part(gates, 3));
  const Value cy = c.add(c.mul(f, c.in(a.tensor(2))), c.mul(i, gg));
  const Value hy = c.mul(o, c.tanh(cy));
  const Value workspace = c.g().concatenate({i, f, gg, o}, 1);
  return {c.out(hy), c.out(cy), c.out(workspace)};
}

// _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy, workspace,
//   has_bias) -> (grad_gates, grad_cx, grad_bias)
std::vector<Value> lstm_cell_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& cx = a.tensor(2);
  Cell c = make_cell(ctx, a.tensor(4), cx, 4);
  const Value ws = c.in(a.tensor(4));
  const Value i = c.part(ws, 0), f = c.part(ws, 1), gg = c.part(ws, 2), o = c.part(ws, 3);
  const Value tanh_cy = c.tanh(c.in(a.tensor(3)));
  const auto grad_hy = a.opt_tensor(0), grad_cy = a.opt_tensor(1);
  const Value zero = c.g().constant(0, {c.acc, {c.batch, c.hidden}});
  const Value ghy = grad_hy && grad_hy->defined() ? c.in(*grad_hy) : zero;
  const Value gcy = grad_cy && grad_cy->defined() ? c.in(*grad_cy) : zero;
  // The cell state's total gradient: through hy = o tanh(cy), plus grad_cy.
  const Value gc = c.add(c.mul(c.mul(ghy, o), c.dtanh(tanh_cy)), gcy);
  const Value gi = c.mul(c.mul(gc, gg), c.dsigmoid(i));
  const Value gf = c.mul(c.mul(gc, c.in(cx)), c.dsigmoid(f));
  const Value gg_pre = c.mul(c.mul(gc, i), c.dtanh(gg));
  const Value go = c.mul(c.mul(ghy, tanh_cy), c.dsigmoid(o));
  const Value grad_gates = c.g().concatenate({gi, gf, gg_pre, go}, 1);
  const Value grad_bias = a.boolean(5) ? c.bias_grad(grad_gates) : Value{};
  return {c.out(grad_gates), c.out(c.mul(gc, f)), grad_bias};
}

// _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?, hidden_bias?)
//   -> (hy, workspace)
std::vector<Value> gru_cell(LoweringContext& ctx, const Args& a) {
  Cell c = make_cell(ctx, a.tensor(0), a.tensor(2), 3);
  TORCH_CHECK(a.tensor(1).sizes() == a.tensor(0).sizes(), ctx.op(),
              ": input_gates and hidden_gates differ in size");
  const Value ig = c.with_bias(c.in(a.tensor(0)), a.opt_tensor(3));
  const Value hg = c.with_bias(c.in(a.tensor(1)), a.opt_tensor(4));
  const Value hx = c.in(a.tensor(2));
  const Value r = c.sigmoid(c.add(c.part(ig, 0), c.part(hg, 0)));
  const Value z = c.sigmoid(c.add(c.part(ig, 1), c.part(hg, 1)));
  const Value hn = c.part(hg, 2);
  const Value n = c.tanh(c.add(c.part(ig, 2), c.mul(r, hn)));
  const Value hy = c.add(n, c.mul(z, c.sub(hx, n)));  // (1 - z) n + z hx
  const Value workspace = c.g().concatenate({r, z, n, hn, hx}, 1);
  return {c.out(hy), c.out(workspace)};
}

// _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias)
//   -> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)
std::vector<Value> gru_cell_backward(LoweringContext& ctx, const Args& a) {
  const at::Tensor& grad_hy = a.tensor(0);
  Cell c = make_cell(ctx, a.tensor(1), grad_hy, 5);
  const Value ws = c.in(a.tensor(1));
  const Value r = c.part(ws, 0), z = c.part(ws, 1), n = c.part(ws, 2), hn = c.part(ws, 3),
              hx = c.part(ws, 4);
  const Value gh = c.in(grad_hy);
  const Value gz = c.mul(c.mul(gh, c.sub(hx, n)), c.dsigmoid(z));
  const Value gn = c.mul(c.mul(gh, c.sub(c.one(), z)), c.dtanh(n));
  const Value gr = c.mul(c.mul(gn, hn), c.dsigmoid(r));
  const Value grad_input = c.g().concatenate({gr, gz, gn}, 1);
  const Value grad_hidden = c.g().concatenate({gr, gz, c.mul(gn, r)}, 1);
  const bool bias = a.boolean(2);
  return {c.out(grad_input), c.out(grad_hidden), c.out(c.mul(gh, z)),
          bias ? c.bias_grad(grad_input) : Value{}, bias ? c.bias_grad(grad_hidden) : Value{}};
}

RegisterLowering r_lstm("_thnn_fused_lstm_cell", lstm_cell);
RegisterLowering r_lstm_bwd("_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward);
RegisterLowering r_gru("_thnn_fused_gru_cell", gru_cell);
RegisterLowering r_gru_bwd("_thnn_fused_gru_cell_backward", gru_cell_backward);

}  // namespace
}  // namespace ttpu::aten

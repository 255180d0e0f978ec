// The name of each IR op: the table behind ir::op_name (graph.h), used in
// error messages, the emitter's element-wise names and dumps.
#include "ir/graph.h"

namespace ttpu::ir {

const char* op_name(Op op) {
  switch (op) {
    case Op::kParameter: return "parameter";
    case Op::kConstant: return "constant";
    case Op::kIota: return "iota";
    case Op::kNeg: return "negate";
    case Op::kAbs: return "abs";
    case Op::kExp: return "exponential";
    case Op::kExpm1: return "exponential_minus_one";
    case Op::kLog: return "log";
    case Op::kLog1p: return "log_plus_one";
    case Op::kSqrt: return "sqrt";
    case Op::kRsqrt: return "rsqrt";
    case Op::kCbrt: return "cbrt";
    case Op::kTanh: return "tanh";
    case Op::kLogistic: return "logistic";
    case Op::kSin: return "sine";
    case Op::kCos: return "cosine";
    case Op::kTan: return "tan";
    case Op::kFloor: return "floor";
    case Op::kCeil: return "ceil";
    case Op::kRoundNearestEven: return "round_nearest_even";
    case Op::kSign: return "sign";
    case Op::kNot: return "not";
    case Op::kIsFinite: return "is_finite";
    case Op::kErf: return "erf";
    case Op::kAtan: return "atan";
    case Op::kAsin: return "asin";
    case Op::kAcos: return "acos";
    case Op::kSinh: return "sinh";
    case Op::kCosh: return "cosh";
    case Op::kAsinh: return "asinh";
    case Op::kAcosh: return "acosh";
    case Op::kAtanh: return "atanh";
    case Op::kLgamma: return "lgamma";
    case Op::kDigamma: return "digamma";
    case Op::kErfInv: return "erf_inv";
    case Op::kPopcnt: return "popcnt";
    case Op::kAdd: return "add";
    case Op::kSub: return "subtract";
    case Op::kMul: return "multiply";
    case Op::kDiv: return "divide";
    case Op::kRem: return "remainder";
    case Op::kPow: return "power";
    case Op::kMax: return "maximum";
    case Op::kMin: return "minimum";
    case Op::kAnd: return "and";
    case Op::kOr: return "or";
    case Op::kXor: return "xor";
    case Op::kAtan2: return "atan2";
    case Op::kShiftLeft: return "shift_left";
    case Op::kShiftRightArithmetic: return "shift_right_arithmetic";
    case Op::kShiftRightLogical: return "shift_right_logical";
    case Op::kCompare: return "compare";
    case Op::kSelect: return "select";
    case Op::kClamp: return "clamp";
    case Op::kConvert: return "convert";
    case Op::kBitcastConvert: return "bitcast_convert";
    case Op::kReshape: return "reshape";
    case Op::kBroadcastInDim: return "broadcast_in_dim";
    case Op::kTranspose: return "transpose";
    case Op::kSlice: return "slice";
    case Op::kConcatenate: return "concatenate";
    case Op::kPad: return "pad";
    case Op::kReverse: return "reverse";
    case Op::kDynamicSlice: return "dynamic_slice";
    case Op::kDynamicUpdateSlice: return "dynamic_update_slice";
    case Op::kGather: return "gather";
    case Op::kScatter: return "scatter";
    case Op::kReduce: return "reduce";
    case Op::kReduceWindow: return "reduce_window";
    case Op::kSelectAndScatter: return "select_and_scatter";
    case Op::kSort: return "sort";
    case Op::kDotGeneral: return "dot_general";
    case Op::kConvolution: return "convolution";
    case Op::kCholesky: return "cholesky";
    case Op::kTriangularSolve: return "triangular_solve";
    case Op::kCustomCall: return "custom_call";
    case Op::kRngBitGenerator: return "rng_bit_generator";
    case Op::kReal: return "real";
    case Op::kImag: return "imag";
    case Op::kComplex: return "complex";
    case Op::kFft: return "fft";
    case Op::kCall: return "call";
  }
  return "unknown_op";
}

}  // namespace ttpu::ir

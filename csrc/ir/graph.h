// The IR: one op table (Op, grouped) and a Graph of nodes in SSA order.
//
// A Graph is built by the aten layer's lowering rules through the builder methods
// below; each builder checks its operands and computes its result type, so a rule
// never writes a type by hand. Parameters are the program's inputs (device
// buffers, and Python scalars passed as 0-d buffers so a changing value never
// recompiles); constants are structural (0, 1, -inf) and part of the key.
//
// fingerprint() serialises the whole structure (ops, attributes, types, operand
// wiring, outputs, donations) to a compact byte string: equal fingerprints mean the same
// program, so it is the exact in-memory cache key (no hash collisions to reason
// about). No torch include.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/types.h"

namespace ttpu::ir {

enum class Op : uint8_t {
  // leaves
  kParameter,
  kConstant,  // splat literal: attrs.literal (bit pattern of the value)
  kIota,      // attrs.dim
  // elementwise unary (result type = operand type unless noted)
  kNeg,
  kAbs,
  kExp,
  kExpm1,
  kLog,
  kLog1p,
  kSqrt,
  kRsqrt,
  kCbrt,
  kTanh,
  kLogistic,
  kSin,
  kCos,
  kTan,
  kFloor,
  kCeil,
  kRoundNearestEven,
  kSign,
  kNot,
  kIsFinite /*->i1*/,
  kErf,
  kAtan,
  kAsin,
  kAcos,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kLgamma,
  kDigamma,
  kErfInv,
  kPopcnt,
  // elementwise binary (same operand types; shapes must already match)
  // (kMax/kMin on floats propagate NaN, as IEEE maximum and PyTorch do)
  kAdd,
  kSub,
  kMul,
  kDiv,
  kRem,
  kPow,
  kMax,
  kMin,
  kAnd,
  kOr,
  kXor,
  kAtan2,
  kShiftLeft,
  kShiftRightArithmetic,
  kShiftRightLogical,
  // other elementwise
  kCompare,         // attrs.cmp; result i1
  kSelect,          // (pred i1, on_true, on_false)
  kClamp,           // (min, operand, max)
  kConvert,         // to attrs.dtype
  kBitcastConvert,  // to attrs.dtype (same width)
  // movement
  kReshape,
  kBroadcastInDim,      // attrs.ints[0] = broadcast_dimensions
  kTranspose,           // attrs.ints[0] = permutation
  kSlice,               // ints[0] start, ints[1] limit, ints[2] strides
  kConcatenate,         // attrs.dim
  kPad,                 // (operand, pad value); ints[0] low, ints[1] high, ints[2] interior
  kReverse,             // ints[0] dimensions
  kDynamicSlice,        // (operand, scalar index...); ints[0] slice sizes
  kDynamicUpdateSlice,  // (operand, update, scalar index...)
  kGather,              // (operand, indices); see GatherDims
  kScatter,             // (operand, indices, updates); see ScatterDims, attrs.reducer
  // reductions and windows (the combining region is attrs.reducer)
  kReduce,            // (operands..., inits...); ints[0] dimensions; multi-result
  kReduceWindow,      // (operand, init); ints: window, strides, base dil, win dil, pad lo, pad hi
  kSelectAndScatter,  // (operand, source, init); ints: window, strides, pad lo, pad hi;
                      // select = attrs.cmp (GE for max pool), scatter = add
  kSort,              // (operands...); attrs.dim; attrs.cmp on operand 0 (LT/GT); multi-result
  // linear algebra
  kDotGeneral,       // ints: lhs batch, rhs batch, lhs contract, rhs contract
  kConvolution,      // see ConvDims
  kCholesky,         // (a [..., n, n]); attrs.linalg.lower; the other triangle is unspecified
  kTriangularSolve,  // (a [..., n, n], b); attrs.linalg; solves op(a) x = b (left) or x op(a) = b
  kCustomCall,       // (operands...); attrs.custom_call; multi-result (types given by the caller)
  // random
  kRngBitGenerator,  // (state ui64[2]) -> (new state, bits of result type); THREE_FRY
  // complex numbers and spectral transforms
  kReal,     // complex -> its real part (f32 for complex<f32>)
  kImag,     // complex -> its imaginary part
  kComplex,  // (real, imag) of the same float type -> complex
  kFft,      // attrs.dim = FftType, ints[0] = fft_length (the trailing dims transformed)
  // user kernels
  kCall,  // (operands...); attrs.call; multi-result: a call of a user's StableHLO function
};

// stablehlo.fft's fft_type. FFT/IFFT: complex -> complex; RFFT: float ->
// complex, last dim fft_length[-1] / 2 + 1; IRFFT: complex -> float, last dim
// fft_length[-1]. IFFT and IRFFT divide by the product of fft_length (XLA).
enum class FftType : uint8_t { kFft, kIfft, kRfft, kIrfft };

// "add", "dot_general", ...: the StableHLO op's name where StableHLO has the op
// ("negate", "exponential", "sine"), else a descriptive one ("erf", "atan").
const char* op_name(Op op);

enum class Cmp : uint8_t { kEQ, kNE, kLT, kLE, kGT, kGE };

// The combining function of reduce / reduce_window / scatter.
// kArgMax/kArgMin reduce (values, indices) pairs, first index wins on ties;
// NaN wins for both, so the first NaN's index is the result (PyTorch's argmax
// and argmin semantics: torch.argmin([1, nan]) == 1). kMax/kMin on floats
// propagate NaN. kReplace is scatter only.
enum class Reducer : uint8_t {
  kNone,
  kAdd,
  kMul,
  kMax,
  kMin,
  kAnd,
  kOr,
  kArgMax,
  kArgMin,
  kReplace
};

struct Value {
  int32_t node = -1;
  int32_t index = 0;  // which result of a multi-result node
  bool valid() const { return node >= 0; }
};

struct GatherDims {
  std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map, slice_sizes;
  int64_t index_vector_dim = 0;
};
struct ScatterDims {
  std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
};
// Convolution with explicit layouts: input [batch, feature, spatial...],
// kernel [out feature, in feature, spatial...], output [batch, feature, spatial...]
// (PyTorch's NCHW / OIHW), so only sizes vary.
// An empty vector given to convolution() means the default (strides and
// dilations 1, padding 0); the node stores the filled-in form, so equal
// programs have equal fingerprints. The same holds for reduce_window's and
// select_and_scatter's strides, dilations and padding.
struct ConvDims {
  std::vector<int64_t> window_strides, padding_low, padding_high, lhs_dilation, rhs_dilation;
  int64_t feature_group_count = 1;
  int64_t batch_group_count = 1;
};

// cholesky / triangular_solve flags (the StableHLO attributes of the same names;
// transpose_a = TRANSPOSE when set, NO_TRANSPOSE otherwise).
struct LinalgFlags {
  bool lower = false;
  bool left_side = false;
  bool unit_diagonal = false;
  bool transpose_a = false;
};
// A custom call that XLA itself expands when it compiles (on the CPU plugin:
// "Qr", "ProductOfElementaryHouseholderReflectors", "Eigh"; see graph.cc).
struct CustomCall {
  std::string target;          // call_target_name
  std::string backend_config;  // passed verbatim
};

// A user kernel (a JAX function's lowering, hand-written StableHLO) prepared
// for inlining: its functions renamed to private symbols that start with a
// prefix derived from `key`, so several kernels (and our @main) coexist in one
// module. `key` is a content hash of the user's text and is what the
// fingerprint records, so equal keys must mean equal `funcs`.
struct UserFunction {
  std::string name;                         // the user's name for the kernel, for error messages
  std::string key;                          // content hash (hex) of the kernel text
  std::string entry;                        // the symbol a call names (without '@')
  std::string funcs;                        // the private func.func definitions, MLIR text
  std::vector<TensorType> params, results;  // entry's signature
};

struct Attrs {
  std::vector<std::vector<int64_t>> ints;
  int64_t dim = 0;
  DType dtype = DType::kF32;
  Cmp cmp = Cmp::kEQ;
  Reducer reducer = Reducer::kNone;
  uint64_t literal = 0;  // constant value: bit pattern in the result dtype,
                         // zero-extended (types.h literal_bits)
  GatherDims gather;
  ScatterDims scatter;
  ConvDims conv;
  LinalgFlags linalg;
  CustomCall custom_call;
  std::shared_ptr<const UserFunction> call;  // kCall only
};

struct Node {
  Op op;
  std::vector<Value> operands;
  std::vector<TensorType> results;
  Attrs attrs;
};

class Graph {
 public:
  // --- leaves
  Value parameter(const TensorType& type);
  // A splat constant. `value` is converted to `type.dtype` (ints exactly,
  // floats rounded as a C cast would, bools as value != 0).
  Value constant(double value, const TensorType& type);
  Value constant_int(int64_t value, const TensorType& type);
  Value iota(const TensorType& type, int64_t dim);

  // --- elementwise
  Value unary(Op op, Value x);
  Value binary(Op op, Value a, Value b);
  Value compare(Cmp cmp, Value a, Value b);
  Value select(Value pred, Value on_true, Value on_false);
  Value clamp(Value lo, Value x, Value hi);
  // No node if already `to`. To and from float8 it follows PyTorch's
  // conversion, not XLA's (float8.h; graph_float8.cc).
  Value convert(Value x, DType to);
  Value bitcast_convert(Value x, DType to);

  // --- movement
  Value reshape(Value x, const std::vector<int64_t>& dims);  // no node if same dims
  Value broadcast_in_dim(Value x, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& broadcast_dimensions);
  Value transpose(Value x, const std::vector<int64_t>& permutation);
  Value slice(Value x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
              const std::vector<int64_t>& strides);
  Value concatenate(const std::vector<Value>& xs, int64_t dim);
  Value pad(Value x, Value pad_value, const std::vector<int64_t>& low,
            const std::vector<int64_t>& high, const std::vector<int64_t>& interior);
  Value reverse(Value x, const std::vector<int64_t>& dims);
  Value dynamic_slice(Value x, const std::vector<Value>& start_indices,
                      const std::vector<int64_t>& slice_sizes);
  Value dynamic_update_slice(Value x, Value update, const std::vector<Value>& start_indices);
  Value gather(Value operand, Value indices, const GatherDims& dims,
               const std::vector<int64_t>& result_dims);
  Value scatter(Value operand, Value indices, Value updates, const ScatterDims& dims,
                Reducer reducer);

  // --- reductions and windows
  std::vector<Value> reduce(const std::vector<Value>& operands, const std::vector<Value>& inits,
                            const std::vector<int64_t>& dimensions, Reducer reducer);
  Value reduce_window(Value x, Value init, const std::vector<int64_t>& window,
                      const std::vector<int64_t>& strides,
                      const std::vector<int64_t>& base_dilations,
                      const std::vector<int64_t>& window_dilations,
                      const std::vector<int64_t>& pad_low, const std::vector<int64_t>& pad_high,
                      Reducer reducer);
  Value select_and_scatter(Value operand, Value source, Value init,
                           const std::vector<int64_t>& window, const std::vector<int64_t>& strides,
                           const std::vector<int64_t>& pad_low,
                           const std::vector<int64_t>& pad_high, Cmp select);
  std::vector<Value> sort(const std::vector<Value>& operands, int64_t dim, Cmp cmp);

  // --- linear algebra
  Value dot_general(Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch,
                    const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                    const std::vector<int64_t>& rhs_contract);
  Value convolution(Value input, Value kernel, const ConvDims& dims);
  // a [..., n, n] float -> its Cholesky factor in the `lower` (else upper)
  // triangle; XLA leaves the other triangle unspecified and gives NaN for a
  // matrix that is not positive definite.
  Value cholesky(Value a, bool lower);
  // a [..., n, n], b [..., n, k] (left_side) or [..., k, n]: x with op(a) x = b
  // or x op(a) = b, op(a) = a^T when transpose_a, a's `lower` (else upper)
  // triangle read, its diagonal taken as 1 when unit_diagonal. Batch dims equal.
  Value triangular_solve(Value a, Value b, const LinalgFlags& flags);
  // A custom call XLA expands at compile time; `results` are the caller's types
  // (XLA checks them against the target's contract when it compiles).
  std::vector<Value> custom_call(const CustomCall& call, const std::vector<Value>& operands,
                                 const std::vector<TensorType>& results);

  // A call of a user kernel: operand types must equal fn->params (IrError
  // naming the kernel otherwise); results have fn->results' types.
  std::vector<Value> call(std::shared_ptr<const UserFunction> fn,
                          const std::vector<Value>& operands);

  // --- complex numbers: real/imag of a complex value (result: its float part
  // type); complex(re, im) of two equal float types (f32 or f64).
  Value real(Value x);
  Value imag(Value x);
  Value complex(Value re, Value im);
  // The FFT of the trailing fft_length.size() (1 to 3) dims, per FftType.
  Value fft(Value x, FftType type, const std::vector<int64_t>& fft_length);

  // --- random: returns {new_state, bits}; bits has `type` (u32 or u64 dtype)
  std::pair<Value, Value> rng_bit_generator(Value state, const TensorType& type);

  // --- composition
  // Copies `sub`'s nodes into this graph with sub's parameter k replaced by
  // `args[k]` (whose types must match), and returns the copies of `values`
  // (values of `sub`). Fused eager mode grows one program this way, op by op.
  std::vector<Value> append(const Graph& sub, const std::vector<Value>& args,
                            const std::vector<Value>& values);
  // The same, moving `sub`'s nodes instead of copying them (a Node's Attrs
  // are large: fused recording copied each one); `sub` is left with its
  // nodes in a valid but unspecified state, fit only to be destroyed.
  std::vector<Value> append(Graph&& sub, const std::vector<Value>& args,
                            const std::vector<Value>& values);

  // --- program
  // Also clears the donations, which name output positions.
  void set_outputs(std::vector<Value> outputs) {
    outputs_ = std::move(outputs);
    donations_.clear();
  }
  const std::vector<Value>& outputs() const { return outputs_; }
  // Buffer donation: parameter `parameter` (position in parameters()) may be
  // overwritten by output `output` (position in outputs()), whose type must be
  // the same; the caller promises never to use the argument's buffer again
  // (XLA reuses its memory; StableHLO arg attribute tf.aliasing_output).
  // At most one donation per parameter and per output. Call after
  // set_outputs(). Throws IrError.
  void donate(size_t parameter, size_t output);
  // Per parameter: the output it is donated to, or -1. Empty when none is.
  const std::vector<int32_t>& donations() const { return donations_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& parameters() const { return parameters_; }  // node ids
  const TensorType& type(Value v) const;
  std::string fingerprint() const;

 private:
  Value add_node(Node node);
  // The conversions to and from float8 (graph_float8.cc); convert_node is
  // one plain convert node.
  Value convert_float8(Value x, DType to);
  Value convert_node(Value x, DType to);
  // append()'s body; moves from `movable` (which is &sub) when not null.
  std::vector<Value> append_from(const Graph& sub, Graph* movable, const std::vector<Value>& args,
                                 const std::vector<Value>& values);
  // type(v), or IrError naming `op` when v is not a value of this graph.
  const TensorType& operand_type(const char* op, Value v) const;
  void check_start_indices(const char* op, const TensorType& t,
                           const std::vector<Value>& start_indices) const;
  std::vector<Node> nodes_;
  std::vector<int32_t> parameters_;
  std::vector<Value> outputs_;
  std::vector<int32_t> donations_;  // parallel to parameters_ once non-empty
};

}  // namespace ttpu::ir

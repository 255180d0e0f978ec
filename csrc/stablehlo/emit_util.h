// Text pieces shared by emit.cc, emit_regions.cc and kernel_module.cc. Internal
// to the stablehlo layer: nothing outside csrc/stablehlo includes this.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace ttpu::stablehlo::detail {

// `@name` when `name` is a bare MLIR identifier, else `@"..."` with quotes and
// backslashes escaped (symbol names of modules and functions).
std::string symbol(const std::string& name);

// "array<i64: 1, 2>" (the DenseI64ArrayAttr syntax current StableHLO uses for
// dimensions, permutations, slice bounds and window attributes).
std::string i64_array(const std::vector<int64_t>& v);
// "[1, 2]" inside #stablehlo.dot / gather / scatter attributes.
std::string int_list(const std::vector<int64_t>& v);
// "dense<[[lo, hi], ...]> : tensor<Nx2xi64>" (padding of reduce_window,
// select_and_scatter, convolution).
std::string padding_attr(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi);

// The splat value of a constant: floats as hex bit patterns (0x7F800000) so inf,
// NaN payloads and every finite value round trip exactly; integers in decimal
// (sign-extended when signed); i1 as true/false.
std::string literal_text(uint64_t bits, ir::DType dtype);

std::string comparison_direction(ir::Cmp cmp);  // "#stablehlo<comparison_direction LT>"
// "#stablehlo<comparison_type FLOAT>": FLOAT for floats, SIGNED for signed
// integers, UNSIGNED for unsigned integers and i1.
std::string comparison_type(ir::DType dtype);

inline std::string scalar_type(ir::DType dtype) { return ir::TensorType{dtype, {}}.mlir(); }

// A region body over scalar tensors, built line by line. Value names come from
// a counter shared across the module ("%r<N>") because MLIR rejects a nested
// region that redefines a name visible from the enclosing function.
class Region {
 public:
  struct Val {
    std::string name;
    ir::DType dtype;
  };
  Region(int* counter, const std::vector<ir::DType>& arg_dtypes);

  const Val& arg(size_t i) const { return args_[i]; }
  Val op(const std::string& name, const std::vector<Val>& operands, ir::DType result);
  Val compare(ir::Cmp cmp, const Val& a, const Val& b);
  Val select(const Val& pred, const Val& on_true, const Val& on_false);
  Val is_nan(const Val& x);  // x != x
  Val and_(const Val& a, const Val& b) { return op("stablehlo.and", {a, b}, ir::DType::kBool); }
  Val or_(const Val& a, const Val& b) { return op("stablehlo.or", {a, b}, ir::DType::kBool); }
  Val not_(const Val& a) { return op("stablehlo.not", {a}, ir::DType::kBool); }
  // The region text "({\n ^bb0(...):\n ...\n "stablehlo.return"(...)\n })"
  // without the surrounding parentheses, indented by `indent` spaces.
  std::string finish(const std::vector<Val>& results, int indent) const;

 private:
  std::string fresh();
  int* counter_;
  std::vector<Val> args_;
  std::vector<std::string> lines_;
};

// The lines of `name = concatenate(parts)` along `dim` (result `out`): more
// than 64 parts go in groups, each behind an optimization_barrier
// (emit_regions.cc says why). Temporaries are "%t<*temp>", counting up.
std::string concatenate_lines(std::vector<std::pair<std::string, ir::TensorType>> parts,
                              int64_t dim, const std::string& name, const ir::TensorType& out,
                              int* temp);

// A loop lowering's module text (loop_kernels.h) ready for Graph::call, its
// symbols named from a hash of the text. Throws KernelTextError.
ir::UserFunction loop_function(const std::string& text, const std::string& name);

// Region bodies. `dtypes` are the operands' element types.
// reduce / reduce_window / scatter combiner (2N args: N accumulators, then N
// values); kArgMax/kArgMin need dtypes = {value, index}.
std::string reducer_region(ir::Reducer reducer, const std::vector<ir::DType>& dtypes, int* counter,
                           int indent);
// sort comparator on operand 0 (2N args: lhs0, rhs0, lhs1, rhs1, ...).
std::string sort_region(ir::Cmp cmp, const std::vector<ir::DType>& dtypes, int* counter,
                        int indent);
// select_and_scatter's select: compare(a, b) with `cmp`.
std::string select_region(ir::Cmp cmp, ir::DType dtype, int* counter, int indent);

}  // namespace ttpu::stablehlo::detail

// Lowering ATen ops to the IR: the context a rule builds its graph in, and the one
// lowering table every mode uses.
//
// A rule receives the arguments of the FUNCTIONAL overload ("add.Tensor") and
// returns IR values, one per returned tensor. The generic kernel (lowered_kernel.cc)
// derives the in-place ("add_.Tensor") and out= ("add.out") variants from the
// same rule: it writes the values into `self` or the `out` tensors, through any
// view, so an op is lowered once for all three.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/device.h"
#include "ir/graph.h"
#include "runtime/fusion.h"

namespace ttpu::aten {

// Typed access to a rule's arguments, by position in the functional schema.
class Args {
 public:
  explicit Args(c10::ArrayRef<c10::IValue> values) : v_(values) {}
  size_t size() const { return v_.size(); }
  const c10::IValue& operator[](size_t i) const { return v_.at(i); }
  const at::Tensor& tensor(size_t i) const { return v_.at(i).toTensor(); }
  bool is_none(size_t i) const { return i >= v_.size() || v_[i].isNone(); }
  std::optional<at::Tensor> opt_tensor(size_t i) const;
  c10::Scalar scalar(size_t i) const { return v_.at(i).toScalar(); }
  int64_t integer(size_t i) const { return v_.at(i).toInt(); }
  double real(size_t i) const { return v_.at(i).toDouble(); }
  bool boolean(size_t i) const { return v_.at(i).toBool(); }
  std::vector<int64_t> ints(size_t i) const { return v_.at(i).toIntVector(); }
  std::optional<std::vector<int64_t>> opt_ints(size_t i) const;
  std::optional<int64_t> opt_integer(size_t i) const;
  std::optional<c10::ScalarType> opt_dtype(size_t i) const;
  std::vector<at::Tensor> tensors(size_t i) const { return v_.at(i).toTensorVector(); }

 private:
  c10::ArrayRef<c10::IValue> v_;
};

// One program under construction for one ATen op call.
class LoweringContext {
 public:
  LoweringContext(std::string op, int device) : op_(std::move(op)), device_(device) {
    // Most ops read one to three storages: one allocation each instead of
    // the 1, 2, 4 growth (measured per eager op under callgrind).
    args_.reserve(4);
    slots_.reserve(4);
    pending_storages_.reserve(4);
  }
  ir::Graph& g() { return graph_; }
  const std::string& op() const { return op_; }
  int device() const { return device_; }

  // A tpu tensor (any view) read as a value of its sizes and dtype. A 0-d CPU
  // tensor is read as a scalar parameter (PyTorch lets those mix with any device).
  ir::Value tensor(const at::Tensor& t);
  // Bounded dynamism (growing_buckets.h): `t` read along its dim `dim` as a
  // value [P, cap, Q] (P, Q: the element counts of the dims before and after
  // `dim`) whose rows [0, length) along dim 1 are t's and the rest
  // unspecified. When t is the contiguous start of a bucket (what a bucketed
  // cat makes; bucket_capacity > 0), cap is its storage's rows and `length`
  // a parameter (t.size(dim) at run time, not part of the program);
  // otherwise cap = t.size(dim) and `length` a constant.
  struct InBucket {
    ir::Value value;
    ir::Value length;  // 0-d i64
    int64_t cap = 0;
  };
  InBucket read_in_bucket(const at::Tensor& t, int64_t dim);

  // A Python scalar as a 0-d parameter of `dtype` (a parameter, not a constant, so
  // a changing value such as a learning rate never recompiles).
  ir::Value scalar(const c10::Scalar& s, ir::DType dtype);
  // A 0-d constant; for structural values (0, 1, -inf).
  ir::Value constant(double v, ir::DType dtype) { return graph_.constant(v, {dtype, {}}); }
  // {seed, offset} of the device generator as a ui64[2] parameter; advances it.
  ir::Value rng_state(const std::optional<at::Generator>& gen);

  // Writes `value` (shape = dst's sizes, converted to dst's dtype) into `dst`,
  // which may be any non-overlapping view; every alias sees the write.
  void write(const at::Tensor& dst, ir::Value value);

  // Compiles (cached) and runs the program (in fused mode: appends it to the
  // device's pending graph, see runtime/fusion.h): returns one new tpu tensor per
  // `results` value (an undefined tensor for an invalid value: an optional
  // result such as an unrequested gradient), and applies the writes. Translates runtime errors into
  // c10 errors naming the op.
  std::vector<at::Tensor> run(const std::vector<ir::Value>& results);
  // The memory layout (strides, in elements) of run()'s result `i`, when it is
  // not row-major: TensorIterator's output layout for pointwise ops, nonzero's
  // column-major result. Must be dense and non-overlapping for the result's
  // sizes; run() computes the value in that memory order.
  void set_result_strides(size_t i, std::vector<int64_t> strides) {
    result_strides_[i] = std::move(strides);
  }

  // Result `i` is a flat value of its own storage's size whose leading
  // elements are the contiguous tensor of `sizes` (a bucketed cat's result:
  // growing_buckets.h).
  void set_result_sizes(size_t i, std::vector<int64_t> sizes) {
    result_sizes_[i] = std::move(sizes);
  }
  // Whether the call makes new results (the functional overload), not writes
  // into `self` or out= tensors; set by the kernel before the rule runs. Only
  // such a call may give a result a storage larger than it (set_result_sizes).
  bool makes_new_results() const { return makes_new_results_; }
  void set_makes_new_results() { makes_new_results_ = true; }

  // For strict mode's dispatch cache (dispatch_cache.h), after run(): whether
  // the program ran and its parameters were bound only to the storages read
  // and to buffers fixed by the call's arguments (no random state, no host
  // tensor's value, no storage changed on the way; a write is allowed, the
  // cache replays it only into the same argument's storage); the buffers
  // bound, in parameter order; the program.
  bool replayable() const { return replayable_ && executable_ != nullptr; }
  const std::vector<runtime::RecordedArg>& bound_args() const { return args_; }
  const std::shared_ptr<pjrt::Executable>& executable() const { return executable_; }

 private:
  struct SlotUse {
    runtime::Slot* slot;
    ir::Value flat;  // current flat value of the slot within this program
    bool written = false;
    ir::TensorType written_as;  // the (last) tensor written: named by the recompile guard
  };
  SlotUse& use(runtime::Slot& slot, ir::DType dtype);
  // Gives each input use() bound pending (no buffer) its computed buffer.
  void compute_pending_inputs();
  // A view's storage offset as a 0-d i64 value: a parameter (not part of the
  // program's structure) unless it is 0.
  ir::Value storage_offset(int64_t offset);
  ir::Value param(std::shared_ptr<pjrt::Buffer> buffer, const ir::TensorType& type,
                  runtime::Slot* slot = nullptr);
  // The whole storage of tpu tensor `t` (its `slot`) as a flat value of
  // `dtype` (its element size must be the storage's).
  ir::Value storage_value(const at::Tensor& t, runtime::Slot& slot, ir::DType dtype);
  // run()'s steps (lowering.cc): a result tensor and its flat output value;
  // whether to defer to a background compile; recording (fused mode, or
  // deferred); compiling and running now.
  at::Tensor make_result(size_t i, ir::Value r, std::vector<ir::Value>& outs);
  bool defer_to_background(const std::vector<ir::Value>& outs, std::string& key,
                           pjrt::Optimization& level);
  void record(const std::vector<ir::Value>& results, const std::vector<at::Tensor>& tensors,
              const std::vector<ir::Value>& outs, bool deferred);
  void execute_now(const std::vector<at::Tensor>& tensors, const std::string& key,
                   pjrt::Optimization level);

  std::string op_;
  int device_;
  ir::Graph graph_;
  std::vector<runtime::RecordedArg> args_;
  std::vector<SlotUse> slots_;
  // Storages whose pending value (fused mode) the program reads or writes:
  // held until the op is recorded, since a rule may read a temporary it made
  // (index.to(kLong)) whose storage would otherwise die, and its slot with it.
  std::vector<c10::Storage> pending_storages_;
  std::unordered_map<size_t, std::vector<int64_t>> result_strides_;
  std::unordered_map<size_t, std::vector<int64_t>> result_sizes_;
  bool makes_new_results_ = false;
  bool replayable_ = true;
  std::shared_ptr<pjrt::Executable> executable_;  // strict mode, once run
};

// Gather dims that read elements of a flat operand at indices [n, 1].
ir::GatherDims element_gather();

using Rule = std::function<std::vector<ir::Value>(LoweringContext&, const Args&)>;

// The lowering table: functional schema name ("aten::add.Tensor" without the
// namespace: "add.Tensor") -> rule.
std::unordered_map<std::string, Rule>& lowering_table();

// Registers `rule` for a functional op at static-initialisation time.
// A name registered twice is recorded and makes register_lowerings() fail, so
// one rule can never silently shadow another.
struct RegisterLowering {
  RegisterLowering(const char* name, Rule rule);
};

// Complex-capable rules. A call that has a complex tensor among its inputs,
// outputs or dtype arguments is sent to the CPU fallback (counted) unless its
// op is in this table: a rule written for real dtypes must never see complex
// values it would silently mishandle. The entry's rule serves the complex
// calls; a null rule means the op's main rule (lowering_table()) handles
// complex dtypes itself and was checked against CPU with them. Every name here
// must also be in lowering_table() (register_lowerings() checks).
std::unordered_map<std::string, Rule>& complex_table();
struct RegisterComplex {
  explicit RegisterComplex(const char* name, Rule rule = nullptr);
};
// True when `v` (a tensor, tensor list, or dtype argument) is complex.
bool is_complex_arg(const c10::IValue& v);

// Self-writing rules: out-only ATen ops with no functional overload at the
// backend level (arange's out= overloads), and in-place ops that write more
// than `self` (GradScaler's _amp_update_scale_ writes the scale and its growth
// tracker). The rule is given all arguments and writes the mutated tensors
// itself (resizing an out with resize_out); the op returns the arguments its
// schema's returns alias.
std::unordered_map<std::string, Rule>& out_only_table();
void resize_out(const at::Tensor& out, c10::IntArrayRef sizes);
// Adds an out-only rule at static initialization (a duplicate name is reported
// like RegisterLowering's).
struct RegisterOutOnly {
  RegisterOutOnly(const char* name, Rule rule);
};

// Installs every table entry (and derived in-place/out variants) as a
// PrivateUse1 kernel. Called once from module init.
void register_lowerings();
// Runs the `_foreach_*` ops with no lowering of their own as one program per
// call in strict mode (foreach.cc). Called once from module init, after
// register_lowerings().
void register_foreach();
std::vector<std::string>& duplicate_lowerings();

}  // namespace ttpu::aten

// The generic PrivateUse1 kernel behind every lowered op, and its registration.
//
// One boxed functor serves the functional, in-place and out= overloads of an op:
// the rule computes values from the functional arguments, and the variant decides
// where they go (new tensors, `self`, or the `out` tensors). Registration derives
// the variants from the dispatcher's schemas, so the table lists each op once.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/resize.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "aten/lowering.h"

namespace ttpu::aten {
namespace {

enum class Variant { kFunctional, kInplace, kOut, kOutOnly };

int device_of(c10::ArrayRef<c10::IValue> args) {
  for (const auto& a : args) {
    if (a.isTensor()) {
      const auto& t = a.toTensor();
      if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) {
        return t.device().index();
      }
    } else if (a.isTensorList()) {
      for (const auto& t : a.toTensorVector()) {
        if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) {
          return t.device().index();
        }
      }
    }
  }
  return 0;
}

void check_castable(c10::ScalarType from, const at::Tensor& dst) {
  TORCH_CHECK(c10::canCast(from, dst.scalar_type()), "result type ", from,
              " can't be cast to the desired output type ", dst.scalar_type());
}

class LoweringKernel final : public c10::OperatorKernel {
 public:
  LoweringKernel(const Rule* rule, Variant variant, std::string name)
      : rule_(rule), variant_(variant), name_(std::move(name)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet,
                  torch::jit::Stack* stack) {
    const auto& schema = op.schema();
    const size_t nargs = schema.arguments().size();
    auto args = torch::jit::last(*stack, nargs);
    LoweringContext ctx(name_, device_of(args));
    switch (variant_) {
      case Variant::kFunctional: {
        auto values = (*rule_)(ctx, Args(args));
        auto tensors = ctx.run(values);
        torch::jit::drop(*stack, nargs);
        push_returns(schema, std::move(tensors), stack);
        return;
      }
      case Variant::kInplace: {
        at::Tensor self = args[0].toTensor();
        auto values = (*rule_)(ctx, Args(args));
        TORCH_CHECK(!values.empty(), name_, ": the rule returned no value");
        const ir::TensorType t = ctx.g().type(values[0]);
        check_castable(to_aten(t.dtype), self);
        TORCH_CHECK(c10::IntArrayRef(t.dims) == self.sizes(), "output with shape ",
                    self.sizes(), " doesn't match the broadcast shape ",
                    c10::IntArrayRef(t.dims));
        ctx.write(self, values[0]);
        ctx.run({});
        torch::jit::drop(*stack, nargs);
        stack->emplace_back(std::move(self));
        return;
      }
      case Variant::kOut: {
        std::vector<at::Tensor> outs;
        size_t first_out = nargs;
        for (size_t i = 0; i < nargs; ++i) {
          if (schema.arguments()[i].is_out()) {
            first_out = std::min(first_out, i);
            outs.push_back(args[i].toTensor());
          }
        }
        auto values = (*rule_)(ctx, Args(args.slice(0, first_out)));
        TORCH_CHECK(values.size() >= outs.size(), name_, ": rule returned ", values.size(),
                    " values for ", outs.size(), " outputs");
        for (size_t i = 0; i < outs.size(); ++i) {
          const ir::TensorType t = ctx.g().type(values[i]);
          check_castable(to_aten(t.dtype), outs[i]);
          resize_out(outs[i], t.dims);
          ctx.write(outs[i], values[i]);
        }
        ctx.run({});
        torch::jit::drop(*stack, nargs);
        for (auto& o : outs) stack->emplace_back(std::move(o));
        return;
      }
      case Variant::kOutOnly: {
        std::vector<at::Tensor> outs;
        for (size_t i = 0; i < nargs; ++i) {
          if (schema.arguments()[i].is_out()) outs.push_back(args[i].toTensor());
        }
        (*rule_)(ctx, Args(args));
        ctx.run({});
        torch::jit::drop(*stack, nargs);
        for (auto& o : outs) stack->emplace_back(std::move(o));
        return;
      }
    }
  }

 private:
  static void push_returns(const c10::FunctionSchema& schema, std::vector<at::Tensor> tensors,
                           torch::jit::Stack* stack) {
    const auto& returns = schema.returns();
    if (returns.size() == 1 && returns[0].type()->kind() == c10::TypeKind::ListType) {
      stack->emplace_back(c10::List<at::Tensor>(tensors));
      return;
    }
    TORCH_CHECK(tensors.size() == returns.size(), schema.name(), ": lowering returned ",
                tensors.size(), " tensors for ", returns.size(), " results");
    for (auto& t : tensors) stack->emplace_back(std::move(t));
  }

  const Rule* rule_;
  Variant variant_;
  std::string name_;
};

// Same argument names and types, in order (defaults may differ).
bool same_arguments(const c10::FunctionSchema& functional, const c10::FunctionSchema& out) {
  std::vector<const c10::Argument*> non_out;
  for (const auto& a : out.arguments()) {
    if (!a.is_out()) non_out.push_back(&a);
  }
  const auto& fa = functional.arguments();
  if (fa.size() != non_out.size()) return false;
  for (size_t i = 0; i < fa.size(); ++i) {
    if (fa[i].name() != non_out[i]->name() || fa[i].type()->str() != non_out[i]->type()->str()) {
      return false;
    }
  }
  return true;
}

bool is_out_fn(const c10::FunctionSchema& s) {
  for (const auto& a : s.arguments()) {
    if (a.is_out()) return true;
  }
  return false;
}

torch::Library& library() {
  static auto* lib = new torch::Library(torch::Library::IMPL, "aten",
                                        c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  return *lib;
}

void impl(const std::string& name, const Rule* rule, Variant variant) {
  library().impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                   std::make_unique<LoweringKernel>(rule, variant, "aten::" + name)));
}

std::string full_name(const c10::OperatorName& n) {
  std::string s = n.name.substr(6);  // drop "aten::"
  if (!n.overload_name.empty()) s += "." + n.overload_name;
  return s;
}

}  // namespace

void resize_out(const at::Tensor& out, c10::IntArrayRef sizes) {
  if (out.sizes() != sizes) out.resize_(sizes);
}

void register_lowerings() {
  static bool done = false;
  if (done) return;
  done = true;
  for (const auto& name : duplicate_lowerings()) {
    TORCH_CHECK(false, "torchtpu: aten::", name, " has two lowering rules");
  }
  auto& dispatcher = c10::Dispatcher::singleton();
  std::unordered_map<std::string, std::vector<c10::OperatorName>> overloads;
  for (const auto& n : dispatcher.getAllOpNames()) {
    if (n.name.rfind("aten::", 0) == 0) overloads[n.name].push_back(n);
  }
  for (const auto& [name, rule] : lowering_table()) {
    auto dot = name.find('.');
    std::string base = name.substr(0, dot);
    std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
    auto handle = dispatcher.findSchema({"aten::" + base, overload});
    TORCH_CHECK(handle.has_value(), "torchtpu: lowering for unknown op aten::", name);
    TORCH_CHECK(!handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd),
                "torchtpu: aten::", name, " is CompositeImplicitAutograd; lower what it "
                "decomposes into instead");
    impl(name, &rule, Variant::kFunctional);
    if (auto inplace = dispatcher.findSchema({"aten::" + base + "_", overload})) {
      const auto& args = inplace->schema().arguments();
      if (!args.empty() && args[0].alias_info() && args[0].alias_info()->isWrite() &&
          !inplace->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
        impl(base + "_" + (overload.empty() ? "" : "." + overload), &rule, Variant::kInplace);
      }
    }
    for (const auto& on : overloads["aten::" + base]) {
      auto oh = dispatcher.findSchema(on);
      if (!oh || !is_out_fn(oh->schema()) ||
          oh->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
        continue;
      }
      if (same_arguments(handle->schema(), oh->schema())) {
        impl(full_name(on), &rule, Variant::kOut);
      }
    }
  }
  for (const auto& [name, rule] : out_only_table()) impl(name, &rule, Variant::kOutOnly);
}

}  // namespace ttpu::aten

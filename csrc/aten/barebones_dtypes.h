// uint16 / uint32 / uint64: PyTorch's "barebones" unsigned dtypes. CPU PyTorch
// implements only some ops for them (creation, copies, views, indexing reads,
// sort/unique, sum/prod/cumsum, mul, true division, ==/!=, &|^, and every op
// that computes in a floating type); the rest raise NotImplementedError
// ("\"add_stub\" not implemented for 'UInt16'"), and promotion with another
// dtype raises RuntimeError. The lowering kernel runs the first group natively
// and sends the rest to CPU, so each call works or fails exactly as on CPU.
//
// float8 (e4m3fn, e5m2, their FNUZ variants, e8m0fnu) likewise: CPU
// implements creation, copies and conversions, views, indexing, cat, where,
// comparisons for equality and a few arithmetic ops (computing in float and
// rounding back). The lowering kernel runs those that only move, select or
// compare values natively (bit-exact by construction) and sends every other
// float8 call to CPU.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <string>

namespace ttpu::aten {

// A uint16/32/64 tensor among the arguments (outs included), or such a dtype
// argument (torch.full(..., dtype=torch.uint16)).
bool any_barebones_unsigned(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args);

// Whether the lowering `key` (its table name, "mul.Tensor") is one CPU
// implements for the barebones unsigned dtypes by computing in them.
bool barebones_unsigned_native(const std::string& key);

// A float8 tensor among the arguments, or a float8 dtype argument.
bool any_float8(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args);
// Whether the lowering `key` runs natively for float8 (see above).
bool float8_native(const std::string& key);

}  // namespace ttpu::aten

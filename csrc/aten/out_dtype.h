// The out= dtype checks of the lowered kernel, as ATen's CPU kernels make them.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace ttpu::aten {

// TensorIterator's check that a result of dtype `from` can be written into `dst`.
void check_castable(c10::ScalarType from, const at::Tensor& dst);

// Unary ops whose CPU kernel TensorIterator builds with check_all_same_dtype:
// an out of another dtype is refused before the kernel's own dtype check.
bool same_dtype_unary(const std::string& key);

// The out= check of op `key`'s CPU kernel for out tensor `dst` (number
// `index`) given the result dtype `from` and the first input's dtype `self`,
// with the kernel's message (c10::Error, or c10::TypeError for cat).
void check_out_dtype(const std::string& key, c10::ScalarType from, c10::ScalarType self,
                     const at::Tensor& dst, size_t index);

}  // namespace ttpu::aten

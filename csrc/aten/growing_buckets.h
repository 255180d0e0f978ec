// Bounded dynamism: tensors that grow by a few elements per step (generate's
// token ids and attention mask, a dynamic KV cache) reuse a handful of
// programs instead of compiling new ones at every length.
//
// On by default ("pow2"); torchtpu.config.growing_buckets sets it ("pow2", a
// list of sizes, or None). Then the functional torch.cat of at most four
// parts that appends (its last part at most half as long as the longest
// other part) or extends a bucketed tensor, with a contiguous result, gives
// its result a storage
// whose rows along the cat dim are the result's size rounded up to a bucket
// (the smallest power of two, or listed size, at least as large; a size
// past the largest listed one is not rounded). The result is the contiguous
// tensor CPU makes, at the start of that storage, so its sizes, strides and
// values are CPU's; only its storage is larger. An op that knows how reads
// such a tensor as its bucket, with the length a runtime parameter, so its
// program is keyed on the bucket, not the length
// (LoweringContext::read_in_bucket): torch.cat itself (the next token joins
// a bucketed tensor with the same program until the bucket is full) and
// scaled_dot_product_attention (a bucketed key and value are read whole,
// the scores past the length masked to -inf). Any other op reads the tensor
// as a view of its storage, as before.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "aten/lowering.h"

namespace ttpu::aten {

// The setting: `pow2`, or the sorted bucket `sizes`; neither (false, {})
// turns bucketing off. Thread-safe.
void set_growing_buckets(bool pow2, std::vector<int64_t> sizes);

// The rows of the bucket for `n` rows, or nullopt when bucketing is off.
std::optional<int64_t> bucket_rows(int64_t n);

// The rows of `t`'s storage along `dim` when bucketing is on, `t` is the
// contiguous start of a larger tpu storage (as a bucketed cat's result is)
// whose storage holds whole rows of the other dims, and
// those rows are at most the bucket of t.size(dim); 0 otherwise (then t is
// read as itself).
int64_t bucket_capacity(const at::Tensor& t, int64_t dim);

// The functional torch.cat of `parts` (non-empty, equal in every dim but
// `dim`) along `dim` into a result of `sizes` and dtype `dt`, bucketed: the
// flat value of the result's storage (LoweringContext::set_result_sizes is
// set). An invalid value when the call is not bucketed (bucketing off, an
// out= call, complex, or unbucketed parts that do not append or fill their
// result's bucket exactly).
ir::Value cat_in_bucket(LoweringContext& ctx, const std::vector<at::Tensor>& parts, int64_t dim,
                        ir::DType dt, const std::vector<int64_t>& sizes);

}  // namespace ttpu::aten

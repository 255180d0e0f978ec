// Strict mode: views of storages that keep changing size.
//
// An op's program reads a view through its whole storage: the storage is the
// parameter (a flat buffer of the storage's size) and the view's offset a
// scalar parameter, so slicing batch after batch out of one tensor reuses one
// program. But the program is keyed on the storage's size. Hugging Face
// generate reads the last token of input_ids (`input_ids[:, -1:]`, for the
// stopping criteria and the next step's inputs) after torch.cat made a new,
// one-token-longer input_ids: every such op would compile again at every
// token although its own shapes never change.
//
// So LoweringContext::tensor asks here first: once one op has read views of
// the same sizes and dtype out of storages of two different sizes, that view
// is read from then on into a buffer of its own by a small program of its own
// (the one `clone` compiles: keyed on the storage's size, shared by every op
// that reads such a view of a storage of that size), and the op's program
// binds that buffer: it is keyed on the view alone and compiled once. A loop
// whose views come from storages of one size (every static-shape loop) never
// takes this path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/types.h"

namespace ttpu::aten {

// Whether `op`'s read of a view (`sizes`, `dtype`) of a storage of
// `storage_numel` elements should go through a buffer of its own: true once
// that (op, sizes, dtype) has been seen with another storage size, and from
// then on (the storage grows every step; alternating sizes count too).
// Thread-safe.
bool view_base_varies(const std::string& op, const std::vector<int64_t>& sizes, ir::DType dtype,
                      int64_t storage_numel);

// The op name of the program that reads such a view into its own buffer (its
// own reads never take this path).
inline constexpr const char* kGrowingViewRead = "view read (storage size varies)";

}  // namespace ttpu::aten

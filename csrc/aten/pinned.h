// Host memory that tensors report as pinned (`pin_memory=True`, `is_pinned()`).
// PJRT's host-to-device copies read ordinary host memory, so "pinned" here means
// only "allocated by this allocator": what DDP's reducer and DataLoader's
// pin_memory ask of an accelerator.
#pragma once

#include <c10/core/Allocator.h>

namespace ttpu::aten {

c10::Allocator* pinned_allocator();

// True for a pointer inside a live block of pinned_allocator().
bool is_pinned_ptr(const void* ptr);

}  // namespace ttpu::aten

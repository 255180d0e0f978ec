"""Pinned host memory and non_blocking host-to-device copies, with CUDA's
behaviour as the reference: `pin_memory()` tensors report `is_pinned()`, a
non_blocking copy from them may finish after the call returns but carries the
source's values at the call, keeps a dropped source alive until it is read, and
never aliases it; copies from pageable memory are done on return."""

import gc

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from _util import no_fallback

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

N = 1 << 18  # 1 MiB of float32: past the CPU plugin's synchronous small-copy size


def test_pin_memory_reports_pinned():
    x = torch.arange(6.0)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned()
    assert torch.equal(p, x)
    assert torch.empty(3, pin_memory=True).is_pinned()
    assert p[2:].is_pinned()  # a view into a pinned block


def test_non_blocking_copy_from_pinned_is_a_copy_with_the_values():
    src = torch.randn(N).pin_memory()
    expected = src.clone()
    with no_fallback():
        dst = torch.empty(N, device="tpu")
        dst.copy_(src, non_blocking=True)
        torch.tpu.synchronize()
        src.fill_(-1.0)  # after the copy completed: dst must not see it
        assert torch.equal(dst.cpu(), expected)
        moved = src.to("tpu", non_blocking=True)
        assert moved.device.type == "tpu"
        assert torch.equal(moved.cpu(), torch.full((N,), -1.0))


def test_non_blocking_copy_keeps_a_dropped_source_alive():
    expected = torch.randn(N)
    dsts = []
    with no_fallback():
        for _ in range(4):
            src = expected.pin_memory()
            dst = torch.empty(N, device="tpu")
            dst.copy_(src, non_blocking=True)
            del src  # the caller drops the pinned block while the copy may run
            gc.collect()
            garbage = [torch.full((N,), 7.0).pin_memory() for _ in range(2)]  # may reuse it
            del garbage
            dsts.append(dst)
        for dst in dsts:
            assert torch.equal(dst.cpu(), expected)


def test_non_blocking_copies_that_cannot_go_as_one_upload():
    base = torch.randn(64, 48).pin_memory()
    with no_fallback():
        # Non-contiguous source, dtype change, a view destination, broadcast.
        t = base.t()
        assert torch.equal(t.to("tpu", non_blocking=True).cpu(), t)
        assert torch.equal(base.to("tpu", torch.float64, non_blocking=True).cpu(), base.double())
        dst = torch.zeros(64, 96, device="tpu")
        dst[:, :48].copy_(base, non_blocking=True)
        assert torch.equal(dst.cpu()[:, :48], base) and not dst.cpu()[:, 48:].any()
        row = torch.arange(48.0).pin_memory()
        dst2 = torch.empty(64, 48, device="tpu")
        dst2.copy_(row, non_blocking=True)
        assert torch.equal(dst2.cpu(), row.expand(64, 48))
        empty = torch.empty(0).pin_memory()
        assert empty.to("tpu", non_blocking=True).numel() == 0


def test_non_blocking_copy_from_pageable_is_done_on_return():
    src = torch.randn(N)
    expected = src.clone()
    with no_fallback():
        dst = torch.empty(N, device="tpu")
        dst.copy_(src, non_blocking=True)
        src.fill_(0.0)  # no synchronize: pageable copies are synchronous, as on CUDA
        assert torch.equal(dst.cpu(), expected)


def test_dataloader_pin_memory_batches_are_pinned():
    data = TensorDataset(torch.arange(40.0).reshape(20, 2), torch.arange(20))
    loader = DataLoader(data, batch_size=8, pin_memory=True)
    seen = 0
    with no_fallback():
        for x, y in loader:
            assert x.is_pinned() and y.is_pinned()
            xt, yt = x.to("tpu", non_blocking=True), y.to("tpu", non_blocking=True)
            assert torch.equal((xt * 2).cpu(), x * 2) and torch.equal(yt.cpu(), y)
            seen += len(y)
    assert seen == 20

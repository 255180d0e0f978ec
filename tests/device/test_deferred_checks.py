"""Checks of device values (index ranges, nll_loss targets, multinomial
probabilities) are reported at the next host read in strict and fused mode, at
the op in debug mode, and a read costs one downloaded byte however many checks
are pending (csrc/aten/deferred_check.h). Python indexing (x[idx], x[idx] = v)
is the exception in strict mode: it raises IndexError at the call, as CPU does."""

import pytest
import torch
import torch.nn.functional as F

import torchtpu

pytestmark = pytest.mark.opt_out_pass  # passes: tests/README.md


def bytes_to_host():
    return torchtpu.metrics.metrics()["bytes_to_host"]


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_out_of_range_index_raises_at_the_next_read_not_at_the_op(mode):
    torchtpu.set_eager_mode(mode)
    w = torch.randn(10, 4, device="tpu")
    before = bytes_to_host()
    y = F.embedding(torch.tensor([1, 12], device="tpu"), w) * 2  # no read at the op
    assert bytes_to_host() == before
    with pytest.raises(IndexError, match="index out of range in self"):
        y.cpu()
    # The failed check is consumed: later work runs and reads normally.
    good = F.embedding(torch.tensor([1, 2], device="tpu"), w)
    torch.testing.assert_close(good.cpu(), w.cpu()[[1, 2]])


def test_python_indexing_raises_at_the_call_in_strict_mode():
    # PyTorch's own test_indexing (test_trivial_fancy_out_of_bounds) expects
    # IndexError from __getitem__ / __setitem__ themselves; Python code relies
    # on it (the sequence protocol, try/except IndexError).
    torchtpu.set_eager_mode("strict")
    a = torch.zeros(5, device="tpu")
    ind = torch.ones(20, dtype=torch.int64, device="tpu")
    ind[-1] = 10
    msg = "index 10 is out of bounds for dimension 0 with size 5"
    with pytest.raises(IndexError, match=msg):
        a[ind]
    with pytest.raises(IndexError, match=msg):
        a[ind] = 0
    ind[-1] = -6
    with pytest.raises(IndexError, match="index -6 is out of bounds"):
        a[ind]
    torchtpu.sync()  # nothing left pending
    assert torch.equal(a.cpu(), torch.zeros(5))
    ind[-1] = -5  # in range (Python-style wrap): no error, CPU's values
    torch.testing.assert_close(a[ind].cpu(), torch.zeros(20))


def test_python_indexing_defers_in_fused_mode():
    torchtpu.set_eager_mode("fused")
    a = torch.zeros(5, device="tpu")
    ind = torch.tensor([1, 10], device="tpu")
    y = a[ind]  # no read at the op: the pending graph is not cut
    with pytest.raises(IndexError, match="index 10 is out of bounds for dimension 0 with size 5"):
        y.cpu()


def test_debug_mode_raises_at_the_op():
    torchtpu.set_eager_mode("debug")
    w = torch.randn(10, 4, device="tpu")
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(torch.tensor([1, 12], device="tpu"), w)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_many_pending_checks_cost_one_byte_at_the_read(mode):
    torchtpu.set_eager_mode(mode)
    w = torch.randn(50, 3, device="tpu")
    idx = torch.arange(50, device="tpu")
    total = torch.zeros(3, device="tpu")
    torchtpu.sync()
    before = bytes_to_host()
    for _ in range(150):  # more than one 64-flag chunk
        total = (
            total + F.embedding(idx, w).sum(0) + torch.gather(w, 0, idx[:3, None].expand(3, 3))[0]
        )
    result = total.cpu()
    # The result's 12 bytes, plus one bool for all 300 checks.
    assert bytes_to_host() - before == result.numel() * 4 + 1
    expected = 150 * (w.cpu().sum(0) + w.cpu()[0])
    torch.testing.assert_close(result, expected, rtol=1e-4, atol=1e-3)


def test_the_first_failing_check_in_program_order_is_raised():
    w = torch.randn(10, 4, device="tpu")
    a = torch.gather(w, 0, torch.zeros(1, 4, dtype=torch.long, device="tpu"))  # passes
    b = torch.gather(w, 0, torch.full((1, 4), 11, device="tpu"))  # fails first
    c = F.embedding(torch.tensor([-1], device="tpu"), w)  # fails second
    with pytest.raises(
        RuntimeError, match="index 11 is out of bounds for dimension 0 with size 10"
    ):
        torchtpu.sync()
    torchtpu.sync()  # nothing left pending
    del a, b, c


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_nll_loss_target_out_of_range(mode):
    torchtpu.set_eager_mode(mode)
    logp = torch.randn(3, 5).log_softmax(1)
    target = torch.tensor([0, 7, 4])
    with pytest.raises(IndexError) as cpu:
        F.nll_loss(logp, target)
    loss = F.nll_loss(logp.to("tpu"), target.to("tpu"))
    with pytest.raises(IndexError) as tpu:
        loss.item()
    assert str(cpu.value) == str(tpu.value) == "Target 7 is out of bounds."
    # ignore_index is exempt, as on CPU.
    ok = F.nll_loss(logp.to("tpu"), torch.tensor([0, 9, 4], device="tpu"), ignore_index=9)
    torch.testing.assert_close(ok.cpu(), F.nll_loss(logp, torch.tensor([0, 9, 4]), ignore_index=9))


def test_compiled_replay_checks_targets_on_every_call():
    @torch.compile(backend="tpu")
    def loss_fn(x, t):
        return F.cross_entropy(x, t)

    x = torch.randn(4, 6, device="tpu")
    good = torch.tensor([0, 1, 2, 5], device="tpu")
    bad = torch.tensor([0, 1, 6, 5], device="tpu")
    expected = F.cross_entropy(x.cpu(), good.cpu())
    for _ in range(2):  # capture, then replay
        torch.testing.assert_close(loss_fn(x, good).cpu(), expected)
    loss = loss_fn(x, bad)  # a replay: same layout
    # AOTAutograd decomposes the loss into a gather, whose range check fires.
    with pytest.raises(RuntimeError, match="index 6 is out of bounds for dimension 1 with size 6"):
        loss.cpu()


def test_multinomial_invalid_probabilities_raise_at_the_read():
    probs = torch.tensor([0.5, -1.0, 0.5], device="tpu")
    draw = torch.multinomial(probs, 1)
    with pytest.raises(
        RuntimeError, match="probability tensor contains either `inf`, `nan` or element < 0"
    ):
        draw.cpu()


def _downloads(fn):
    """(fn's result, device-to-host copies it made), counted by torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    torchtpu.sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        out = fn()
    return out, sum(e.name.startswith("Memcpy DtoH") for e in prof.events())


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.float16,
                                   torch.bfloat16, torch.int32, torch.float32, torch.int64,
                                   torch.float64])
def test_a_small_read_brings_the_pending_checks_verdict_in_the_same_transfer(mode, dtype):
    # A decode step: an embedding (index check deferred), then one small read
    # (generate's stop check). The verdict and the value cross in ONE copy.
    torchtpu.set_eager_mode(mode)
    w = torch.randn(10, 4, device="tpu")
    src = torch.tensor([[3.5, -2.0, 7.0], [0.0, 1.25, -9.0]])
    x = src.to(dtype).to("tpu")
    for read in (lambda t: t[1, 2].item(), lambda t: t[:, 1].cpu(), lambda t: t.cpu()):
        torchtpu.sync()
        F.embedding(torch.tensor([1, 9], device="tpu"), w)  # a pending check
        got, copies = _downloads(lambda: read(x))
        want = read(src.to(dtype))
        assert copies == 1, copies
        if isinstance(got, torch.Tensor):
            assert got.dtype == dtype and torch.equal(got, want), (got, want)
        else:
            assert got == want


def test_a_failed_check_raises_at_a_small_read_and_returns_nothing():
    w = torch.randn(10, 4, device="tpu")
    flag = torch.tensor(True, device="tpu")
    y = F.embedding(torch.tensor([1, 12], device="tpu"), w)
    with pytest.raises(IndexError, match="index out of range in self"):
        bool(flag)
    assert bool(flag)  # consumed: the next read returns the value
    torch.testing.assert_close(y[0].cpu(), w[1].cpu())

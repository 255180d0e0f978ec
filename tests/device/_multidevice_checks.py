"""Checks that need two tpu devices in one process. tests/device/test_multidevice.py
runs this file in a subprocess with TORCHTPU_CPU_DEVICES=2 (the runtime is a
process singleton and the test session starts it with one device) and reports
each check as one test. Prints one JSON line: {check name: None or traceback}."""

import os

import torch

import torchtpu
from _util import run_checks_main

T0, T1 = torch.device("tpu", 0), torch.device("tpu", 1)


def _no_fallback(fn):
    torchtpu.metrics.reset()
    fn()
    assert torchtpu.metrics.total_fallbacks() == 0, torchtpu.metrics.fallback_counts()


def check_case_07():
    # ../shared/cases/07-copy-between-devices.py, verbatim values.
    a = torch.arange(3.0, device="tpu:0")
    b = a.to("tpu:1")
    assert b.device == T1 and b.cpu().tolist() == [0.0, 1.0, 2.0]
    c = torch.empty(3, device="tpu:1").copy_(a)
    assert c.device.index == 1 and torch.equal(c.cpu(), a.cpu())
    assert b.to("tpu:0", non_blocking=True).device.index == 0
    # Which path moved the bytes: PJRT's device copy unless the test forced host staging.
    assert torchtpu._C._device_copy_supported() == (
        os.environ.get("TORCHTPU_DEVICE_COPY") != "host"
    )


def check_copy_views_dtypes_broadcast():
    src = torch.arange(24.0).reshape(4, 6)

    def body():
        x = src.to(T0)
        y = x.t()[1:5, ::2].to(T1)  # a strided view crosses
        assert y.device == T1 and torch.equal(y.cpu(), src.t()[1:5, ::2])
        i = torch.empty(4, 6, dtype=torch.int64, device=T1).copy_(x)  # converts
        assert torch.equal(i.cpu(), src.long())
        bc = torch.zeros(3, 6, device=T1)
        bc.copy_(x[0])  # broadcast across devices
        assert torch.equal(bc.cpu(), src[0].expand(3, 6))
        part = torch.zeros(4, 6, device=T1)
        part[:, 2].copy_(x[:, 5])  # into a view of the destination
        expect = torch.zeros(4, 6)
        expect[:, 2] = src[:, 5]
        assert torch.equal(part.cpu(), expect)
        z = torch.tensor([1 + 2j, 3 - 1j])
        assert torch.equal(z.to(T0).conj().to(T1).cpu(), z.conj().resolve_conj())
        assert torch.equal((-x).to(T1).cpu(), -src)

    _no_fallback(body)
    empty = torch.empty(0, 3, device=T0).to(T1)
    assert empty.device == T1 and empty.shape == (0, 3)


def check_device_guard_and_current_device():
    a, b = torch.randn(3, 4), torch.randn(4, 5)

    def body():
        x, y = a.to(T1), b.to(T1)
        r = torch.relu(x @ y + 1)
        assert r.device == T1
        torch.testing.assert_close(r.cpu(), torch.relu(a @ b + 1))
        s = x.sum(0, keepdim=True)
        assert s.device == T1

    _no_fallback(body)
    assert torch.tpu.current_device() == 0
    with torch.tpu.device(1):
        assert torch.tpu.current_device() == 1
        for t in (torch.ones(2, device="tpu"), torch.arange(3, device="tpu"),
                  torch.randn(2, device="tpu"), torch.full((2,), 7.0, device="tpu")):
            assert t.device == T1, t.device
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device("tpu:1")
    try:
        assert torch.tpu.current_device() == 1 and torch.zeros(1, device="tpu").device == T1
    finally:
        torch.tpu.set_device(0)
    try:
        torch.tpu.set_device(2)
        raise AssertionError("set_device(2) did not raise")
    except IndexError:
        pass
    assert torch.tpu.current_device() == 0


def check_mixed_devices_raise():
    x, y = torch.ones(3, device=T0), torch.ones(3, device=T1)
    for fn in (lambda: x + y, lambda: torch.mul(x, y), lambda: x.view(3, 1) @ y.view(1, 3),
               lambda: x.add_(y)):
        try:
            fn()
            raise AssertionError("mixing tpu:0 and tpu:1 did not raise")
        except RuntimeError as e:
            assert "Expected all tensors to be on the same device" in str(e), str(e)
            assert "tpu:0" in str(e) and "tpu:1" in str(e), str(e)
    assert torch.equal(x.cpu(), torch.ones(3))  # the failed add_ left it alone


def check_fused_mode_pending_value_crosses():
    torchtpu.set_eager_mode("fused")
    try:
        a = torch.arange(6.0, device=T0)
        pending = (a * 2 + 1).reshape(2, 3)
        moved = pending.to(T1)
        out = moved.sum(1)
        assert out.device == T1
        assert torch.equal(out.cpu(), (torch.arange(6.0) * 2 + 1).reshape(2, 3).sum(1))
    finally:
        torchtpu.set_eager_mode(os.environ.get("TORCHTPU_TEST_MODE", "strict"))


def check_autograd_and_module_across_devices():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 2)
    x = torch.randn(5, 4)
    ref = lin(x).sum()
    ref.backward()
    ref_grad = lin.weight.grad.clone()
    lin.zero_grad()
    m1 = torch.nn.Linear(4, 2)
    m1.load_state_dict(lin.state_dict())
    m1 = m1.to(T1)
    xt = x.to(T0).requires_grad_()
    out = m1(xt.to(T1)).sum()
    out.backward()
    assert m1.weight.grad.device == T1 and xt.grad.device == T0
    torch.testing.assert_close(m1.weight.grad.cpu(), ref_grad)
    torch.testing.assert_close(out.item(), ref.item(), rtol=1e-5, atol=1e-6)


def check_memory_per_device():
    before0, before1 = torch.tpu.memory_allocated(0), torch.tpu.memory_allocated(1)
    t = torch.empty(1000, device=T1)
    assert torch.tpu.memory_allocated(1) - before1 == 4000
    assert torch.tpu.memory_allocated(0) == before0
    assert torch.accelerator.memory_allocated(1) - before1 == 4000
    del t
    assert torch.tpu.memory_allocated(1) == before1


def check_events_on_device_1():
    s = torch.tpu.Stream(device=1)
    assert s.device_index == 1
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    with torch.tpu.stream(s):
        assert torch.tpu.current_device() == 1
        start.record()
        y = torch.randn(64, 64, device="tpu") @ torch.randn(64, 64, device="tpu")
        end.record()
    assert torch.tpu.current_device() == 0
    assert y.device == T1
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0.0



def check_dynamo_device_interface():
    # Dynamo's "tpu" interface is torchtpu's (torch 2.13's answers 0 / raises).
    from torch._dynamo.device_interface import DeviceGuard, get_interface_for_device

    iface = get_interface_for_device(T1)
    assert iface.device_count() == 2 and iface.is_available()
    assert iface.current_device() == 0
    with DeviceGuard(iface, 1):
        assert iface.current_device() == torch.tpu.current_device() == 1
        assert torch.ones(1, device="tpu").device == T1
    assert iface.current_device() == 0
    with iface.device(1):
        assert torch.tpu.current_device() == 1
    s = iface.Stream(device=1)
    with iface.stream(s):
        assert iface.current_stream() == s
    iface.synchronize(1)
    assert iface.Worker.get_device_properties(1).index == 1
    assert iface.is_dtype_supported(torch.float64) and iface.is_dtype_supported(torch.float16)
    assert iface.memory_allocated(1) == torch.tpu.memory_allocated(1)


def check_rng_state_per_device():
    # CUDA's API: one generator per device, saved and restored all at once.
    torch.manual_seed(3)
    a0, a1 = torch.rand(4, device=T0), torch.rand(4, device=T1)
    torch.manual_seed(3)
    assert torch.equal(a0.cpu(), torch.rand(4, device=T0).cpu())
    assert torch.equal(a1.cpu(), torch.rand(4, device=T1).cpu())
    states = torch.tpu.get_rng_state_all()
    assert len(states) == 2 and all(s.dtype == torch.uint8 for s in states)
    x0, x1 = torch.rand(3, device=T0), torch.rand(3, device=T1)
    torch.tpu.set_rng_state_all(states)
    assert torch.equal(x0.cpu(), torch.rand(3, device=T0).cpu())
    assert torch.equal(x1.cpu(), torch.rand(3, device=T1).cpu())
    s1 = torch.tpu.get_rng_state(1)
    y = torch.rand(3, device=T1)
    torch.tpu.set_rng_state(s1, 1)
    assert torch.equal(y.cpu(), torch.rand(3, device=T1).cpu())
    try:
        torch.tpu.set_rng_state_all(states * 2)
        raise AssertionError("three states for two devices must raise")
    except IndexError:
        pass


def check_copies_into_views_and_dtypes_across_devices():
    src = torch.arange(12.0, device=T1).reshape(3, 4)
    ref = torch.arange(12.0).reshape(3, 4)
    dst = torch.zeros(6, 4, device=T0)
    dst[::2].copy_(src)
    exp = torch.zeros(6, 4)
    exp[::2] = ref
    assert dst.device == T0 and torch.equal(dst.cpu(), exp)
    d2 = torch.zeros(4, 3, dtype=torch.int32, device=T0).copy_(src.t())
    assert torch.equal(d2.cpu(), ref.t().to(torch.int32))
    d3 = torch.zeros(3, 4, device=T0).copy_(src[0])  # broadcast source
    assert torch.equal(d3.cpu(), ref[0].expand(3, 4))
    for dt in (torch.bool, torch.bfloat16, torch.int8, torch.float64):
        a = (torch.arange(6) % 4).to(dt)
        r = a.to(T0).to(T1, torch.float32)
        assert r.device == T1 and torch.equal(r.cpu(), a.float()), dt


def check_foreach_lists_spanning_both_devices():
    # One foreach call whose tensors sit on two devices (strict mode runs the
    # call as one program per device): CPU's values, each result on its device.
    def lists(device0, device1):
        a = [torch.ones(3, device=device0), torch.ones(2, 2, device=device1)]
        b = [torch.full((3,), 2.0, device=device0), torch.full((2, 2), 3.0, device=device1)]
        return a, b

    want, wb = lists("cpu", "cpu")
    torch._foreach_addcmul_(want, wb, wb, value=0.5)
    got, gb = lists(T0, T1)
    _no_fallback(lambda: torch._foreach_addcmul_(got, gb, gb, value=0.5))
    assert [t.device for t in got] == [T0, T1]
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g.cpu(), w), (g, w)
    with torch.tpu.device(1):  # a call on the non-default device alone
        c = [torch.ones(2, device="tpu")]
        norms = torch._foreach_norm(torch._foreach_mul(c, 4.0))
    want_norm = torch._foreach_norm(torch._foreach_mul([torch.ones(2)], 4.0))[0]
    assert norms[0].device == T1 and torch.equal(norms[0].cpu(), want_norm)


if __name__ == "__main__":
    run_checks_main(globals(), devices=2)

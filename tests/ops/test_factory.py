"""Factory ops with value ranges on tpu compared with CPU PyTorch: logspace and
the triangle index ops (tril_indices, triu_indices), with no CPU fallback."""

import pytest
import torch

from _util import CPU, run_both

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md


@pytest.mark.parametrize("kw", [
    dict(start=0, end=3, steps=5, dtype=torch.int64),
    dict(start=-1.5, end=3.2, steps=7, base=2),
    dict(start=1, end=1, steps=1),
    dict(start=0, end=1, steps=0),
    dict(start=2.7, end=-3.3, steps=5, dtype=torch.int64, base=3.5),
    dict(start=0, end=2, steps=9, dtype=torch.float64),
])
def test_logspace(kw):
    run_both(lambda d: torch.logspace(device=d, **kw), CPU)


@pytest.mark.parametrize("fn", [torch.tril_indices, torch.triu_indices])
def test_tri_indices(fn):
    for args in [(3, 3), (4, 5, 1), (5, 4, -2), (3, 3, 10), (3, 3, -10), (0, 4), (4, 0, 0)]:
        run_both(lambda d: fn(*args, device=d), CPU)
    run_both(lambda d: fn(4, 3, dtype=torch.int32, device=d), CPU)
    with pytest.raises(RuntimeError, match="row must be non-negative"):
        fn(-1, 3, device="tpu")
    with pytest.raises(NotImplementedError):
        fn(3, 3, dtype=torch.float32, device="tpu")


@pytest.mark.parametrize("make", [
    lambda d: torch.scalar_tensor(1e6, dtype=torch.half, device=d),
    lambda d: torch.full((1, 1), 1e39, dtype=torch.bfloat16, device=d),
    lambda d: torch.full((1,), -1, dtype=torch.uint8, device=d),
    lambda d: torch.scalar_tensor(1e6, dtype=torch.float8_e4m3fn, device=d).float(),
    lambda d: torch.where(torch.tensor([True, False], device=d),
                          torch.tensor([1.0, 2.0], dtype=torch.half, device=d), 1e6),
    lambda d: torch.where(torch.tensor([True, False], device=d), 1e6,
                          torch.tensor([1.0, 2.0], dtype=torch.half, device=d)),
])
def test_one_element_fill_converts_as_cpus_scalar_fill(make):
    # CPU fills one element with Scalar::to<T> (scalar_tensor, where's scalar
    # operand): 1e6 in float16 is inf, -1 in uint8 255; tpu raised "value
    # cannot be converted to type c10::Half without overflow".
    run_both(make, CPU)


@pytest.mark.parametrize("make", [
    lambda d: torch.full((2,), 1e6, dtype=torch.half, device=d),
    lambda d: torch.full((1,), 300, dtype=torch.int8, device=d),
    lambda d: torch.scalar_tensor(1e40, device=d),
    lambda d: torch.scalar_tensor(float("nan"), dtype=torch.int32, device=d),
])
def test_fills_cpu_refuses_stay_refused(make):
    with pytest.raises(RuntimeError) as cpu:
        make("cpu")
    with pytest.raises(RuntimeError, match="without overflow") as tpu:
        make("tpu")
    assert str(cpu.value) == str(tpu.value)

"""Factory ops with value ranges on tpu compared with CPU PyTorch: logspace and
the triangle index ops (tril_indices, triu_indices), with no CPU fallback."""

import pytest
import torch

from _util import assert_close_cpu, no_fallback

pytestmark = [pytest.mark.fused_pass, pytest.mark.background_pass]  # passes: tests/README.md


def factory_both(fn):
    expected = fn("cpu")
    with no_fallback():
        actual = fn("tpu")
    assert_close_cpu(actual, expected)


@pytest.mark.parametrize("kw", [
    dict(start=0, end=3, steps=5, dtype=torch.int64),
    dict(start=-1.5, end=3.2, steps=7, base=2),
    dict(start=1, end=1, steps=1),
    dict(start=0, end=1, steps=0),
    dict(start=2.7, end=-3.3, steps=5, dtype=torch.int64, base=3.5),
    dict(start=0, end=2, steps=9, dtype=torch.float64),
])
def test_logspace(kw):
    factory_both(lambda d: torch.logspace(device=d, **kw))


@pytest.mark.parametrize("fn", [torch.tril_indices, torch.triu_indices])
def test_tri_indices(fn):
    for args in [(3, 3), (4, 5, 1), (5, 4, -2), (3, 3, 10), (3, 3, -10), (0, 4), (4, 0, 0)]:
        factory_both(lambda d: fn(*args, device=d))
    factory_both(lambda d: fn(4, 3, dtype=torch.int32, device=d))
    with pytest.raises(RuntimeError, match="row must be non-negative"):
        fn(-1, 3, device="tpu")
    with pytest.raises(NotImplementedError):
        fn(3, 3, dtype=torch.float32, device="tpu")

"""Strict and debug eager modes give the same results."""

import torch

import torchtpu
from _util import assert_close_cpu


def small_program(x, w):
    y = (x @ w).relu()
    return (y * 2 - 1).sum(dim=1)


def test_debug_and_strict_agree():
    torch.manual_seed(0)
    x = torch.randn(8, 5)
    w = torch.randn(5, 3)
    expected = small_program(x, w)
    results = {}
    for mode in ("strict", "debug"):
        torchtpu.set_eager_mode(mode)
        assert torchtpu.get_eager_mode() == mode
        results[mode] = small_program(x.to("tpu"), w.to("tpu"))
        assert_close_cpu(results[mode], expected)
    torch.testing.assert_close(results["strict"].cpu(), results["debug"].cpu(), rtol=0, atol=0)


def test_strict_mode_does_not_transfer_until_read():
    torchtpu.set_eager_mode("strict")
    x = torch.ones(100, device="tpu")
    torchtpu.metrics.reset()
    for _ in range(10):
        x = x + 1
    assert torchtpu.metrics.metrics()["bytes_to_host"] == 0
    assert x[0].item() == 11.0

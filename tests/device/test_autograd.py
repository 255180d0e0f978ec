"""Gradients of whole models on tpu match CPU PyTorch within 1e-5."""

import copy

import pytest
import torch
import torch.nn.functional as F

from _util import no_fallback
from torchtpu.examples.train_digits import DigitsCNN

pytestmark = pytest.mark.opt_out_pass  # passes: tests/README.md


def grads_on(model, x, y, device):
    m = copy.deepcopy(model).to(device)
    loss = F.cross_entropy(m(x.to(device)), y.to(device))
    loss.backward()
    return loss.detach().cpu(), {n: p.grad.cpu() for n, p in m.named_parameters()}


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_mlp_gradients_match_cpu(mode):
    import torchtpu

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 16), torch.nn.Tanh(), torch.nn.Linear(16, 5))
    x = torch.randn(20, 12)
    y = torch.randint(0, 5, (20,))
    cpu_loss, cpu_grads = grads_on(model, x, y, "cpu")
    torchtpu.set_eager_mode(mode)
    with no_fallback():
        loss, grads = grads_on(model, x, y, "tpu")
    torch.testing.assert_close(loss, cpu_loss, rtol=1e-5, atol=1e-6)
    for name, g in cpu_grads.items():
        torch.testing.assert_close(grads[name], g, rtol=1e-5, atol=1e-5, msg=name)


def test_cnn_gradients_match_cpu():
    torch.manual_seed(0)
    model = DigitsCNN()
    x = torch.randn(16, 1, 8, 8)
    y = torch.randint(0, 10, (16,))
    cpu_loss, cpu_grads = grads_on(model, x, y, "cpu")
    with no_fallback():
        loss, grads = grads_on(model, x, y, "tpu")
    torch.testing.assert_close(loss, cpu_loss, rtol=1e-5, atol=1e-6)
    for name, g in cpu_grads.items():
        torch.testing.assert_close(grads[name], g, rtol=1e-5, atol=1e-5, msg=name)

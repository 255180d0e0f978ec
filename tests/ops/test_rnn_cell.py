"""nn.LSTM / nn.GRU / LSTMCell / GRUCell on tpu: ATen sends their pointwise part to
_thnn_fused_lstm_cell / _thnn_fused_gru_cell (no CPU kernel, so no fallback can
run them); lowered, forward and backward equal CPU's unfused path, also under
autocast."""

import copy

import pytest
import torch
from torch import nn

from _util import no_fallback

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

MODULES = {
    "LSTM": lambda: nn.LSTM(6, 5, num_layers=2, batch_first=True),
    "LSTM-nobias": lambda: nn.LSTM(6, 5, bias=False),
    "GRU": lambda: nn.GRU(6, 5, num_layers=2, bidirectional=True),
    "GRU-nobias": lambda: nn.GRU(6, 5, bias=False, batch_first=True),
    "LSTMCell": lambda: nn.LSTMCell(6, 5),
    "GRUCell": lambda: nn.GRUCell(6, 5),
}


def first(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("name", MODULES)
def test_forward_and_backward_match_cpu(name):
    torch.manual_seed(0)
    cpu = MODULES[name]()
    tpu = copy.deepcopy(cpu).to("tpu")
    x = torch.randn(3, 4, 6) if "Cell" not in name else torch.randn(3, 6)
    x_cpu = x.clone().requires_grad_()
    out_cpu = first(cpu(x_cpu))
    (out_cpu * out_cpu).sum().backward()
    x_tpu = x.to("tpu").requires_grad_()
    with no_fallback():
        out = first(tpu(x_tpu))
        (out * out).sum().backward()
    torch.testing.assert_close(out.cpu(), out_cpu.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x_tpu.grad.cpu(), x_cpu.grad, rtol=1e-4, atol=1e-5)
    for (n, p), q in zip(tpu.named_parameters(), cpu.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=n)


def test_lstm_cell_with_state_and_only_cy_used():
    torch.manual_seed(0)
    cpu = nn.LSTMCell(4, 3)
    tpu = copy.deepcopy(cpu).to("tpu")
    x, h, c = torch.randn(2, 4), torch.randn(2, 3), torch.randn(2, 3)
    c_cpu = c.clone().requires_grad_()
    cpu(x, (h, c_cpu))[1].sum().backward()  # grad_hy is undefined
    c_tpu = c.to("tpu").requires_grad_()
    with no_fallback():
        tpu(x.to("tpu"), (h.to("tpu"), c_tpu))[1].sum().backward()
    torch.testing.assert_close(c_tpu.grad.cpu(), c_cpu.grad)


def test_under_autocast():
    torch.manual_seed(0)
    cpu = nn.LSTM(6, 5, batch_first=True)
    tpu = copy.deepcopy(cpu).to("tpu")
    x = torch.randn(2, 3, 6)
    # CPU's bf16 LSTM under autocast is oneDNN's, which raises "could not
    # create a primitive descriptor" on a CPU without bf16 instructions (an
    # AMD EPYC with AVX2); without oneDNN, CPU autocast runs the LSTM in
    # float32, a reference within bf16's rounding of tpu's bf16 result.
    with torch.backends.mkldnn.flags(enabled=False), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = cpu(x)[0]
    with no_fallback(), torch.autocast("tpu"):
        out = tpu(x.to("tpu"))[0]
        out.float().sum().backward()
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu().float(), expected.float(), rtol=2e-2, atol=2e-2)
    assert tpu.weight_ih_l0.grad.dtype == torch.float32

"""torch.autocast("tpu"): CUDA's op lists (lower precision, float32, promote) at the
AutocastPrivateUse1 key, bfloat16 by default, in every eager mode and under
torch.compile; models train as under CPU autocast."""

import copy
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchtpu
from _util import no_fallback
from torchtpu.examples import train_digits

MODES = ("debug", "strict", "fused")
# bf16 keeps 8 significant bits (relative step 2**-8 = 0.4%); a few training
# steps of the same model under tpu and CPU autocast round in different places
# (CPU's op lists differ from CUDA's), so losses agree to about 1%.
TRAIN_RTOL = 2e-2


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    yield
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()


def handed_case(dev):
    """../shared/cases/06-autocast-bf16.py: returns (out, loss, weight grad)."""
    torch.manual_seed(0)
    m = nn.Linear(16, 4).to(dev)
    x = torch.randn(8, 16).to(dev)
    y = torch.tensor([0, 1, 2, 3] * 2).to(dev)
    with torch.autocast(dev, dtype=torch.bfloat16):
        out = m(x)
        loss = F.cross_entropy(out, y)
    loss.backward()
    return out, loss, m.weight.grad


@pytest.mark.parametrize("mode", MODES)
def test_handed_case_in_every_mode(mode):
    torchtpu.set_eager_mode(mode)
    cpu_out, cpu_loss, cpu_grad = handed_case("cpu")
    with no_fallback():
        out, loss, grad = handed_case("tpu")
        assert out.dtype == torch.bfloat16
        assert loss.dtype == torch.float32
        assert grad.dtype == torch.float32
        torch.testing.assert_close(out.cpu(), cpu_out)
        torch.testing.assert_close(loss.cpu(), cpu_loss, rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(grad.cpu(), cpu_grad, rtol=2e-2, atol=2e-3)


def test_default_dtype_is_bfloat16():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    a = torch.randn(4, 4, device="tpu")
    with torch.autocast("tpu"):
        assert torch.is_autocast_enabled("tpu")
        assert (a @ a).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("tpu")
    assert (a @ a).dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lower_precision_ops_match_explicit_casts(dtype):
    """Matmul-class ops run in the autocast dtype: the same values as CPU with
    the inputs cast by hand."""
    torch.manual_seed(0)
    x, w, b = torch.randn(6, 8), torch.randn(5, 8), torch.randn(5)
    bx, by = torch.randn(3, 4, 8), torch.randn(3, 8, 2)
    img, k = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)
    cases = {
        "linear": (lambda x, w, b: F.linear(x, w, b), (x, w, b)),
        "matmul": (torch.matmul, (x, w.t())),
        "mm": (torch.mm, (x, w.t())),
        "addmm": (torch.addmm, (b, x, w.t())),
        "bmm": (torch.bmm, (bx, by)),
        "baddbmm": (lambda a, b1, b2: torch.baddbmm(a, b1, b2), (torch.randn(3, 4, 2), bx, by)),
        "conv2d": (lambda i, k: F.conv2d(i, k, padding=1), (img, k)),
    }
    for name, (fn, args) in cases.items():
        expected = fn(*[a.to(dtype) for a in args])
        with no_fallback(), torch.autocast("tpu", dtype=dtype):
            actual = fn(*[a.to("tpu") for a in args])
        assert actual.dtype == dtype, name
        torch.testing.assert_close(actual.cpu(), expected, rtol=1e-2, atol=1e-2, msg=name)


def test_float32_ops_run_in_float32_on_lower_precision_inputs():
    """CUDA's float32 list: a bf16 input is widened and the result is float32."""
    torch.manual_seed(0)
    h = torch.randn(4, 10).to(torch.bfloat16)
    t = torch.randint(0, 10, (4,))
    cases = {
        "softmax": lambda h: torch.softmax(h, -1),
        "log_softmax": lambda h: F.log_softmax(h, -1),
        "exp": torch.exp,
        "log": lambda h: torch.log(h.abs()),  # abs is exact in bf16
        "sum": torch.sum,
        "cumsum": lambda h: torch.cumsum(h, 1),
        "layer_norm": lambda h: F.layer_norm(h, (10,)),
        "mse_loss": lambda h: F.mse_loss(h, h.flip(0)),
        "nll_loss": lambda h: F.nll_loss(h, t.to(h.device)),
        "pow": lambda h: h.pow(2),
        "norm": lambda h: h.norm(),
    }
    for name, fn in cases.items():
        expected = fn(h.float())
        with no_fallback(), torch.autocast("tpu"):
            actual = fn(h.to("tpu"))
        assert actual.dtype == torch.float32, name
        torch.testing.assert_close(actual.cpu(), expected, msg=name)
    # cross_entropy is not on CUDA's lists: ATen's cross_entropy_loss calls
    # log_softmax with dtype= its input's (bf16), which autocast leaves alone,
    # and nll_loss (float32) widens that result.
    with no_fallback(), torch.autocast("tpu"):
        actual = F.cross_entropy(h.to("tpu"), t.to("tpu"))
    expected = F.nll_loss(F.log_softmax(h, -1).float(), t)
    assert actual.dtype == torch.float32
    torch.testing.assert_close(actual.cpu(), expected)


def test_promote_ops_take_the_widest_input():
    a = torch.randn(4, device="tpu")
    h = torch.randn(4, device="tpu").to(torch.bfloat16)
    with no_fallback(), torch.autocast("tpu"):
        assert torch.addcmul(a, h, h).dtype == torch.float32
        assert torch.addcmul(h, h, h).dtype == torch.bfloat16
        assert torch.atan2(h, a).dtype == torch.float32
        # ops on no list keep their inputs' dtypes
        assert torch.relu(a).dtype == torch.float32
        assert (h + h).dtype == torch.bfloat16


def test_cpu_tensors_are_untouched_by_tpu_autocast():
    x = torch.randn(3, 3)
    with torch.autocast("tpu"):
        assert (x @ x).dtype == torch.float32


def test_backward_gives_float32_grads_for_float32_params():
    lin = nn.Linear(8, 4).to("tpu")
    x = torch.randn(5, 8, device="tpu", requires_grad=True)
    with no_fallback():
        with torch.autocast("tpu"):
            out = lin(x)
        out.float().sum().backward()
    assert lin.weight.grad.dtype == torch.float32
    assert x.grad.dtype == torch.float32


def test_float64_warns_and_disables_as_on_cuda():
    x = torch.randn(3, 3, device="tpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast("tpu", dtype=torch.float64):
            assert not torch.is_autocast_enabled("tpu")
            assert (x @ x).dtype == torch.float32
    assert any("target dtype is not supported" in str(w.message) for w in caught)


def test_binary_cross_entropy_refused_as_on_cuda():
    p = torch.rand(4, device="tpu")
    with torch.autocast("tpu"):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, p)
    with torch.autocast("tpu"):
        out = F.binary_cross_entropy_with_logits(p.to(torch.bfloat16), p)
    assert out.dtype == torch.float32


def test_under_compile_backend_tpu():
    def step(m, x, y):
        with torch.autocast("tpu"):
            out = m(x)
            loss = F.cross_entropy(out, y)
        return out, loss

    torch.manual_seed(0)
    m = nn.Linear(16, 4).to("tpu")
    x = torch.randn(8, 16, device="tpu")
    y = torch.tensor([0, 1, 2, 3] * 2, device="tpu")
    eager_out, eager_loss = step(m, x, y)
    with no_fallback():
        out, loss = torch.compile(step, backend="tpu")(m, x, y)
        loss.backward()
    assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
    assert m.weight.grad.dtype == torch.float32
    torch.testing.assert_close(out.cpu(), eager_out.cpu())
    torch.testing.assert_close(loss.cpu(), eager_loss.cpu())


def train_steps(model, batches, device, steps_fn=None):
    """SGD steps under autocast bf16 on `device`; returns the losses (floats)."""
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches:
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = steps_fn(model, x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [v.item() for v in losses], model


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_digits_cnn_trains_as_under_cpu_autocast(mode):
    torchtpu.set_eager_mode(mode)
    x, y, _, _ = train_digits.load_data(0)
    batches = [(x[i * 64:(i + 1) * 64], y[i * 64:(i + 1) * 64]) for i in range(5)]
    torch.manual_seed(0)
    cpu_model = train_digits.DigitsCNN()
    tpu_model = copy.deepcopy(cpu_model)

    def fn(m, x, y):
        return F.cross_entropy(m(x), y)

    expected, _ = train_steps(cpu_model, batches, "cpu", fn)
    with no_fallback():
        actual, tpu_model = train_steps(tpu_model, batches, "tpu", fn)
    assert actual == pytest.approx(expected, rel=TRAIN_RTOL)
    assert actual[-1] < actual[0]
    for p in tpu_model.parameters():
        assert p.dtype == torch.float32


def test_gpt2_trains_as_under_cpu_autocast():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    cpu_model = transformers.GPT2LMHeadModel(config)
    tpu_model = copy.deepcopy(cpu_model)
    g = torch.Generator().manual_seed(1)
    batches = [(b[:, :-1], b[:, 1:]) for b in
               (torch.randint(0, 128, (2, 17), generator=g) for _ in range(4))]

    def fn(m, x, y):
        logits = m(x).logits
        return F.cross_entropy(logits.reshape(-1, 128), y.reshape(-1))

    expected, _ = train_steps(cpu_model, batches, "cpu", fn)
    tpu_model = tpu_model.to("tpu")  # keeps the tied head tied, as for CUDA
    with no_fallback():
        actual, _ = train_steps(tpu_model, batches, "tpu", fn)
    assert actual == pytest.approx(expected, rel=TRAIN_RTOL)

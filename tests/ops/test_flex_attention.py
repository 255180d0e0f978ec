"""torch.nn.attention.flex_attention on tpu (torchtpu.integrations.flex_attention):
score_mod and block masks, forward and backward, eager and torch.compile,
against CPU, with no CPU fallback; plus the PyTorch checks the patch relies on."""

import inspect
import warnings

import pytest
import torch
import torch.nn.attention.flex_attention as flex_module
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

import torchtpu.integrations.flex_attention as tpu_flex
from _util import fresh_dynamo, no_fallback  # noqa: F401  (fresh_dynamo: autouse)

tpu_flex.enable()

B, H, L, E = 2, 2, 200, 16  # L: not a multiple of the 128-token mask block

_DOCS = torch.tensor([0] * 70 + [1] * 50 + [2] * 80)  # document id of each position
_SLOPES = torch.tensor([0.5, 0.25])  # ALiBi slope per head


def _causal(b, h, q, k):
    return q >= k


def _sliding_window(b, h, q, k):
    return (q >= k) & (q - k <= 48)


def _documents(docs):
    def mask_mod(b, h, q, k):
        return (docs[q] == docs[k]) & (q >= k)
    return mask_mod


def _relative(score, b, h, q, k):
    return score + (q - k) * 0.01


def _alibi(slopes):
    def score_mod(score, b, h, q, k):
        return score + slopes[h] * (k - q)
    return score_mod


def _softcap(score, b, h, q, k):
    return 5.0 * torch.tanh(score / 5.0)


# (score_mod factory, mask_mod factory): factories take the device, so
# tensors a mod captures (document ids, slopes) live where q, k, v live.
CASES = {
    "causal": (None, lambda d: _causal),
    "sliding_window": (None, lambda d: _sliding_window),
    "documents": (None, lambda d: _documents(_DOCS.to(d))),
    "relative_bias": (lambda d: _relative, None),
    "alibi_causal": (lambda d: _alibi(_SLOPES.to(d)), lambda d: _causal),
    "softcap_documents": (lambda d: _softcap, lambda d: _documents(_DOCS.to(d))),
}


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, L, E, generator=g) for _ in range(3)]


def _dense_reference(q, k, v, score_mod, mask_mod):
    """Attention written out on full [B, H, L, L] scores (CPU, autograd): the
    mods take broadcast index tensors, as flex_attention's math path vmaps them."""
    b, h = torch.arange(B)[:, None, None, None], torch.arange(H)[None, :, None, None]
    qi, ki = torch.arange(L)[None, None, :, None], torch.arange(L)[None, None, None, :]
    scores = q @ k.transpose(-1, -2) / E ** 0.5
    if score_mod is not None:
        scores = score_mod(scores, b, h, qi, ki)
    if mask_mod is not None:
        scores = scores.masked_fill(~mask_mod(b, h, qi, ki), float("-inf"))
    return scores.softmax(-1) @ v


def _run(device, case, compiled=None):
    """flex_attention on ``device`` for ``case``: (out, [dq, dk, dv]) of
    ``out.square().sum()``. ``compiled``: None (eager), a torch.compile backend,
    or "default" (torch.compile without backend=)."""
    score_factory, mask_factory = CASES[case]
    score_mod = score_factory(device) if score_factory else None
    block_mask = None
    if mask_factory:
        block_mask = create_block_mask(mask_factory(device), B, H, L, L, device=device)
    q, k, v = (t.to(device).requires_grad_() for t in _inputs())

    def attend(q, k, v):
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)

    if compiled is None:
        fn = attend
    elif compiled == "default":
        fn = torch.compile(attend, fullgraph=True)
    else:
        fn = torch.compile(attend, backend=compiled, fullgraph=True)
    out = fn(q, k, v)
    out.square().sum().backward()
    return out, [q.grad, k.grad, v.grad]


def _expected(case):
    """CPU's flex_attention forward (CPU has no flex backward in torch 2.13:
    it refuses inputs that require grad) and the dense reference's gradients."""
    score_factory, mask_factory = CASES[case]
    score_mod = score_factory("cpu") if score_factory else None
    mask_mod = mask_factory("cpu") if mask_factory else None
    q, k, v = _inputs()
    block_mask = create_block_mask(mask_mod, B, H, L, L, device="cpu") if mask_mod else None
    out = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    dense = _dense_reference(q, k, v, score_mod, mask_mod)
    dense.square().sum().backward()
    torch.testing.assert_close(out, dense.detach(), rtol=1.3e-6, atol=1e-5)
    return out, [q.grad, k.grad, v.grad]


@pytest.fixture(autouse=True)
def _quiet_eager_warning():
    # flex_attention without torch.compile warns (once per process) that it
    # materializes the scores; true on tpu too, noted in docs/integrations.md.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        yield


def _assert_matches(actual, expected):
    out, grads = actual
    want_out, want_grads = expected
    assert out.device.type == "tpu"
    torch.testing.assert_close(out.detach().cpu(), want_out, rtol=1.3e-6, atol=1e-5)
    for got, want in zip(grads, want_grads):
        torch.testing.assert_close(got.cpu(), want, rtol=1.3e-6, atol=2e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_eager_matches_cpu(case):
    expected = _expected(case)
    with no_fallback():
        actual = _run("tpu", case)
    _assert_matches(actual, expected)


@pytest.mark.parametrize("case", ["causal", "alibi_causal", "softcap_documents"])
def test_compiled_matches_cpu(case):
    expected = _expected(case)
    with no_fallback():
        actual = _run("tpu", case, compiled="tpu")
    _assert_matches(actual, expected)
    from torch._dynamo.utils import counters
    assert not counters["graph_break"]


def test_compiled_with_the_default_backend():
    # torch.compile without backend= routes tpu graphs to "tpu" (_compile_default).
    expected = _expected("sliding_window")
    with no_fallback():
        actual = _run("tpu", "sliding_window", compiled="default")
    _assert_matches(actual, expected)


def test_learnable_score_mod_buffer_gets_its_gradient():
    # A score_mod capturing a tensor that requires grad (a per-head bias):
    # flex_attention's backward returns its gradient too.
    def run(device, fn):
        bias = torch.tensor([0.3, -0.2], device=device, requires_grad=True)
        q, k, v = (t.to(device) for t in _inputs())
        fn(q, k, v, lambda s, b, h, qi, ki: s + bias[h] * (qi - ki) * 0.01).sum().backward()
        return bias.grad

    def dense(q, k, v, score_mod):
        return _dense_reference(q, k, v, score_mod, _causal)

    mask = create_block_mask(_causal, B, H, L, L, device="tpu")
    want = run("cpu", dense)
    with no_fallback():
        got = run("tpu", lambda q, k, v, mod: flex_attention(q, k, v, score_mod=mod,
                                                              block_mask=mask))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-4)


def test_gqa_and_lse():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 4, 64, 8, generator=g)
    k, v = torch.randn(1, 2, 64, 8, generator=g), torch.randn(1, 2, 64, 8, generator=g)
    lse = AuxRequest(lse=True)
    want, want_aux = flex_attention(q, k, v, enable_gqa=True, return_aux=lse)
    with no_fallback():
        got, aux = flex_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), enable_gqa=True,
                                  return_aux=lse)
    torch.testing.assert_close(got.cpu(), want, rtol=1.3e-6, atol=1e-5)
    torch.testing.assert_close(aux.lse.cpu(), want_aux.lse, rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("compiled", [False, True])
def test_autocast_runs_in_bfloat16(compiled):
    q, k, v = (t.to("tpu").requires_grad_() for t in _inputs())
    mask = create_block_mask(_causal, B, H, L, L, device="tpu")

    def attend(q, k, v):
        return flex_attention(q, k, v, score_mod=_relative, block_mask=mask)

    fn = torch.compile(attend, backend="tpu", fullgraph=True) if compiled else attend
    with no_fallback():
        with torch.autocast("tpu"):
            out = fn(q, k, v)
            out.float().sum().backward()  # backward inside autocast falls through
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = flex_attention(*_inputs(), score_mod=_relative,
                              block_mask=create_block_mask(_causal, B, H, L, L, device="cpu"))
    assert out.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(out.detach().cpu(), want)
    assert q.grad.dtype == torch.float32 and q.grad.isfinite().all()


# The PyTorch code enable() works around. When one of these fails, PyTorch
# changed it: re-check torchtpu/integrations/flex_attention.py (a passing
# "refuses" test turning red means torch accepts tpu itself and the patch can go).

def test_torch_check_still_refuses_tpu():
    q = torch.zeros(1, 1, 4, 8, device="tpu")
    with pytest.raises(ValueError, match="FlexAttention is only supported on"):
        tpu_flex._torch_validate_device(q, q, q)


def test_flex_attention_still_calls_the_check_by_module_name():
    assert tpu_flex._torch_validate_device.__module__ == flex_module.__name__
    assert "_validate_device(query, key, value)" in inspect.getsource(flex_module.flex_attention)
    assert flex_module._validate_device is tpu_flex._validate_device


def test_other_devices_keep_torch_check():
    q = torch.zeros(1, 1, 4, 8, requires_grad=True)
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        flex_attention(q, q, q)


def test_torch_has_no_tpu_autocast_kernel_of_its_own():
    from torch._C import DispatchKey
    from torch._higher_order_ops.flex_attention import flex_attention as hop

    assert hop.py_kernels[DispatchKey.AutocastPrivateUse1] is tpu_flex._flex_attention_autocast_tpu
    default_fallthrough = torch._ops._HIGHER_ORDER_OP_DEFAULT_FALLTHROUGH_DISPATCH_KEYS
    assert DispatchKey.AutocastPrivateUse1 not in default_fallthrough

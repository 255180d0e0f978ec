"""F.scaled_dot_product_attention on tpu: the "overrideable" backend
(_scaled_dot_product_fused_attention_overrideable and its backward, one program
each, csrc/aten/rules/nn/sdpa.cc) gives CPU's math-path values and gradients;
calls it does not cover (dropout, GQA, broadcast batch dims) still run the math
path. The reference is CPU PyTorch's math path (sdpa_kernel(MATH)), which the
tpu lowering follows (f32 compute for bf16/f16, zeros for fully masked rows)."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

import torchtpu
from _util import TEST_MODE, assert_close_cpu, no_fallback, run_both, same_error

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

OVERRIDEABLE = 4  # at::SDPBackend::overrideable
MATH = 0


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def run(device, q, k, v, view=None, grad_mask=False, reference=False, **kw):
    """sdpa on `device`; returns (out, grads of q, k, v and a float mask)."""
    xs = [t.detach().to(device) for t in (q, k, v)]
    if view is not None:  # e.g. transposed heads, applied on the device
        xs = [view(t) for t in xs]
    xs = [t.requires_grad_() for t in xs]
    mask = kw.pop("attn_mask", None)
    if mask is not None:
        mask = mask.detach().to(device)
        if grad_mask:
            mask.requires_grad_()
    ctx = sdpa_kernel([SDPBackend.MATH]) if reference else torch.enable_grad()
    with ctx:
        out = F.scaled_dot_product_attention(*xs, attn_mask=mask, **kw)
    w = torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(out.dtype).to(device)
    (out * w).sum().backward()
    grads = [t.grad for t in xs] + ([mask.grad] if grad_mask else [])
    return out, grads


def sdpa_matches_cpu(q, k, v, rtol=None, atol=None, reference=True, **kw):
    """sdpa's output and the gradients of q, k, v (and a float mask with
    grad_mask) on tpu equal CPU's (run_both: no fallback): CPU's math path, or
    its default kernel with reference=False. Returns the tpu output."""
    mask = kw.pop("attn_mask", None)

    def attend(q, k, v, mask):
        on_cpu = q.device.type == "cpu"
        out, grads = run(q.device, q, k, v, attn_mask=mask, reference=reference and on_cpu, **kw)
        return out.detach(), grads

    (out, _), _ = run_both(attend, q, k, v, mask, rtol=rtol, atol=atol)
    return out


def bool_mask(shape, seed=1):
    m = make(shape, seed=seed) > 0
    m[..., 0] = True  # every row keeps a key (fully masked rows: own test)
    return m


B, H, L, S, E = 2, 3, 5, 7, 8


@pytest.mark.parametrize("case", [
    "plain", "bool_mask", "bool_mask_broadcast", "float_mask", "float_mask_broadcast",
    "causal_square", "causal_wide", "causal_tall", "causal_and_mask", "scale", "negative_scale",
    "three_d", "value_dim",
])
def test_values_and_grads_match_cpu_math(case):
    q, k, v = make((B, H, L, E)), make((B, H, S, E), seed=1), make((B, H, S, E), seed=2)
    kw = {}
    if case == "bool_mask":
        kw["attn_mask"] = bool_mask((L, S))
    elif case == "bool_mask_broadcast":
        kw["attn_mask"] = bool_mask((B, 1, 1, S))
    elif case == "float_mask":
        kw = {"attn_mask": make((B, H, L, S), seed=3), "grad_mask": True}
    elif case == "float_mask_broadcast":
        kw = {"attn_mask": make((1, H, 1, S), seed=3), "grad_mask": True}
    elif case in ("causal_square", "causal_wide", "causal_tall"):
        Lq, Sk = {"causal_square": (S, S), "causal_wide": (3, S), "causal_tall": (S, 3)}[case]
        q, k, v = make((B, H, Lq, E)), make((B, H, Sk, E), seed=1), make((B, H, Sk, E), seed=2)
        kw["is_causal"] = True
    elif case == "causal_and_mask":
        # CPU's default kernel (flash) applies both; its math path refuses them.
        kw = {"attn_mask": make((L, S), seed=3), "is_causal": True, "reference": False}
    elif case == "scale":
        kw["scale"] = 0.3
    elif case == "negative_scale":
        kw["scale"] = -0.5
    elif case == "three_d":
        q, k, v = q[0], k[0], v[0]
    elif case == "value_dim":
        v = make((B, H, S, 6), seed=2)
    sdpa_matches_cpu(q, k, v, **kw)


def test_fully_masked_rows_give_zeros_and_zero_grads():
    q, k, v = make((1, 2, 4, E)), make((1, 2, 6, E), seed=1), make((1, 2, 6, E), seed=2)
    m = bool_mask((4, 6))
    m[2] = False
    out = sdpa_matches_cpu(q, k, v, attn_mask=m)
    assert torch.equal(out[:, :, 2].detach().cpu(), torch.zeros(1, 2, E))
    f = torch.zeros(1, 2, 4, 6)
    f[0, 1, 3] = float("-inf")
    sdpa_matches_cpu(q, k, v, attn_mask=f, grad_mask=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_dtypes(dtype):
    q, k, v = (make((B, H, L, E), dtype), make((B, H, S, E), dtype, 1),
               make((B, H, S, E), dtype, 2))
    sdpa_matches_cpu(q, k, v)
    sdpa_matches_cpu(q, k, v, attn_mask=make((L, S), dtype, 3), grad_mask=True)
    sdpa_matches_cpu(q, k, v, attn_mask=bool_mask((L, S)))


def test_transposed_heads_as_hugging_face_passes_them():
    # [B, L, H, E] storage viewed as [B, H, L, E]; the output keeps that
    # layout (the op's meta function's), so transposing it back is free.
    heads = lambda t: t.transpose(1, 2)  # noqa: E731
    q, k, v = make((B, L, H, E)), make((B, S, H, E), seed=1), make((B, S, H, E), seed=2)
    out = sdpa_matches_cpu(q, k, v, view=heads, is_causal=False)
    assert out.transpose(1, 2).is_contiguous()
    sdpa_matches_cpu(q, k, v, view=heads, attn_mask=bool_mask((B, 1, L, S)))


def like_meta(t):
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


@pytest.mark.parametrize("layout", ["contiguous", "transposed_heads", "split_qkv"])
def test_result_layouts_are_the_meta_functions(layout):
    # torch.compile's graphs view the results by the layout the meta functions
    # give (empty_like of the inputs), so eager results must have it too.
    if layout == "contiguous":
        q, k, v = (make((B, H, L, E)).to("tpu"), make((B, H, S, E), seed=1).to("tpu"),
                   make((B, H, S, 6), seed=2).to("tpu"))
    elif layout == "transposed_heads":
        q, k, v = (make((B, L, H, E)).to("tpu").transpose(1, 2),
                   make((B, S, H, E), seed=1).to("tpu").transpose(1, 2),
                   make((B, S, H, E), seed=2).to("tpu").transpose(1, 2))
    else:  # GPT-2: one projection split in three, heads transposed (not dense)
        qkv = make((B, S, 3 * H * E)).to("tpu")
        q, k, v = (t.reshape(B, S, H, E).transpose(1, 2) for t in qkv.split(H * E, -1))
    mask = make((B, H, q.shape[2], S), seed=3).to("tpu")
    fwd = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    bwd = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward
    with no_fallback():
        got = fwd(q, k, v, mask)
    want = fwd(*map(like_meta, (q, k, v, mask)))
    for g, w in zip(got[:2], want[:2]):
        assert (g.shape, g.stride()) == (w.shape, w.stride())
    args = (got[0], q, k, v, mask, [True] * 4, got[0], got[1], None, None, got[4], got[5], 0.0,
            False, got[6], got[7])
    with no_fallback():
        grads = bwd(*args)
    meta = [like_meta(a) if isinstance(a, torch.Tensor) else a for a in args]
    for g, w in zip(grads, bwd(*meta)):
        assert (g.shape, g.stride()) == (w.shape, w.stride())


def test_one_program_per_call_forward_and_backward():
    if TEST_MODE != "strict":
        pytest.skip("counts programs run; fused mode runs whole graphs")
    q, k, v = (make((B, H, L, E)).to("tpu").requires_grad_(),
               make((B, H, S, E), seed=1).to("tpu").requires_grad_(),
               make((B, H, S, E), seed=2).to("tpu").requires_grad_())
    mask = make((L, S), seed=3).to("tpu")
    dy = make((B, H, L, E), seed=4).to("tpu")
    assert torch._fused_sdp_choice(q, k, v) == OVERRIDEABLE
    for kw in ({}, {"attn_mask": mask}, {"is_causal": True}):
        torchtpu.sync()
        with no_fallback():
            # (a program compiling in the background runs at the sync)
            before = torchtpu.metrics.metrics()["executes"]
            out = F.scaled_dot_product_attention(q, k, v, **kw)
            torchtpu.sync()
            assert torchtpu.metrics.metrics()["executes"] - before == 1
            assert out.grad_fn.name() == "ScaledDotProductFusedAttentionOverrideableBackward0"
            before = torchtpu.metrics.metrics()["executes"]
            torch.autograd.grad(out, (q, k, v), dy)
            torchtpu.sync()
            assert torchtpu.metrics.metrics()["executes"] - before == 1


class AtenOps(TorchDispatchMode):
    """The ATen ops called inside the block (below autograd and composites)."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.__name__)
        return func(*args, **(kwargs or {}))


def test_only_the_overrideable_ops_run_in_every_mode():
    q, k, v = (make((B, H, L, E)).to("tpu").requires_grad_(),
               make((B, H, S, E), seed=1).to("tpu").requires_grad_(),
               make((B, H, S, E), seed=2).to("tpu").requires_grad_())
    with no_fallback(), AtenOps() as ops:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=make((L, S), seed=3).to("tpu"))
        torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
        torchtpu.sync()
    sdpa = [n for n in ops.names if "attention" in n or "softmax" in n or "bmm" in n]
    assert sdpa == ["_scaled_dot_product_fused_attention_overrideable.default",
                    "_scaled_dot_product_fused_attention_overrideable_backward.default"], ops.names


def test_calls_the_lowering_does_not_cover_run_the_math_path():
    q, k, v = make((B, 4, L, E)), make((B, 2, S, E), seed=1), make((B, 2, S, E), seed=2)
    tq, tk, tv = q.to("tpu"), k.to("tpu"), v.to("tpu")
    assert torch._fused_sdp_choice(tq, tk, tv, enable_gqa=True) == MATH
    assert torch._fused_sdp_choice(tq, tq, tq, dropout_p=0.1) == MATH
    sdpa_matches_cpu(q, k, v, enable_gqa=True)
    # Batch dims that broadcast (the math path's matmul broadcasts them).
    sdpa_matches_cpu(q[:, :2], k[:1], v[:1])
    # Dropout: the math path, drawing on tpu (shape and no fallback only).
    with no_fallback():
        out = F.scaled_dot_product_attention(tq, tq, tq, dropout_p=0.5)
    assert out.shape == q.shape
    # sdpa_kernel(MATH) keeps the math path on tpu too, with the same result.
    with no_fallback():
        with sdpa_kernel([SDPBackend.MATH]):
            assert torch._fused_sdp_choice(tq, tq, tq) == MATH
            math = F.scaled_dot_product_attention(tq, tq, tq, is_causal=True)
        fused = F.scaled_dot_product_attention(tq, tq, tq, is_causal=True)
    torch.testing.assert_close(fused.cpu(), math.cpu())


def test_errors_match_cpu():
    q = make((B, H, L, E))
    mask = torch.ones(L, L, dtype=torch.bool)
    # 3-D: CPU's math path refuses is_causal with a mask; so does tpu's.
    same_error(lambda a, m: F.scaled_dot_product_attention(a, a, a, attn_mask=m,
                                                           is_causal=True), q[0], mask)
    same_error(lambda a, b: F.scaled_dot_product_attention(a, b, b), q, make((B, H, S, 5)))
    t = q.to("tpu")
    with pytest.raises(RuntimeError, match="expected tpu query, key and value"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(t[0, 0], t[0, 0], t[0, 0])
    with pytest.raises(NotImplementedError, match="dropout_p"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(t, t, t, dropout_p=0.2)


def test_torch_compile_forward_and_backward():
    # AOTAutograd traces the overrideable op and its backward (meta functions)
    # and the tpu backend runs them through the same kernels.
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).sin()

    def run(fn, device):
        xs = [make((B, H, L, E), seed=i).to(device).requires_grad_() for i in range(3)]
        out = fn(*xs)
        out.sum().backward()
        return [out.detach()] + [x.grad for x in xs]

    want = run(f, "cpu")
    torch._dynamo.reset()
    try:
        with no_fallback():
            got = run(torch.compile(f, backend="tpu"), "tpu")
        assert_close_cpu(got, want)
    finally:
        torch._dynamo.reset()


def test_torch_compile_over_a_growing_key_length():
    # The third length recompiles with the key length dynamic (Dynamo's
    # automatic dynamic shapes): the backend choice then runs on fake tensors
    # with symbolic sizes, where it once raised "Cannot call numel() on tensor
    # with symbolic sizes/strides".
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v) * 2

    compiled = torch.compile(f, backend="tpu")
    q = make((1, 2, 1, 8), seed=0)
    torch._dynamo.reset()
    try:
        with no_fallback():
            for length in (5, 6, 7, 9):
                k, v = make((1, 2, length, 8), seed=1), make((1, 2, length, 8), seed=2)
                got = compiled(q.to("tpu"), k.to("tpu"), v.to("tpu"))
                assert_close_cpu(got, f(q, k, v))
    finally:
        torch._dynamo.reset()

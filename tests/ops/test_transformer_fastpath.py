"""The inference fast paths PyTorch takes for a PrivateUse1 device run natively on
tpu: nn.TransformerEncoder in eval mode (with a padding mask: its nested-tensor
path, _nested_tensor_from_mask -> _transformer_encoder_layer_fwd on nested
values -> to_padded_tensor), TransformerEncoderLayer's
_transformer_encoder_layer_fwd, MultiheadAttention's _native_multi_head_attention
and _masked_softmax. Each equals CPU (which takes the same fast path) with no
CPU fallback, and bad input raises what CPU raises."""

import copy

import pytest
import torch
from torch import nn

from _util import assert_close_cpu, no_fallback, same_error

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

D, HEADS, FF = 16, 4, 32


@pytest.fixture
def calls(monkeypatch):
    """Counts the fast-path entry points the nn modules call, proving the fast
    path (not the slow composite one) ran."""
    seen = {}
    for name in ("_transformer_encoder_layer_fwd", "_native_multi_head_attention",
                 "_nested_tensor_from_mask"):
        fn = getattr(torch, name)

        def counted(*args, _fn=fn, _name=name, **kwargs):
            seen[_name] = seen.get(_name, 0) + 1
            return _fn(*args, **kwargs)

        monkeypatch.setattr(torch, name, counted)
    return seen


def padding_mask():
    # batch of 3: lengths 5, 3, 4 (True = padding, left-aligned as the nested path needs)
    lengths = torch.tensor([5, 3, 4])
    return torch.arange(5)[None, :] >= lengths[:, None]


def encoder(nested, norm_first=False, activation="relu", batch_first=True, layers=2):
    layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, activation=activation,
                                       batch_first=batch_first, norm_first=norm_first)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=nested).eval()


def run_pair(cpu_module, *args, **kwargs):
    tpu_module = copy.deepcopy(cpu_module).to("tpu")
    with torch.no_grad():
        expected = cpu_module(*args, **kwargs)
        moved = {}  # one tpu copy per CPU tensor: self-attention passes query is key

        def to_tpu(a):
            if not isinstance(a, torch.Tensor):
                return a
            return moved.setdefault(id(a), a.to("tpu"))

        tpu_args = [to_tpu(a) for a in args]
        tpu_kwargs = {k: to_tpu(v) for k, v in kwargs.items()}
        with no_fallback():
            actual = tpu_module(*tpu_args, **tpu_kwargs)
            if isinstance(actual, tuple):
                actual = tuple(a.cpu() if a is not None else None for a in actual)
            else:
                actual = actual.cpu()
    return actual, expected


@pytest.mark.parametrize("nested", [True, False], ids=["nested", "dense"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_with_padding_mask(calls, nested, norm_first, activation):
    torch.manual_seed(0)
    model = encoder(nested, norm_first, activation)
    x = torch.randn(3, 5, D)
    actual, expected = run_pair(model, x, src_key_padding_mask=padding_mask())
    # CPU zeroes padded rows on the nested path; both paths agree on the real rows.
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    assert calls.get("_transformer_encoder_layer_fwd") == 4  # 2 layers, CPU and tpu
    # TransformerEncoder turns the nested path off for norm_first layers.
    nested_path = nested and not norm_first
    assert calls.get("_nested_tensor_from_mask", 0) == (2 if nested_path else 0)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_encoder_without_mask(calls, norm_first):
    torch.manual_seed(0)
    model = encoder(True, norm_first, "gelu")
    actual, expected = run_pair(model, torch.randn(2, 6, D))
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    assert calls.get("_transformer_encoder_layer_fwd") == 4


def test_encoder_with_causal_and_padding_mask(calls):
    # Both masks: the dense fast path with a merged [B, H, L, L] mask (mask_type 2).
    torch.manual_seed(0)
    model = encoder(False)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    actual, expected = run_pair(model, torch.randn(3, 5, D), mask=causal,
                                src_key_padding_mask=padding_mask())
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    assert calls.get("_transformer_encoder_layer_fwd") == 4


def test_encoder_not_batch_first_takes_slow_path_natively(calls):
    torch.manual_seed(0)
    model = encoder(False, batch_first=False)
    actual, expected = run_pair(model, torch.randn(5, 3, D),
                                src_key_padding_mask=padding_mask())
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    assert "_transformer_encoder_layer_fwd" not in calls


def test_encoder_layer_bf16():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, HEADS, FF, batch_first=True).eval().bfloat16()
    x = torch.randn(2, 5, D, dtype=torch.bfloat16)
    actual, expected = run_pair(layer, x, src_key_padding_mask=padding_mask()[:2])
    assert actual.dtype == torch.bfloat16
    torch.testing.assert_close(actual, expected, rtol=2e-2, atol=2e-2)


def mha():
    return nn.MultiheadAttention(D, HEADS, batch_first=True).eval()


# average_attn_weights only matters with need_weights.
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("masks", ["none", "key_padding", "attn", "both", "attn3d"])
def test_multihead_attention(calls, need_weights, average, masks):
    torch.manual_seed(0)
    module = mha()
    x = torch.randn(3, 5, D)
    kwargs = {"need_weights": need_weights, "average_attn_weights": average}
    if masks in ("key_padding", "both"):
        kwargs["key_padding_mask"] = padding_mask()
    if masks in ("attn", "both"):
        kwargs["attn_mask"] = torch.rand(5, 5) > 0.7
    if masks == "attn3d":
        kwargs["attn_mask"] = torch.rand(3 * HEADS, 5, 5) > 0.7
    actual, expected = run_pair(module, x, x, x, **kwargs)
    # Rows whose every key is masked are NaN on CPU and here alike.
    torch.testing.assert_close(actual[0], expected[0], rtol=1e-4, atol=1e-5, equal_nan=True)
    if need_weights:
        torch.testing.assert_close(actual[1], expected[1], rtol=1e-4, atol=1e-5, equal_nan=True)
    else:
        assert actual[1] is None and expected[1] is None
    assert calls.get("_native_multi_head_attention") == 2


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_nested_query(calls, need_weights):
    torch.manual_seed(0)
    module = mha()
    parts = [torch.randn(n, D) for n in (4, 2, 5)]
    cpu_q = torch.nested.nested_tensor(parts)
    tpu_module = copy.deepcopy(module).to("tpu")
    with torch.no_grad():
        expected, expected_w = module(cpu_q, cpu_q, cpu_q, need_weights=need_weights)
        tpu_q = cpu_q.to("tpu")
        with no_fallback():
            out, weights = tpu_module(tpu_q, tpu_q, tpu_q, need_weights=need_weights)
            padded = out.to_padded_tensor(0.0)
    if need_weights:
        assert_close_cpu(weights, expected_w, rtol=1e-4, atol=1e-5)
    assert out.is_nested and out.device.type == "tpu"
    torch.testing.assert_close(padded.cpu(), expected.to_padded_tensor(0.0), rtol=1e-4, atol=1e-5)
    for a, e in zip(out.cpu().unbind(), expected.unbind()):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


def test_nested_from_mask_and_back():
    torch.manual_seed(0)
    x = torch.randn(3, 5, D)
    keep = padding_mask().logical_not()
    expected = torch._nested_tensor_from_mask(x, keep)
    with no_fallback():
        nt = torch._nested_tensor_from_mask(x.to("tpu"), keep.to("tpu"))
        assert torch._nested_tensor_from_mask_left_aligned(x.to("tpu"), keep.to("tpu"))
        padded = nt.to_padded_tensor(-1.0)
        bigger = nt.to_padded_tensor(0.5, (4, 6, D + 2))
    assert nt.is_nested and nt.device.type == "tpu"
    assert_close_cpu(padded, expected.to_padded_tensor(-1.0))
    assert_close_cpu(bigger, expected.to_padded_tensor(0.5, (4, 6, D + 2)))
    back = nt.cpu()
    assert back.is_nested
    for a, e in zip(back.unbind(), expected.unbind()):
        assert torch.equal(a, e)
    with pytest.raises(RuntimeError, match="Truncation is not supported"):
        nt.to_padded_tensor(0.0, (3, 2, D))


def test_masked_softmax_types():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 4)
    cases = [
        (torch.rand(4, 4) > 0.6, 0, 3),
        (torch.rand(2, 4) > 0.6, 1, 3),
        (torch.rand(2, 3, 4, 4) > 0.6, 2, 3),
        (torch.rand(2, 4) > 0.6, 1, 1),  # another dim: the mask broadcasts as CPU expands it
        (torch.tensor([[True] * 4, [False] * 4]), 1, 3),  # fully masked rows: NaN
    ]
    for mask, mask_type, dim in cases:
        expected = torch._masked_softmax(x, mask, dim, mask_type)
        with no_fallback():
            actual = torch._masked_softmax(x.to("tpu"), mask.to("tpu"), dim, mask_type)
        assert_close_cpu(actual, expected, rtol=1e-5, atol=1e-6)


def _mha_args(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 8, generator=g).to(dtype)
    return [x, x, x, 8, 2, torch.randn(24, 8, generator=g).to(dtype),
            torch.randn(24, generator=g).to(dtype), torch.randn(8, 8, generator=g).to(dtype),
            torch.randn(8, generator=g).to(dtype)]


def _call_mha(*args):
    x = args[0]
    # self-attention: key and value are the query tensor itself, on either device
    return torch._native_multi_head_attention(x, x, x, *args[3:])


@pytest.mark.parametrize("change", [
    {4: 3},                                   # heads do not divide embed_dim
    {3: 9},                                   # embed_dim is not the query's
    {5: torch.randn(20, 8)},                  # qkv_weight rows
    {6: torch.randn(5)},                      # qkv_bias
    {7: torch.randn(3, 8)},                   # proj_weight vs proj_bias
    {9: torch.zeros(3, 3, dtype=torch.bool), 12: 1},   # key padding mask shape
    {9: torch.zeros(2, 3, dtype=torch.bool), 12: None},  # 2-D mask without a type
    {9: torch.zeros(2, 1, 3, 3, dtype=torch.bool), 12: 2},
], ids=["heads", "embed_dim", "qkv_weight", "qkv_bias", "proj", "mask1", "mask_type", "mask2"])
def test_native_mha_bad_input_raises_as_cpu(change):
    args = _mha_args() + [None, False, True, None]
    for i, v in change.items():
        args[i] = v
    same_error(_call_mha, *args)


def test_native_mha_integer_input_raises_as_cpu():
    same_error(_call_mha, *(_mha_args(torch.int64) + [None, False, True, None]))


def test_nested_encoder_layer_with_mask_raises_as_cpu():
    layer = nn.TransformerEncoderLayer(D, HEADS, FF, batch_first=True).eval()
    nt = torch.nested.nested_tensor([torch.randn(3, D), torch.randn(2, D)])
    sa = layer.self_attn
    args = (D, HEADS, sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
            False, False, 1e-5, layer.norm1.weight, layer.norm1.bias, layer.norm2.weight,
            layer.norm2.bias, layer.linear1.weight, layer.linear1.bias, layer.linear2.weight,
            layer.linear2.bias, torch.zeros(2, 3, dtype=torch.bool), 1)

    def call(src, *rest):
        with torch.no_grad():
            return torch._transformer_encoder_layer_fwd(src, *rest)

    same_error(call, nt, *args)


def _layer_args(layer):
    sa = layer.self_attn
    return [D, HEADS, sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
            False, False, 1e-5, layer.norm1.weight, layer.norm1.bias, layer.norm2.weight,
            layer.norm2.bias, layer.linear1.weight, layer.linear1.bias, layer.linear2.weight,
            layer.linear2.bias, None, None]


def _call_layer(src, *rest):
    with torch.no_grad():
        return torch._transformer_encoder_layer_fwd(src, *rest)


@pytest.mark.parametrize("change", [
    {13: torch.randn(FF, 3)},       # linear1 weight does not take embed_dim inputs
    {13: torch.randn(FF)},          # linear1 weight not 2-D
    {14: torch.randn(3)},           # linear1 bias
    {9: torch.randn(3)},            # norm1 weight
    {1: 3},                         # heads do not divide embed_dim
    {15: torch.randn(3, FF)},       # linear2 weight vs its bias
], ids=["w1_shape", "w1_dim", "b1", "norm1", "heads", "w2"])
def test_encoder_layer_bad_input_raises_as_cpu(change):
    layer = nn.TransformerEncoderLayer(D, HEADS, FF, batch_first=True).eval()
    args = [t.detach() if isinstance(t, torch.Tensor) else t for t in _layer_args(layer)]
    for i, v in change.items():
        args[i] = v
    same_error(_call_layer, torch.randn(2, 3, D), *args)


def test_empty_sequences_match_cpu():
    layer = nn.TransformerEncoderLayer(D, HEADS, FF, batch_first=True).eval()
    args = [t.detach() if isinstance(t, torch.Tensor) else t for t in _layer_args(layer)]
    x = torch.randn(2, 0, D)
    expected = _call_layer(x, *args)
    with no_fallback():
        actual = _call_layer(x.to("tpu"), *[a.to("tpu") if isinstance(a, torch.Tensor) else a
                                            for a in args])
    assert_close_cpu(actual, expected)
    mha_args = _mha_args()
    out, weights = torch._native_multi_head_attention(
        x[..., :8].to("tpu"), x[..., :8].to("tpu"), x[..., :8].to("tpu"),
        *[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in mha_args[3:]])
    assert out.shape == (2, 0, 8) and out.device.type == "tpu" and weights is None


def test_mask_with_gaps(calls):
    # A padding mask that is not left-aligned: the mask check says so, the
    # constructor with mask_check raises as on CPU, and TransformerEncoder
    # takes its dense path (still the fused layer) with CPU's result.
    torch.manual_seed(0)
    x = torch.randn(2, 4, D)
    pad = torch.tensor([[False, True, False, False], [False, False, False, True]])
    keep = pad.logical_not()
    with no_fallback():
        assert not torch._nested_tensor_from_mask_left_aligned(x.to("tpu"), keep.to("tpu"))
    same_error(torch._nested_tensor_from_mask, x, keep)
    same_error(torch._nested_tensor_from_mask, x, keep.float())  # not a bool mask
    calls.clear()
    actual, expected = run_pair(encoder(True), x, src_key_padding_mask=pad)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    assert calls.get("_transformer_encoder_layer_fwd") == 4
    assert "_nested_tensor_from_mask" not in calls


def test_nested_elementwise_math():
    # ATen's buffer-mapped nested kernels, registered for tpu: results per
    # component equal CPU's.
    torch.manual_seed(0)
    a = torch.nested.nested_tensor([torch.randn(3, 4), torch.randn(2, 4)])
    b = torch.nested.nested_tensor([torch.randn(3, 4), torch.randn(2, 4)])
    fns = [lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x / y,
           lambda x, y: x * 2.5, lambda x, y: torch.relu(x), lambda x, y: nn.functional.gelu(x),
           lambda x, y: torch.tanh(x).neg().abs(), lambda x, y: nn.functional.silu(x),
           lambda x, y: torch.sin(x) + torch.cos(y), lambda x, y: x.clone().mul_(y).add_(x)]
    ta, tb = a.to("tpu"), b.to("tpu")
    for fn in fns:
        expected = fn(a, b)
        with no_fallback():
            actual = fn(ta, tb)
        assert actual.is_nested and actual.device.type == "tpu"
        for x, y in zip(actual.cpu().unbind(), expected.unbind()):
            torch.testing.assert_close(x, y)

"""``torch.nn.attention.flex_attention`` on tpu tensors, eager and compiled.

    import torchtpu.integrations.flex_attention
    torchtpu.integrations.flex_attention.enable()   # once per process
    out = flex_attention(q, k, v, score_mod=..., block_mask=create_block_mask(..., device="tpu"))

Two things in PyTorch 2.13 stop tpu tensors, both fixed here by
:func:`enable`, neither by editing torch:

1. ``flex_attention`` starts with ``_validate_device(query, key, value)``
   (``torch/nn/attention/flex_attention.py``), which raises ``ValueError:
   FlexAttention is only supported on CUDA, CPU, HPU, or MPS devices`` for any
   device type outside ``{"cuda", "cpu", "xpu", "hpu", "mps"}``. Nothing after
   it needs those devices: eager ``flex_attention`` runs the higher-order op
   ``torch.ops.higher_order.flex_attention`` through Dynamo's ``"eager"``
   backend, and that op's ``CompositeExplicitAutograd`` kernel (the dense
   "math" path, ``sdpa_dense`` / ``math_attention`` in
   ``torch/_higher_order_ops/flex_attention.py``) is plain ATen: it builds the
   [B, H, L, S] score matrix, applies ``score_mod`` and the block mask's
   ``mask_mod`` through ``torch.vmap``, and softmaxes; its backward
   (``flex_attention_backward``'s dense kernel) is plain ATen too. Under
   ``torch.compile(backend="tpu")`` the op stays one node of AOTAutograd's
   graph, and our backend runs that node's dense kernel inside the graph's one
   XLA program. :func:`enable` puts a module-level ``_validate_device`` in
   place that returns for tpu tensors and calls PyTorch's for every other
   device (``flex_attention`` looks the name up at each call, and Dynamo traces
   the replacement the same way).
2. The op has autocast kernels for ``AutocastCPU`` and ``AutocastCUDA`` only,
   and ``AutocastPrivateUse1`` is not among a higher-order op's default
   fallthrough keys (``torch/_ops.py``), so under ``torch.autocast("tpu")`` it
   raises ``NotImplementedError: could not find kernel ... AutocastPrivateUse1``.
   :func:`enable` registers PyTorch's own cast-then-redispatch shim for that
   key (q, k, v to the autocast dtype, as on CUDA) and lets the backward op
   fall through it, as the CPU and CUDA keys do.
"""

import torch
import torch.nn.attention.flex_attention as _flex
from torch._C import DispatchKey, DispatchKeySet
from torch._higher_order_ops.flex_attention import flex_attention as _flex_hop
from torch._higher_order_ops.flex_attention import flex_attention_backward as _flex_backward_hop
from torch.amp.autocast_mode import _cast as _autocast_cast

__all__ = ["enable"]

# PyTorch's check, taken at import (before enable() replaced it).
_torch_validate_device = _flex._validate_device


def _validate_device(query, key, value):
    """PyTorch's ``_validate_device`` less its device list for tpu tensors.

    q, k and v are on one device when this runs (``_validate_sdpa_input``
    comes first); tpu supports backward, so the CPU/MPS backward refusal does
    not apply either.
    """
    if query.device.type == "tpu":
        return
    _torch_validate_device(query, key, value)


def _flex_attention_autocast_tpu(query, key, value, score_mod, block_mask, scale,
                                 kernel_options, score_mod_other_buffers=(),
                                 mask_mod_other_buffers=()):
    """The op under ``torch.autocast("tpu")``: PyTorch's CUDA/CPU shim for our key.

    Casts q, k, v ([B, H, L, E] / [B, Hkv, S, E|Ev]) to the autocast dtype
    (bfloat16 unless set otherwise), then runs the op with the autocast key
    excluded. Returns (out, logsumexp, max_scores) as the op does.
    """
    dtype = torch.get_autocast_dtype("tpu")
    query, key, value = (_autocast_cast(t, "tpu", dtype) for t in (query, key, value))
    with torch._C._ExcludeDispatchKeyGuard(DispatchKeySet(DispatchKey.AutocastPrivateUse1)):
        return _flex_hop(query, key, value, score_mod, block_mask, scale, kernel_options,
                         score_mod_other_buffers, mask_mod_other_buffers)


def enable():
    """Lets ``flex_attention`` take tpu tensors (eager, compiled, under autocast).

    Idempotent; changes nothing for other devices. An autocast kernel PyTorch
    itself registered for ``AutocastPrivateUse1`` is kept.
    """
    _flex._validate_device = _validate_device
    if DispatchKey.AutocastPrivateUse1 not in _flex_hop.py_kernels:
        _flex_hop.py_impl(DispatchKey.AutocastPrivateUse1)(_flex_attention_autocast_tpu)
    _flex_backward_hop.fallthrough(DispatchKey.AutocastPrivateUse1)

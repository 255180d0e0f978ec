"""torch.utils.checkpoint over dropout inside torch.compile(backend="tpu"):
PyTorch's rng_prims device table refuses tpu (torchtpu.integrations.checkpoint
answers it), and the workaround that needs nothing, checkpoint around a
compiled block (docs/device-seams.md). Gradients are compared with the same
compiled code without checkpointing."""

import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from _util import (bert_grads_without_and_with_gradient_checkpointing,
                   grads_without_and_with_checkpoint, max_diff)


def _dropout_block():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Dropout(0.3),
                         nn.Linear(32, 16)).to("tpu")


def test_torch_rng_prims_still_refuse_tpu():
    """PyTorch's device table for run_and_save_rng_state (torch/_prims/
    rng_prims.py, what compiled checkpointing wraps dropout in) has cuda/cpu/
    hpu/xpu only. This fails the day PyTorch answers tpu itself; then
    torchtpu.integrations.checkpoint can go."""
    from torchtpu.integrations import checkpoint as compiled_checkpoint

    x = torch.ones(4, device="tpu")
    with pytest.raises(AssertionError, match="Backend not supported for tpu"):
        compiled_checkpoint._torch_backend_select(torch.ops.aten.native_dropout.default,
                                                  x, 0.5, True)


def _compiled_grads(fn, params, x, steps=2):
    compiled = torch.compile(fn, backend="tpu" if x.device.type == "tpu" else "aot_eager")
    torch.manual_seed(123)
    torch.tpu.manual_seed(123)
    grads = []
    for _ in range(steps):
        for p in params:
            p.grad = None
        compiled(x).square().sum().backward()
        grads.append([p.grad.cpu().clone() for p in params])
    return grads


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_compiled_checkpoint_with_dropout_equals_compiled(use_reentrant):
    """torch.compile(backend="tpu") of a function calling checkpoint over
    dropout raised "Backend not supported for tpu"; after
    torchtpu.integrations.checkpoint.enable() its gradients equal the compiled
    function's without checkpointing, bit for bit, step after step (each step
    new masks). CPU's compiled checkpointing is unchanged."""
    from torchtpu.integrations import checkpoint as compiled_checkpoint

    compiled_checkpoint.enable()
    compiled_checkpoint.enable()  # idempotent
    for device in ("tpu", "cpu"):
        block = _dropout_block().to(device)
        params = list(block.parameters())
        x = torch.randn(8, 16).to(device).requires_grad_()
        plain = _compiled_grads(block, params, x)
        checkpointed = _compiled_grads(
            lambda t: checkpoint(block, t, use_reentrant=use_reentrant), params, x)
        for step in range(2):
            assert max_diff(plain[step], checkpointed[step]) == 0, (device, step)
        assert max_diff(plain[0], plain[1]) > 0  # the masks change between steps


@pytest.mark.filterwarnings("ignore:.*is deprecated:FutureWarning")  # transformers 5 renames
def test_compiled_hf_bert_gradient_checkpointing_same_grads():
    """transformers' gradient_checkpointing_enable() under
    torch.compile(model, backend="tpu"), dropout 0.1: the gradients of the
    compiled model without checkpointing, up to the float32 rounding of
    differently cut graphs (measured 1.3e-6 on gradients up to 111; with
    dropout 0, 3.3e-5). Different masks would differ by ~1e-3 (the eager
    case before torch.tpu._initialized existed: 1.7e-3)."""
    pytest.importorskip("transformers")
    grads = bert_grads_without_and_with_gradient_checkpointing(
        lambda model: torch.compile(model, backend="tpu"))
    scale = max(g.abs().max().item() for g in grads[0])
    assert max_diff(*grads) < 1e-6 * scale, (max_diff(*grads), scale)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_around_compiled_block_equals_uncheckpointed(use_reentrant):
    """checkpoint(torch.compile(block, backend="tpu"), x), which needs no
    enable(): the recompute replays the compiled dropout's mask (eager
    checkpoint stashes the tpu RNG state), so the gradients equal the compiled
    block's without checkpointing, bit for bit."""
    block = _dropout_block()
    compiled = torch.compile(block, backend="tpu")
    x = torch.randn(8, 16).to("tpu").requires_grad_()
    assert max_diff(*grads_without_and_with_checkpoint(block, compiled, x, use_reentrant)) == 0

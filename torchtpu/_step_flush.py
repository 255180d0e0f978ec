"""Fused mode's step boundary: the end of ``optimizer.step()`` flushes.

A training loop that reads no value each step (no ``loss.item()``) gives fused
mode no place to end a step's graph but ``TORCHTPU_FUSION_MAX_NODES``, which
cuts steps at arbitrary ops. A global optimizer step post-hook
(``torch.optim.optimizer.register_optimizer_step_post_hook``) ends the pending
graph there instead: the step is enqueued as one program and the call returns
without waiting, so the next step's forward and backward are recorded while
this one runs (PyTorch/XLA users call ``mark_step`` for this). Loops that do
read a value each step get the same graphs as before. Off with
``torchtpu.config.fused_flush_at_optimizer_step = False``.
"""

from torch.optim.optimizer import register_optimizer_step_post_hook

from torchtpu import _C, config


def _flush_after_step(optimizer, args, kwargs):
    if not config.fused_flush_at_optimizer_step or _C._get_eager_mode() != "fused":
        return
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.device.type == "tpu":
                _C._flush()
                return


register_optimizer_step_post_hook(_flush_after_step)

"""Fused mode's step boundary: the end of ``optimizer.step()`` flushes.

A training loop that reads no value each step (no ``loss.item()``) gives fused
mode no place to end a step's graph but ``TORCHTPU_FUSION_MAX_NODES``, which
cuts steps at arbitrary ops. A global optimizer step post-hook
(``torch.optim.optimizer.register_optimizer_step_post_hook``) ends the pending
graph of the optimizer's tpu devices there instead: the step is enqueued as
one program and the call returns without waiting, so the next step's forward
and backward are recorded while this one runs (PyTorch/XLA users call
``mark_step`` for this). When a value was read since the previous step's end
(``loss.item()`` before ``step()``, ``GradScaler``'s inf check), that read
already ended a graph: the hook then leaves the update to join the next
step's graph, as without it. Off with
``torchtpu.config.fused_flush_at_optimizer_step = False``. Processes with no
tpu parameters never reach torchtpu's runtime here.
"""

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from torchtpu import _C, config

# reads that flushed a fused graph, at this hook's last call (None: never ran)
_reads_at_last = None


def _tpu_devices(optimizer):
    devices = set()
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.device.type == "tpu":
                devices.add(p.device.index or 0)
    return devices


def _flush_after_step(optimizer, args, kwargs):
    global _reads_at_last
    if not config.fused_flush_at_optimizer_step or torch.compiler.is_compiling():
        return
    devices = _tpu_devices(optimizer)  # before any runtime call: CPU-only users
    if not devices or not _C._is_initialized() or _C._get_eager_mode() != "fused":
        return
    # A read since the last step's end (not a cut at the node limit, which
    # would move the boundary from step to step) already ended this step's
    # graph: leave the update to join the next one, as without the hook.
    reads = _C._fused_read_flushes()
    read_since_last, _reads_at_last = _reads_at_last is not None and reads != _reads_at_last, reads
    if read_since_last:
        return
    for d in sorted(devices):
        _C._flush(d)


register_optimizer_step_post_hook(_flush_after_step)

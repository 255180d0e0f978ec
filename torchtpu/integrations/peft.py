"""peft on tpu: the LoRA-FA optimizer's autocast (applied by default as peft is
imported, torchtpu/integrations/_library_fixes.py; ``enable()`` by hand).

peft/optimizers/lorafa.py computes its projected gradient under
``autocast(device_type=infer_device(), dtype=torch.bfloat16)``. ``infer_device()``
names CUDA, MPS, MLU, XPU or NPU when present, else "cpu": on a CUDA host the
matmul runs in bfloat16 on the GPU, on CPU in bfloat16 too, and on tpu the
"cpu" autocast does nothing, so it ran in float32, silently another result
(9.2e-5 in lora_B after 3 steps of a tiny Llama). The fix gives lorafa an
``autocast`` that, asked for "cpu" while tpu is the current accelerator, also
autocasts on tpu with the same dtype: CPU parameters are treated as before,
tpu parameters as CUDA's are. ``peft.utils.infer_device`` itself is left
alone (answering "tpu" would send adapter loading to safetensors' refusal of
the device).
"""

import contextlib
import sys

import torch

__all__ = ["enable"]

_LORAFA = "peft.optimizers.lorafa"


def _tpu_is_the_accelerator():
    accelerator = torch.accelerator.current_accelerator()
    return accelerator is not None and accelerator.type == "tpu"


def _with_tpu(original):
    @contextlib.contextmanager
    def autocast(device_type, dtype=None, enabled=True, cache_enabled=None):
        with original(device_type=device_type, dtype=dtype, enabled=enabled,
                      cache_enabled=cache_enabled):
            if device_type != "cpu" or not _tpu_is_the_accelerator():
                yield
                return
            with original(device_type="tpu", dtype=dtype, enabled=enabled,
                          cache_enabled=cache_enabled):
                yield

    autocast._torchtpu_original = original
    return autocast


def _fix_lorafa(module):
    if not hasattr(module.autocast, "_torchtpu_original"):
        module.autocast = _with_tpu(module.autocast)


def _enable_loaded():
    if _LORAFA in sys.modules:
        _fix_lorafa(sys.modules[_LORAFA])


def enable():
    """Applies the fix now (imports peft's LoRA-FA module). Idempotent.
    Raises ImportError if peft is not installed."""
    import importlib

    _fix_lorafa(importlib.import_module(_LORAFA))

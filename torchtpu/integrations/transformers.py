"""transformers on tpu: two places where transformers 5.x decides by device
type and takes, for torchtpu's "tpu", a path CUDA would not take, and (through
:mod:`torchtpu.integrations.accelerate`) the two where accelerate, which the
Trainer and ``device_map="auto"`` go through, does.

Usage, once, before loading models (``import transformers`` alone is fine)::

    import torchtpu.integrations.transformers as tpu_transformers
    tpu_transformers.enable()

What ``enable()`` changes (no transformers file is edited; docs/device-seams.md,
section "Libraries", has the call sites, and tests/test_seams_transformers.py
tests that turn red the day transformers changes them):

1. ``attn_implementation="flex_attention"``. transformers reads device "tpu" as
   Google's torch_tpu (the other PrivateUse1 backend of that name), whose
   tensors PyTorch's flex_attention refuses, so ``is_torch_flex_attn_available()``
   (utils/import_utils.py) answers False whenever the current accelerator is
   "tpu". With torchtpu installed it always is, so every model asked for flex
   attention, CPU models included, raised ``ImportError: PyTorch Flex Attention
   is not supported on TPU.`` torchtpu's flex_attention takes tpu tensors
   (torchtpu/integrations/flex_attention.py); ``enable()`` answers True (as for
   CPU and CUDA) and gives the modules that read the answer at import time
   (masking_utils, integrations.flex_attention) the flex names they skipped. A
   model module that read it at import (models/doge) and was imported before
   ``enable()`` keeps the old answer.
2. ``pipeline(...)`` devices (pipelines/base.py:839-893, ``Pipeline.__init__``). With no
   ``device`` it uses index 0, and an index means "cuda:N" (or mlu, npu, xpu,
   mps, ...), else CPU; the model is then moved there. So ``pipeline(task,
   model=model_on_tpu)`` moved the model back to CPU and ran there, and
   ``device=0`` meant CPU, where on a CUDA host both mean cuda:0. After
   ``enable()`` an index (given, or the default 0) is a tpu index whenever tpu
   is the current accelerator; ``device="cpu"``/``-1``/``"tpu:N"`` and
   ``torch.device`` values are left as they are. For a model loaded with a
   ``device_map`` (not moved by the pipeline) an int first entry of the map
   means that tpu too.
3. With accelerate installed, ``torchtpu.integrations.accelerate.enable()``:
   accelerate's default device is tpu (so a ``Trainer`` needs no
   ``ACCELERATE_TORCH_DEVICE``, and ``use_cpu=True`` still means CPU) and
   ``device_map="auto"`` fills tpu before CPU.

Idempotent. Raises ImportError if transformers is not installed.
"""

import functools
import sys

import torch
import transformers  # noqa: F401  (ImportError here names the missing package)
import transformers.pipelines.base as _pipelines_base
import transformers.utils as _utils
import transformers.utils.import_utils as _import_utils

__all__ = ["enable"]

_original_flex_available = _import_utils.is_torch_flex_attn_available
_original_pipeline_init = _pipelines_base.Pipeline.__init__

# Pipeline.__init__(self, model, tokenizer, feature_extractor, image_processor,
# processor, modelcard, task, device, ...): a call passing this many positional
# arguments after self names the device itself; it is left alone.
_DEVICE_POSITION = 7


@functools.lru_cache
def _flex_attn_available() -> bool:
    # transformers' own answer for any device but torch_tpu's: torch is there.
    return _import_utils.is_torch_available()


def _enable_flex_attention():
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        answer = getattr(module, "is_torch_flex_attn_available", None)
        if name.startswith("transformers.") and answer is _original_flex_available:
            module.is_torch_flex_attn_available = _flex_attn_available
    _utils.is_torch_flex_attn_available = _flex_attn_available
    _import_utils.is_torch_flex_attn_available = _flex_attn_available

    # Modules that chose their names at import time with the old answer.
    from torch.nn.attention import flex_attention as flex

    masking = sys.modules.get("transformers.masking_utils")
    if masking is not None and masking.BlockMask is torch.Tensor:
        masking.BlockMask = flex.BlockMask
        masking.create_block_mask = flex.create_block_mask
    integration = sys.modules.get("transformers.integrations.flex_attention")
    if integration is not None and not hasattr(integration, "flex_attention"):
        integration.flex_default_block_size = flex._DEFAULT_SPARSE_BLOCK_SIZE
        integration.BlockMask = flex.BlockMask
        integration.create_block_mask = flex.create_block_mask
        integration.flex_attention = flex.flex_attention
        integration.AuxRequest = getattr(flex, "AuxRequest", None)


def _tpu_index(device):
    """``tpu:device`` for an int index >= 0 while tpu is the current
    accelerator (the role cuda:N plays for an index on a CUDA host); any
    other value unchanged."""
    accelerator = torch.accelerator.current_accelerator()
    if (isinstance(device, int) and not isinstance(device, bool) and device >= 0
            and accelerator is not None and accelerator.type == "tpu"):
        return torch.device("tpu", device)
    return device


@functools.wraps(_original_pipeline_init)
def _pipeline_init(self, *args, **kwargs):
    if len(args) > _DEVICE_POSITION:
        return _original_pipeline_init(self, *args, **kwargs)
    model = kwargs["model"] if "model" in kwargs else args[0]
    device_map = getattr(model, "hf_device_map", None)
    if device_map is None:
        device = kwargs.get("device")
        kwargs["device"] = _tpu_index(0 if device is None else device)
        return _original_pipeline_init(self, *args, **kwargs)
    # A dispatched model: transformers refuses `device` with it and takes the
    # map's first entry; it does not move the model, only its inputs follow.
    _original_pipeline_init(self, *args, **kwargs)
    first = next(iter(device_map.values()))
    if self.device == torch.device("cpu") and isinstance(_tpu_index(first), torch.device):
        self.device = _tpu_index(first)
    return None


def enable():
    """Lets transformers use flex attention with torchtpu installed, makes
    ``pipeline`` device indices mean tpu, and enables
    :mod:`torchtpu.integrations.accelerate` when accelerate is installed
    (module docstring). Call before the first ``TrainingArguments`` and before
    loading models; calling it again does nothing more."""
    _enable_flex_attention()
    _pipelines_base.Pipeline.__init__ = _pipeline_init
    try:
        from torchtpu.integrations import accelerate as tpu_accelerate
    except ImportError:  # accelerate is optional for transformers
        return
    tpu_accelerate.enable()

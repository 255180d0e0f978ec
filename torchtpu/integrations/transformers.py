"""transformers on tpu: where transformers 5.x takes device "tpu" for Google's
``torch_tpu`` (the other PrivateUse1 backend named "tpu") and does what is wrong
for torchtpu.

Usage, once, before loading models (``import transformers`` alone is fine)::

    import torchtpu.integrations.transformers as tpu_transformers
    tpu_transformers.enable()

What ``enable()`` changes (no transformers file is edited; docs/device-seams.md,
section "Libraries", has the call site, and tests/test_seams_transformers.py a
test that turns red the day transformers changes it):

``attn_implementation="flex_attention"``. ``is_torch_flex_attn_available()``
   (utils/import_utils.py) answers False whenever the current accelerator is
   "tpu", because torch_tpu's tensors are refused by PyTorch's flex_attention.
   With torchtpu installed that accelerator is always tpu, so every model asked
   for flex attention, CPU models included, raised ``ImportError: PyTorch Flex
   Attention is not supported on TPU.`` torchtpu's flex_attention takes tpu
   tensors (torchtpu/integrations/flex_attention.py); ``enable()`` answers True
   (as for CPU and CUDA) and gives the modules that read the answer at import
   time (masking_utils, integrations.flex_attention) the flex names they skipped.
A model module that read the answer at import (models/doge) and was imported
before ``enable()`` keeps the old one.

Idempotent. Raises ImportError if transformers is not installed.
"""

import functools
import sys

import torch
import transformers  # noqa: F401  (ImportError here names the missing package)
import transformers.utils as _utils
import transformers.utils.import_utils as _import_utils

__all__ = ["enable"]

_original_flex_available = _import_utils.is_torch_flex_attn_available


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


def enable():
    """Lets transformers use flex attention with torchtpu installed (module
    docstring). Call before loading models; calling it again does nothing more."""
    _enable_flex_attention()

"""transformers on tpu: three places where transformers 5.x decides by device
type and takes, for torchtpu's "tpu", a path CUDA would not take, and (through
:mod:`torchtpu.integrations.accelerate`) the places where accelerate, which
the Trainer and ``device_map="auto"`` go through, does.

Applied by default: ``import torchtpu`` (``import torch`` loads it) installs
an import hook (torchtpu/integrations/_library_fixes.py) that makes these
changes as the transformers modules concerned are imported, so code that never
names tpu runs as it did before torchtpu was installed. With
``TORCHTPU_LIBRARY_FIXES=0`` (docs/environment.md) transformers is left as it
is, and this applies the same changes by hand, once, before loading models::

    import torchtpu.integrations.transformers as tpu_transformers
    tpu_transformers.enable()

What changes (no transformers file is edited; docs/device-seams.md, section
"Libraries", has the call sites, and tests/integration/test_seams_transformers.py tests
that turn red the day transformers changes them):

1. ``attn_implementation="flex_attention"``. transformers reads device "tpu" as
   Google's torch_tpu (the other PrivateUse1 backend of that name), whose
   tensors PyTorch's flex_attention refuses, so ``is_torch_flex_attn_available()``
   (utils/import_utils.py) answers False whenever the current accelerator is
   "tpu". With torchtpu installed it always is, so every model asked for flex
   attention, CPU models included, raised ``ImportError: PyTorch Flex Attention
   is not supported on TPU.`` torchtpu's flex_attention takes tpu tensors
   (torchtpu/integrations/flex_attention.py); the fix answers True (as for CPU
   and CUDA). The hook fixes the answer before any module reads it;
   ``enable()`` also gives the modules that read it at import time
   (masking_utils, integrations.flex_attention) the flex names they skipped. A
   model module that read it at import (models/doge) and was imported before
   ``enable()`` keeps the old answer.
2. ``pipeline(...)`` devices (pipelines/base.py:839-893, ``Pipeline.__init__``). With no
   ``device`` it uses index 0, and an index means "cuda:N" (or mlu, npu, xpu,
   mps, ...), else CPU; the model is then moved there. So ``pipeline(task,
   model=model_on_tpu)`` moved the model back to CPU and ran there, and
   ``device=0`` meant CPU, where on a CUDA host both mean cuda:0. Fixed, an
   index (given, or the default 0) is a tpu index whenever tpu is the current
   accelerator; ``device="cpu"``/``-1``/``"tpu:N"`` and ``torch.device``
   values are left as they are. For a model loaded with a ``device_map`` (not
   moved by the pipeline) an int first entry of the map means that tpu too.
3. ``from_pretrained(..., tp_plan="auto")`` (and ``distributed_config``)
   under torchrun with no process group yet: transformers initializes
   torch.distributed itself with the backend its ``DISTRIBUTED_BACKEND_MAP``
   (distributed/utils.py) names for the accelerator, ``"tpu_dist"`` for "tpu"
   (torch_tpu's backend), which torchtpu does not register, so loading raised
   ``OSError: We tried to initialize torch.distributed for you, but it
   failed``. Fixed, the map names torchtpu's c10d backend ``"tpu"``
   (torchtpu/distributed.py); a process group the script made first is kept,
   as before. The map is left alone if it names anything else for "tpu".
4. accelerate (its own fixes, :mod:`torchtpu.integrations.accelerate`, which
   ``enable()`` applies when accelerate is installed): accelerate's default
   device is tpu (so a ``Trainer`` needs no ``ACCELERATE_TORCH_DEVICE``, and
   ``use_cpu=True`` still means CPU) and ``device_map="auto"`` fills tpu
   before CPU.

``enable()`` is idempotent, and does nothing more after the hook's fixes.
It raises ImportError if transformers is not installed.
"""

import functools
import sys

import torch
import transformers  # noqa: F401  (ImportError here names the missing package)

__all__ = ["enable"]

# Pipeline.__init__(self, model, tokenizer, feature_extractor, image_processor,
# processor, modelcard, task, device, ...): a call passing this many positional
# arguments after self names the device itself; it is left alone.
_DEVICE_POSITION = 7

# A fixed function keeps transformers' own under this attribute; it also marks
# the fix as applied.
_ORIGINAL = "_torchtpu_original"

# The c10d backend transformers names for device "tpu": Google's torch_tpu's.
_TORCH_TPU_BACKEND = "tpu_dist"


def _fix_import_utils(import_utils):
    """``import_utils.is_torch_flex_attn_available`` answers as for CPU and
    CUDA (module docstring, 1.). Run by the import hook right after
    import_utils' code, before transformers.utils imports the name from it."""
    original = import_utils.is_torch_flex_attn_available
    if hasattr(original, _ORIGINAL):
        return
    # transformers marks its probes as trace-time constants for torch.compile.
    constant = getattr(import_utils, "_make_compile_constant", lambda function: function)

    @functools.lru_cache
    @constant
    def is_torch_flex_attn_available() -> bool:
        # transformers' own answer for any device but torch_tpu's: torch is there.
        return import_utils.is_torch_available()

    setattr(is_torch_flex_attn_available, _ORIGINAL, original)
    import_utils.is_torch_flex_attn_available = is_torch_flex_attn_available


def _fix_flex_copies(import_utils):
    """For ``enable()`` after modules already read the old answer: the modules
    holding transformers' function get the fixed one, and the two that chose
    their names at import time get the flex names they skipped."""
    fixed = import_utils.is_torch_flex_attn_available
    original = getattr(fixed, _ORIGINAL)
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        answer = getattr(module, "is_torch_flex_attn_available", None)
        if name.startswith("transformers.") and answer is original:
            module.is_torch_flex_attn_available = fixed

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


def _fix_pipelines(base):
    """``Pipeline.__init__`` takes a device index as a tpu index (module
    docstring, 2.)."""
    original = base.Pipeline.__init__
    if hasattr(original, _ORIGINAL):
        return

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        if len(args) > _DEVICE_POSITION:
            return original(self, *args, **kwargs)
        model = kwargs["model"] if "model" in kwargs else args[0]
        device_map = getattr(model, "hf_device_map", None)
        if device_map is None:
            device = kwargs.get("device")
            kwargs["device"] = _tpu_index(0 if device is None else device)
            return original(self, *args, **kwargs)
        # A dispatched model: transformers refuses `device` with it and takes
        # the map's first entry; it does not move the model, only its inputs
        # follow.
        original(self, *args, **kwargs)
        first = next(iter(device_map.values()))
        if self.device == torch.device("cpu") and isinstance(_tpu_index(first), torch.device):
            self.device = _tpu_index(first)
        return None

    setattr(__init__, _ORIGINAL, original)
    base.Pipeline.__init__ = __init__


def _fix_distributed_utils(utils):
    """``DISTRIBUTED_BACKEND_MAP["tpu"]`` names torchtpu's c10d backend
    (module docstring, 3.)."""
    backends = getattr(utils, "DISTRIBUTED_BACKEND_MAP", None)
    if backends is not None and backends.get("tpu") == _TORCH_TPU_BACKEND:
        from torchtpu import distributed

        backends["tpu"] = distributed.BACKEND


def _enable_loaded():
    """The fixes, on the transformers modules already imported (the import
    hook, installed after transformers was imported, and ``enable()``)."""
    import_utils = sys.modules.get("transformers.utils.import_utils")
    if import_utils is not None:
        _fix_import_utils(import_utils)
        _fix_flex_copies(import_utils)
    base = sys.modules.get("transformers.pipelines.base")
    if base is not None:
        _fix_pipelines(base)
    utils = sys.modules.get("transformers.distributed.utils")
    if utils is not None:
        _fix_distributed_utils(utils)


def enable():
    """Lets transformers use flex attention with torchtpu installed, makes
    ``pipeline`` device indices mean tpu, lets ``tp_plan="auto"`` start
    torch.distributed with torchtpu's backend, and enables
    :mod:`torchtpu.integrations.accelerate` when accelerate is installed
    (module docstring). Needed only with ``TORCHTPU_LIBRARY_FIXES=0``; call it
    before the first ``TrainingArguments`` and before loading models. Calling
    it again does nothing more."""
    import transformers.pipelines.base  # noqa: F401
    import transformers.utils.import_utils  # noqa: F401

    try:  # transformers 5.x; older versions had no such map
        import transformers.distributed.utils  # noqa: F401
    except ImportError:
        pass

    _enable_loaded()
    try:
        import accelerate  # noqa: F401
    except ImportError:  # accelerate is optional for transformers
        return
    from torchtpu.integrations import accelerate as tpu_accelerate

    tpu_accelerate.enable()

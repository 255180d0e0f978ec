"""accelerate on tpu: the two places where accelerate 1.15 picks devices from a
list without tpu and quietly uses CPU instead, and its compiler choice.

Applied by default: ``import torchtpu`` (``import torch`` loads it) installs
an import hook (torchtpu/integrations/_library_fixes.py) that makes these
changes as the accelerate modules concerned are imported. With
``TORCHTPU_LIBRARY_FIXES=0`` (docs/environment.md) accelerate is left as it
is, and this applies the same changes by hand, once, before the first
``Accelerator``, ``PartialState`` or ``TrainingArguments`` and before loading
models (``torchtpu.integrations.transformers.enable()`` calls it too)::

    import torchtpu.integrations.accelerate as tpu_accelerate
    tpu_accelerate.enable()

What changes (no accelerate file is edited; docs/device-seams.md,
section "Libraries", has the call sites, tests/integration/test_seams_accelerate.py the
tests, including ones that turn red the day accelerate changes them):

1. ``PartialState.default_device`` (state.py:718): MPS, MLU, SDAA, MUSA, NPU,
   HPU, CUDA, XPU, ..., else CPU. So ``Accelerator()`` ran on CPU, and a
   ``transformers.Trainer`` (whose ``TrainingArguments.device`` is tpu:0)
   moved the model to tpu while accelerate kept the batches on CPU: "Expected
   all tensors to be on the same device" at the first step. Fixed, the
   default device is tpu where it was CPU and tpu is the current
   accelerator, as it is cuda on a CUDA host. ``cpu=True`` /
   ``use_cpu=True`` still mean CPU (the ``ACCELERATE_TORCH_DEVICE=tpu``
   variable, the other way, overrides them), and the variable still wins.
2. ``get_max_memory`` (utils/modeling.py:757), the device budget of
   ``device_map="auto"``: it lists CUDA/NPU/MLU/SDAA/MUSA/XPU/HPU memory and
   never tpu, so every weight went to CPU. Fixed, when it lists no
   accelerator and tpu is the current one, each tpu device comes first
   with its free memory (``torch.tpu.mem_get_info``), as CUDA's GPUs do; an
   int key is a tpu index, as ``torch.device(int)`` resolves it. A
   ``max_memory`` the caller passes is used as given, its int keys checked
   against the tpu device count (accelerate checked them against CUDA's and
   logged "Device 0 is not available").
3. ``TorchDynamoPlugin`` (utils/dataclasses.py): its backends are a closed
   enum (``"tpu"`` is refused with ``ValueError``), and transformers'
   ``torch_compile=True`` picks ``"inductor"``, which cannot compile tpu
   tensors (``InductorError``). Fixed, Inductor asked for on accelerate's
   tpu device compiles with torchtpu's ``"tpu"`` backend, as
   Inductor is CUDA's compiler.

One process, one device per process: accelerate's multi-process launch types
(MULTI_GPU, ...) do not know tpu and are not changed here.

``enable()`` is idempotent, and does nothing more after the hook's fixes.
It raises ImportError if accelerate is not installed.
"""

import functools
import sys

import accelerate  # noqa: F401  (ImportError here names the missing package)
import torch

__all__ = ["enable"]

# A fixed function keeps accelerate's own under this attribute; it also marks
# the fix as applied.
_ORIGINAL = "_torchtpu_original"


def _tpu_is_the_accelerator() -> bool:
    accelerator = torch.accelerator.current_accelerator()
    return accelerator is not None and accelerator.type == "tpu"


def _fix_state(state):
    """``PartialState.default_device`` answers tpu where it answered CPU
    (module docstring, 1.)."""
    original = state.PartialState.default_device  # a property
    if hasattr(original.fget, _ORIGINAL):
        return

    def default_device(self) -> torch.device:
        device = original.fget(self)
        if device.type == "cpu" and _tpu_is_the_accelerator():
            return torch.device("tpu")
        return device

    setattr(default_device, _ORIGINAL, original)
    state.PartialState.default_device = property(default_device, doc=original.__doc__)


def _fix_modeling(modeling):
    """``get_max_memory`` lists tpu devices (module docstring, 2.). Run by the
    import hook right after modeling's code, before accelerate.utils imports
    the name from it."""
    original = modeling.get_max_memory
    if hasattr(original, _ORIGINAL):
        return

    def given_budget(max_memory):
        """A caller's ``max_memory`` with its int keys taken as tpu indices:
        accelerate checks them against CUDA's (or NPU's, ...) device count and
        logs "Device 0 is not available" for each, though it keeps them."""
        # Sizes given as text become bytes in the caller's dict, as
        # accelerate's own function does (transformers reads them back).
        for key, size in max_memory.items():
            if isinstance(size, str):
                max_memory[key] = modeling.convert_file_size_to_int(size)
        indices = sorted(key for key in max_memory if isinstance(key, int))
        for index in indices:
            if not 0 <= index < torch.tpu.device_count():
                raise ValueError(f"max_memory names tpu:{index}, but there are "
                                 f"{torch.tpu.device_count()} tpu device(s)")
        sizes = {index: max_memory[index] for index in indices}
        rest = original({key: value for key, value in max_memory.items()
                         if not isinstance(key, int)})
        return {**sizes, **rest}

    @functools.wraps(original)
    def get_max_memory(max_memory=None):
        if not _tpu_is_the_accelerator():
            return original(max_memory)
        if max_memory is not None:
            return given_budget(max_memory)
        budget = original(None)
        if any(isinstance(key, int) for key in budget):  # accelerate found devices itself
            return budget
        tpu = {index: torch.tpu.mem_get_info(index)[0]
               for index in range(torch.tpu.device_count())}
        return {**tpu, **budget}  # accelerators first, as accelerate orders GPUs

    setattr(get_max_memory, _ORIGINAL, original)
    modeling.get_max_memory = get_max_memory


def _fix_dataclasses(dataclasses):
    """``TorchDynamoPlugin`` compiles an Inductor request on tpu with
    torchtpu's backend (module docstring, 3.)."""
    plugin = dataclasses.TorchDynamoPlugin
    original = plugin.to_kwargs
    if hasattr(original, _ORIGINAL):
        return

    @functools.wraps(original)
    def to_kwargs(self):
        from accelerate.state import PartialState  # imported by the time a plugin is used

        kwargs = original(self)
        if (self.backend == dataclasses.DynamoBackend.INDUCTOR
                and PartialState().device.type == "tpu"):
            kwargs["backend"] = "tpu"
        return kwargs

    setattr(to_kwargs, _ORIGINAL, original)
    plugin.to_kwargs = to_kwargs


def _enable_loaded():
    """The fixes, on the accelerate modules already imported (the import hook,
    installed after accelerate was imported, and ``enable()``), and the fixed
    ``get_max_memory`` for the loaded modules that imported accelerate's."""
    for name, fix in (("accelerate.state", _fix_state),
                      ("accelerate.utils.modeling", _fix_modeling),
                      ("accelerate.utils.dataclasses", _fix_dataclasses)):
        if name in sys.modules:
            fix(sys.modules[name])
    modeling = sys.modules.get("accelerate.utils.modeling")
    if modeling is None:
        return
    fixed = modeling.get_max_memory
    original = getattr(fixed, _ORIGINAL)
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if not name.startswith(("accelerate", "transformers", "diffusers", "peft")):
            continue
        for attribute in ("get_max_memory", "accelerate_max_memory"):
            if getattr(module, attribute, None) is original:
                setattr(module, attribute, fixed)


def enable():
    """Makes accelerate's default device and ``device_map="auto"`` budget
    include tpu, and its Inductor compile tpu's (module docstring). Needed
    only with ``TORCHTPU_LIBRARY_FIXES=0``; calling it again does nothing
    more."""
    import accelerate.state  # noqa: F401
    import accelerate.utils.dataclasses  # noqa: F401
    import accelerate.utils.modeling  # noqa: F401

    _enable_loaded()

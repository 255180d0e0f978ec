"""accelerate on tpu: the two places where accelerate 1.15 picks devices from a
list without tpu and quietly uses CPU instead, and its compiler choice.

Usage, once, before the first ``Accelerator``, ``PartialState`` or
``TrainingArguments`` and before loading models
(``torchtpu.integrations.transformers.enable()`` calls it too)::

    import torchtpu.integrations.accelerate as tpu_accelerate
    tpu_accelerate.enable()

What ``enable()`` changes (no accelerate file is edited; docs/device-seams.md,
section "Libraries", has the call sites, tests/test_seams_accelerate.py the
tests, including ones that turn red the day accelerate changes them):

1. ``PartialState.default_device`` (state.py:718): MPS, MLU, SDAA, MUSA, NPU,
   HPU, CUDA, XPU, ..., else CPU. So ``Accelerator()`` ran on CPU, and a
   ``transformers.Trainer`` (whose ``TrainingArguments.device`` is tpu:0)
   moved the model to tpu while accelerate kept the batches on CPU: "Expected
   all tensors to be on the same device" at the first step. After
   ``enable()`` the default device is tpu where it was CPU and tpu is the
   current accelerator, as it is cuda on a CUDA host. ``cpu=True`` /
   ``use_cpu=True`` still mean CPU (the ``ACCELERATE_TORCH_DEVICE=tpu``
   variable, the other way, overrides them), and the variable still wins.
2. ``get_max_memory`` (utils/modeling.py:757), the device budget of
   ``device_map="auto"``: it lists CUDA/NPU/MLU/SDAA/MUSA/XPU/HPU memory and
   never tpu, so every weight went to CPU. After ``enable()``, when it lists
   no accelerator and tpu is the current one, each tpu device comes first
   with its free memory (``torch.tpu.mem_get_info``), as CUDA's GPUs do; an
   int key is a tpu index, as ``torch.device(int)`` resolves it. A
   ``max_memory`` the caller passes is used as given, its int keys checked
   against the tpu device count (accelerate checked them against CUDA's and
   logged "Device 0 is not available").

3. ``TorchDynamoPlugin`` (utils/dataclasses.py): its backends are a closed
   enum (``"tpu"`` is refused with ``ValueError``), and transformers'
   ``torch_compile=True`` picks ``"inductor"``, which cannot compile tpu
   tensors (``InductorError``). After ``enable()``, Inductor asked for on
   accelerate's tpu device compiles with torchtpu's ``"tpu"`` backend, as
   Inductor is CUDA's compiler.

One process, one device per process: accelerate's multi-process launch types
(MULTI_GPU, ...) do not know tpu and are not changed here.

Idempotent. Raises ImportError if accelerate is not installed.
"""

import functools
import sys

import accelerate.state as _state
import accelerate.utils as _utils
import accelerate.utils.dataclasses as _dataclasses
import accelerate.utils.modeling as _modeling
import torch

__all__ = ["enable"]

_original_default_device = _state.PartialState.default_device  # a property
_original_get_max_memory = _modeling.get_max_memory
_original_dynamo_kwargs = _dataclasses.TorchDynamoPlugin.to_kwargs


def _tpu_is_the_accelerator() -> bool:
    accelerator = torch.accelerator.current_accelerator()
    return accelerator is not None and accelerator.type == "tpu"


def _default_device(self) -> torch.device:
    device = _original_default_device.fget(self)
    if device.type == "cpu" and _tpu_is_the_accelerator():
        return torch.device("tpu")
    return device


def _given_budget(max_memory):
    """A caller's ``max_memory`` with its int keys taken as tpu indices:
    accelerate checks them against CUDA's (or NPU's, ...) device count and
    logs "Device 0 is not available" for each, though it keeps them."""
    # Sizes given as text become bytes in the caller's dict, as accelerate's
    # own function does (transformers reads them back from it).
    for key, size in max_memory.items():
        if isinstance(size, str):
            max_memory[key] = _utils.convert_file_size_to_int(size)
    indices = sorted(key for key in max_memory if isinstance(key, int))
    for index in indices:
        if not 0 <= index < torch.tpu.device_count():
            raise ValueError(f"max_memory names tpu:{index}, but there are "
                             f"{torch.tpu.device_count()} tpu device(s)")
    sizes = {index: max_memory[index] for index in indices}
    rest = _original_get_max_memory(
        {key: value for key, value in max_memory.items() if not isinstance(key, int)})
    return {**sizes, **rest}


@functools.wraps(_original_get_max_memory)
def _get_max_memory(max_memory=None):
    if not _tpu_is_the_accelerator():
        return _original_get_max_memory(max_memory)
    if max_memory is not None:
        return _given_budget(max_memory)
    budget = _original_get_max_memory(None)
    if any(isinstance(key, int) for key in budget):  # accelerate found devices itself
        return budget
    tpu = {index: torch.tpu.mem_get_info(index)[0] for index in range(torch.tpu.device_count())}
    return {**tpu, **budget}  # accelerators first, as accelerate orders GPUs


def _dynamo_kwargs(self):
    kwargs = _original_dynamo_kwargs(self)
    if (self.backend == _dataclasses.DynamoBackend.INDUCTOR
            and _state.PartialState().device.type == "tpu"):
        kwargs["backend"] = "tpu"
    return kwargs


def enable():
    """Makes accelerate's default device and ``device_map="auto"`` budget
    include tpu, and its Inductor compile tpu's (module docstring). Calling it
    again does nothing more."""
    _state.PartialState.default_device = property(
        _default_device, doc=_original_default_device.__doc__)
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if not name.startswith(("accelerate", "transformers", "diffusers", "peft")):
            continue
        for attribute in ("get_max_memory", "accelerate_max_memory"):
            if getattr(module, attribute, None) is _original_get_max_memory:
                setattr(module, attribute, _get_max_memory)
    _utils.get_max_memory = _get_max_memory
    _modeling.get_max_memory = _get_max_memory
    _dataclasses.TorchDynamoPlugin.to_kwargs = _dynamo_kwargs

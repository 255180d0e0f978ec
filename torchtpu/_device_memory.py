"""Memory and device-information functions of ``torch.tpu`` (re-exported by
torchtpu.device), with torch.cuda's names and meanings.

What is counted: the bytes of live tpu storages per device (a tensor's storage
counts from its creation until its last reference goes, as CUDA's
memory_allocated counts; a storage resized to 0 counts 0). PJRT frees a buffer
as soon as nothing holds it, so nothing is cached: ``memory_reserved`` equals
``memory_allocated`` and ``empty_cache`` has nothing to return. (One buffer
per device outlives its storage: the runtime keeps one output of the device's
last program until the next program or ``synchronize()``, so that
synchronization waits for it; it is not counted.) The same
numbers come through ``torch.accelerator.memory_allocated()`` and friends.

Every function that takes ``device`` accepts an int, ``"tpu:N"``, a
torch.device, or None (the current device), and raises IndexError for a device
index this process does not have.
"""

import dataclasses

from torchtpu import _C
from torchtpu.device import _checked_index


def memory_stats(device=None):
    """A dict of allocator statistics, keyed as torch.cuda.memory_stats:
    ``"<stat>.all.<current|peak|allocated|freed>"`` for stat in allocation,
    segment, active (counts) and allocated_bytes, reserved_bytes, active_bytes,
    requested_bytes (bytes); plus num_alloc_retries and num_ooms (always 0)."""
    return dict(sorted(_C._memory_stats(_checked_index(device)).items()))


def memory_allocated(device=None):
    """Bytes of live tpu storages on ``device`` (int)."""
    return _C._memory_stats(_checked_index(device))["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    """Peak of :func:`memory_allocated` since start or :func:`reset_peak_memory_stats` (bytes)."""
    return _C._memory_stats(_checked_index(device))["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    """Bytes held for ``device``: equal to :func:`memory_allocated` (no cache)."""
    return _C._memory_stats(_checked_index(device))["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    """Peak of :func:`memory_reserved` (bytes)."""
    return _C._memory_stats(_checked_index(device))["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None):
    """Sets every peak to its current value."""
    _C._reset_peak_memory_stats(_checked_index(device))


def reset_accumulated_memory_stats(device=None):
    """Sets the ``allocated`` / ``freed`` totals to 0."""
    _C._reset_accumulated_memory_stats(_checked_index(device))


def empty_cache():
    """Nothing to do: PJRT buffers are freed as soon as no tensor holds them."""


def mem_get_info(device=None):
    """``(free, total)`` bytes of ``device``: from PJRT_Device_MemoryStats where
    the plugin reports a memory limit (GPU/TPU plugins), else the host's
    MemAvailable and MemTotal from /proc/meminfo (the CPU plugin keeps its
    buffers in host memory)."""
    return tuple(_C._mem_get_info(_checked_index(device)))


def get_device_name(device=None):
    """The PJRT device kind (``"cpu"`` for the CPU plugin, e.g. ``"NVIDIA H200"``
    on the GPU plugin), or the platform name where the kind is empty."""
    kind = _C._device_kind(_checked_index(device))
    return kind or _C._platform_name()


@dataclasses.dataclass(frozen=True)
class _DeviceProperties:
    name: str
    total_memory: int  # bytes, as mem_get_info()[1]
    platform: str
    index: int


def get_device_properties(device=None):
    """An object with ``name`` (see :func:`get_device_name`), ``total_memory``
    (bytes), ``platform`` (PJRT platform name) and ``index``."""
    idx = _checked_index(device)
    return _DeviceProperties(get_device_name(idx), mem_get_info(idx)[1], _C._platform_name(), idx)


def get_device_capability(device=None):
    """(0, 0): PJRT devices have no CUDA compute capability."""
    _checked_index(device)
    return (0, 0)


def is_bf16_supported(including_emulation=True):
    """True: every PJRT backend computes bfloat16 (XLA:CPU emulates it in f32)."""
    return True

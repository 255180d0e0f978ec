"""The ``torch.tpu`` device module (registered with torch._register_device_module)."""

import torch

from torchtpu import _C


def is_available():
    """True when the PJRT plugin loads and exposes at least one device."""
    return _C._device_count() > 0


def device_count():
    """Number of tpu devices; 0 (never an exception) when the plugin is missing."""
    return _C._device_count()


def is_initialized():
    """True once the PJRT client exists (the first tpu tensor, or torchtpu.init)."""
    return _C._is_initialized()


def __getattr__(name):
    """``_initialized``: True once the tpu runtime is initialized (the PJRT client
    exists) in a process that may use it, as ``torch.cuda._initialized`` after
    lazy init. torch.utils.checkpoint stashes and replays the device RNG state
    only when ``getattr(device_module, "_initialized", False)`` is True; without
    it, a recomputed dropout draws a different mask and the gradients are wrong.
    A module attribute cannot follow the C++ runtime, so it is read here on
    every access. Any other missing name raises AttributeError (``hasattr``
    probes in PyTorch rely on that)."""
    if name == "_initialized":
        return _C._is_initialized() and not _C._is_in_bad_fork()
    raise AttributeError(f"module 'torch.tpu' has no attribute '{name}'")


def current_device():
    """Index of this thread's current tpu device (0 unless set_device / device())."""
    return _C._current_device()


def set_device(device):
    """Makes ``device`` (int, ``"tpu:N"`` or torch.device) this thread's current tpu
    device: ``device="tpu"`` tensors and ops without tpu tensor inputs go there.

    Raises:
        IndexError: no such device.
    """
    idx = _index(device)
    if idx >= 0:
        _C._set_device(idx)


def synchronize(device=None):
    """Waits for every enqueued tpu computation. Raises RuntimeError naming a failed op."""
    _C._synchronize()


def manual_seed(seed):
    """Seeds the current device's generator (rand, randn, dropout, ...)."""
    _C._manual_seed(int(seed), -1)


def manual_seed_all(seed):
    """Seeds every tpu device's generator."""
    for i in range(max(device_count(), 1)):
        _C._manual_seed(int(seed), i)


def seed():
    return _C._seed(-1)


def seed_all():
    for i in range(max(device_count(), 1)):
        _C._seed(i)


def initial_seed():
    return _C._initial_seed(-1)


def get_rng_state(device="tpu"):
    """The generator state: a uint8 CPU tensor of 16 bytes (seed, offset)."""
    return _C._get_rng_state(_index(device))


def set_rng_state(new_state, device="tpu"):
    """Restores a state from get_rng_state (uint8 CPU tensor of 16 bytes)."""
    _C._set_rng_state(new_state, _index(device))


def get_rng_state_all():
    """Every tpu device's generator state, a list indexed by device (as CUDA's)."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    """Restores each device's state from a get_rng_state_all() list.

    Raises IndexError when the list names more devices than this process has.
    """
    if len(new_states) > device_count():
        raise IndexError(f"{len(new_states)} states for {device_count()} tpu device(s)")
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16]


def _is_in_bad_fork():
    """True in a process forked after its parent had initialised tpu.

    Such a child cannot use tpu (the device runtime's threads do not survive
    fork): every tpu operation there raises RuntimeError naming the 'spawn'
    start method, as CUDA does.
    """
    return _C._is_in_bad_fork()


def _index(device):
    """-1 for None / ``"tpu"``; else the index. ValueError for another device type."""
    if device is None:
        return -1
    d = torch.device(device) if not isinstance(device, int) else torch.device("tpu", device)
    if d.type != "tpu":
        raise ValueError(f"expected a tpu device, got {d}")
    return -1 if d.index is None else d.index


def _checked_index(device):
    """The index of ``device`` (None: the current one). IndexError if it does not exist."""
    idx = _index(device)
    if idx < 0:
        idx = current_device()
    n = device_count()
    if idx >= n:
        raise IndexError(f"Invalid device argument {idx}: this process has {n} tpu device(s)")
    return idx


class device:
    """Context manager that makes ``idx`` the current tpu device."""

    def __init__(self, idx):
        self.idx = _index(idx) if idx is not None else -1
        self.prev = -1

    def __enter__(self):
        self.prev = _C._current_device()
        if self.idx >= 0:
            _C._set_device(self.idx)

    def __exit__(self, *exc):
        _C._set_device(self.prev)
        return False


from torchtpu._device_streams import (  # noqa: E402,F401  (part of this module's API)
    Event,
    Stream,
    current_stream,
    default_stream,
    set_stream,
    stream,
)
from torchtpu._device_memory import (  # noqa: E402,F401  (part of this module's API)
    empty_cache,
    get_device_capability,
    get_device_name,
    get_device_properties,
    get_per_process_memory_fraction,
    is_bf16_supported,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from torchtpu._device_extra import (  # noqa: E402,F401  (part of this module's API)
    clock_rate,
    get_arch_list,
    get_gencode_flags,
    ipc_collect,
    memory_usage,
    power_draw,
    temperature,
    utilization,
)
# The legacy typed storage classes (torch.tpu.FloatStorage, ...), as torch.cuda's.
from torchtpu._device_storages import _CLASSES as _STORAGE_CLASSES  # noqa: E402

globals().update(_STORAGE_CLASSES)

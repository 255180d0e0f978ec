"""The ``torch.tpu`` device module (registered with torch._register_device_module)."""

import torch

from torchtpu import _C


def is_available():
    """True when the PJRT plugin loads and exposes at least one device."""
    return _C._device_count() > 0


def device_count():
    """Number of tpu devices; 0 (never an exception) when the plugin is missing."""
    return _C._device_count()


def current_device():
    """Index of the current tpu device."""
    return _C._current_device()


def set_device(device):
    _C._set_device(torch.device(device, 0).index if isinstance(device, str) else int(device))


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
    _C._set_rng_state(new_state, _index(device))


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
    d = torch.device(device) if not isinstance(device, int) else torch.device("tpu", device)
    return -1 if d.index is None else d.index


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

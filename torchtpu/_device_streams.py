"""Streams and events of the ``torch.tpu`` module (re-exported by torchtpu.device).

A tpu device runs its work in one queue, in the order PJRT's data dependencies
allow (every program waits for the producers of its inputs). So every stream of
a device is a name for that queue: ``Stream()`` objects have their own ids (and
``with torch.tpu.stream(s)`` makes ``s`` current, as on CUDA), but work issued
on any of them is ordered the same way, and ``wait_stream`` / ``wait_event`` have
nothing to insert. Events mark a point of the device's queue: ``record()`` takes
the work enqueued on the device so far; ``query()`` / ``synchronize()`` test and
wait for it; ``elapsed_time()`` gives milliseconds between the completions of
two points (device time, host steady clock taken when the plugin reports the
last buffer ready).
"""

import contextlib

import torch

from torchtpu import _C
from torchtpu.device import _index

_TPU_TYPE = None  # c10 DeviceType value of PrivateUse1, read once


def _device_type():
    global _TPU_TYPE
    if _TPU_TYPE is None:
        _TPU_TYPE = torch.Stream(device="tpu").device_type
    return _TPU_TYPE


def _device(device):
    idx = _index(device)
    return torch.device("tpu", idx if idx >= 0 else torch.tpu.current_device())


class Stream(torch.Stream):
    """A tpu stream (see the module docstring for what it orders).

    Args:
        device: ``"tpu:N"``, int or torch.device; None is the current device.
        priority: accepted for CUDA compatibility; every stream runs alike.
    """

    def __new__(cls, device=None, priority=0, **kwargs):
        if "stream_id" in kwargs:  # wrapping an existing stream (current_stream ...)
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=_device(device), priority=priority)

    def __repr__(self):
        return f"<torch.tpu.Stream device=tpu:{self.device_index} stream_id={self.stream_id}>"


def _wrap(s):
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


class Event(torch.Event):
    """A tpu event: a point in one device's queue.

    Args:
        enable_timing: allow ``elapsed_time`` (milliseconds, float). Without it,
            ``elapsed_time`` raises ValueError, as torch.Event does.
        blocking, interprocess: accepted; synchronize always blocks the caller,
            and IPC handles are not supported.
    """

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return super().__new__(cls, device="tpu", enable_timing=enable_timing,
                               blocking=blocking, interprocess=interprocess)

    def record(self, stream=None):
        """Marks the current end of ``stream``'s device queue (default: current stream)."""
        super().record(stream if stream is not None else current_stream())

    def elapsed_time(self, end_event):
        """Milliseconds (float) from this event's point to ``end_event``'s (a
        tpu Event or torch.Event); waits for both.

        Raises:
            ValueError: an event was not recorded, or lacks ``enable_timing``.
        """
        if not isinstance(end_event, torch.Event) or end_event.device.type != "tpu":
            raise TypeError(f"expected a tpu Event, got {end_event!r}")
        return _C._event_elapsed_ms(self.event_id, end_event.event_id)

    def wait(self, stream=None):
        """Makes ``stream`` wait for this event: already ordered on tpu (no-op)."""
        super().wait(stream if stream is not None else current_stream())


def current_stream(device=None):
    """The current :class:`Stream` of ``device`` (None: the current device) on this thread."""
    return _wrap(torch.accelerator.current_stream(_device(device)))


def default_stream(device=None):
    """The default :class:`Stream` (id 0) of ``device``."""
    d = _device(device)
    return Stream(stream_id=0, device_index=d.index, device_type=_device_type())


def set_stream(s):
    """Makes ``s`` the current stream of its device (None: no change)."""
    if s is not None:
        torch.accelerator.set_stream(s)


@contextlib.contextmanager
def stream(s):
    """Context manager: ``s`` is the current stream (and its device the current
    device) inside the block; None does nothing."""
    if s is None:
        yield
        return
    prev_device = torch.tpu.current_device()
    prev = torch.accelerator.current_stream(s.device)
    torch.accelerator.set_stream(s)
    try:
        yield
    finally:
        torch.accelerator.set_stream(prev)
        torch.tpu.set_device(prev_device)

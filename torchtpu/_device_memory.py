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
import warnings

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


# memory_summary's rows: (memory_stats key prefix, label, kind). torch.cuda's
# table also has large/small pool, non-releasable and oversize rows; PJRT has
# no pools and no block splitting, so those would always read 0.
_SUMMARY_ROWS = (
    ("allocated_bytes", "Allocated memory", "bytes"),
    ("active_bytes", "Active memory", "bytes"),
    ("requested_bytes", "Requested memory", "bytes"),
    ("reserved_bytes", "Reserved memory", "bytes"),
    ("allocation", "Allocations", "count"),
    ("active", "Active allocs", "count"),
    ("segment", "Reserved segments", "count"),
)


def _format_bytes(n, scale):
    """``n`` in the unit that suits ``scale`` (the row's current value), as CUDA's table."""
    unit = "B  "
    for next_unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if scale < 768 * 1024:
            break
        unit, n, scale = next_unit, n // 1024, scale / 1024
    return f"{n:6d} {unit}"


def _format_count(n, scale):
    unit = " "
    for next_unit in ("K", "M"):
        if scale < 750 * 1000:
            break
        unit, n, scale = next_unit, n // 1000, scale / 1000
    return f"{n:7d} {unit} "


def memory_summary(device=None, abbreviated=False):
    """A human-readable table of :func:`memory_stats` for ``device`` (str), laid
    out as torch.cuda.memory_summary's: per row the current and peak values and
    the totals allocated and freed since start (bytes shown in B/KiB/MiB/...,
    counts in units/K/M).

    ``abbreviated`` is accepted for CUDA compatibility; the table has no
    per-pool rows to leave out (PJRT keeps no memory pools), so both forms
    are the same.

    Raises:
        IndexError: no such device.
    """
    idx = _checked_index(device)
    stats = memory_stats(idx)
    rule, thin = "=" * 75, "-" * 75
    lines = [
        rule,
        f" {'PyTorch tpu memory summary, device ID ' + str(idx):^73} ",
        thin,
        f" {'OOMs: ' + str(stats['num_ooms']):^35} | "
        f"{'alloc retries: ' + str(stats['num_alloc_retries']):^35} ",
        rule,
        "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
    ]
    for key, label, kind in _SUMMARY_ROWS:
        fmt = _format_bytes if kind == "bytes" else _format_count
        values = [stats[f"{key}.all.{f}"] for f in ("current", "peak", "allocated", "freed")]
        lines.append(thin)
        lines.append(f" {label:<21} | " + " | ".join(fmt(v, v) for v in values) + " ")
    lines.append(rule)
    return "|" + "|\n|".join(lines) + "|\n"


def memory_snapshot(mempool_id=None, include_traces=True):
    """Not available: raises NotImplementedError.

    torch.cuda's snapshot lists the caching allocator's segments and blocks
    (addresses, sizes, stack traces). PJRT allocates every buffer itself and
    torchtpu counts bytes per device without keeping a list of buffers, so
    there is no segment list to return; an empty list would read as "nothing
    allocated". Use :func:`memory_stats` / :func:`memory_summary`.

    Raises:
        NotImplementedError: always.
    """
    raise NotImplementedError(
        "torch.tpu.memory_snapshot: PJRT allocates each buffer itself and torchtpu keeps "
        "no per-buffer segment list; use torch.tpu.memory_stats() or memory_summary()")


_memory_fractions = {}  # device index -> fraction set by set_per_process_memory_fraction


def set_per_process_memory_fraction(fraction, device=None):
    """Records a memory fraction (0 to 1) for ``device``, as torch.cuda's, and
    warns that it is not enforced.

    On CUDA the caching allocator then refuses allocations beyond
    ``fraction * total_memory``. torchtpu's buffers are allocated by the PJRT
    plugin, which takes its memory limit when the client is created, not
    later; so the fraction is only recorded
    (:func:`get_per_process_memory_fraction` returns it) and a UserWarning
    says so.

    Raises:
        IndexError: no such device.
        TypeError: ``fraction`` is not a float (as torch.cuda).
        ValueError: ``fraction`` is outside [0, 1] (as torch.cuda).
    """
    idx = _checked_index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _memory_fractions[idx] = fraction
    warnings.warn(
        f"torch.tpu.set_per_process_memory_fraction({fraction}) is recorded but not enforced: "
        "the PJRT plugin allocates tpu memory and takes its limit when the client is created",
        UserWarning, stacklevel=2)


def get_per_process_memory_fraction(device=None):
    """The fraction last given to :func:`set_per_process_memory_fraction` for
    ``device`` (float), 1.0 if none (as torch.cuda). Not enforced.

    Raises:
        IndexError: no such device.
    """
    return _memory_fractions.get(_checked_index(device), 1.0)


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

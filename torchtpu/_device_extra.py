"""torch.cuda functions that scripts call on a device module and that have no
PJRT counterpart, or a trivial one (re-exported by torchtpu.device).

Each exists so that a script written for torch.cuda gets an answer or a clear
NotImplementedError naming the function, never AttributeError. (PyTorch's own
code probes the device module with ``hasattr`` in places, e.g.
``hasattr(torch.tpu, "_get_generator")`` for CUDA-graph-safe RNG; names that
would turn such a probe on are deliberately not defined here.)
"""

from torchtpu.device import _checked_index


def get_arch_list():
    """Device architectures built into this library: ``[]`` (list of str).

    torch.cuda lists the ``sm_XY`` targets its kernels were compiled for.
    torchtpu ships no device binaries: XLA compiles every program for the
    device at run time, so there is nothing to list (as torch.cuda's answer
    in a build without CUDA).
    """
    return []


def get_gencode_flags():
    """NVCC ``-gencode`` flags of the build: ``""`` (see :func:`get_arch_list`)."""
    return ""


def ipc_collect():
    """Nothing to do (returns None).

    torch.cuda's frees device memory that other processes held through CUDA
    IPC handles. tpu tensors are never shared through IPC handles (an
    Event's ``interprocess`` is not supported, and torch.multiprocessing
    does not share tpu storages), so no memory waits for such a release.
    """


def _no_device_telemetry(name, device):
    _checked_index(device)
    raise NotImplementedError(
        f"torch.tpu.{name}: PJRT reports no device telemetry (torch.cuda reads it from "
        "NVML / amdsmi); use the plugin vendor's tools, or torch.tpu.memory_stats() and "
        "torch.profiler for memory and device time")


def utilization(device=None):
    """Not available: raises NotImplementedError (torch.cuda's is the percent
    of time a kernel ran, from NVML; PJRT has no such counter).

    Raises:
        IndexError: no such device.
        NotImplementedError: otherwise, always.
    """
    _no_device_telemetry("utilization", device)


def memory_usage(device=None):
    """Not available: raises NotImplementedError (torch.cuda's is the percent
    of time device memory was read or written, from NVML).

    Raises:
        IndexError: no such device.
        NotImplementedError: otherwise, always.
    """
    _no_device_telemetry("memory_usage", device)


def temperature(device=None):
    """Not available: raises NotImplementedError (torch.cuda's is degrees
    Celsius, from NVML).

    Raises:
        IndexError: no such device.
        NotImplementedError: otherwise, always.
    """
    _no_device_telemetry("temperature", device)


def power_draw(device=None):
    """Not available: raises NotImplementedError (torch.cuda's is milliwatts,
    from NVML).

    Raises:
        IndexError: no such device.
        NotImplementedError: otherwise, always.
    """
    _no_device_telemetry("power_draw", device)


def clock_rate(device=None):
    """Not available: raises NotImplementedError (torch.cuda's is the SM clock
    in MHz, from NVML).

    Raises:
        IndexError: no such device.
        NotImplementedError: otherwise, always.
    """
    _no_device_telemetry("clock_rate", device)

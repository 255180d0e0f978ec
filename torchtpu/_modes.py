"""Eager execution modes: ``strict`` (default, asynchronous) and ``debug``."""

from torchtpu import _C

_MODES = ("strict", "debug", "fused")


def set_eager_mode(mode):
    """Selects how ATen ops execute on tpu.

    ``"strict"``: each op is compiled once per signature, enqueued, and the host
    waits only when a value is read. ``"debug"``: the same, but waits after every
    op, so an error is raised at the Python line that issued it. ``"fused"``:
    ops are recorded into one pending graph per device, compiled as ONE program
    (cached by structure, so a training loop compiles its step once) and run
    when a value is read, at ``torchtpu.sync()``, at an op with no lowering, or
    past ``TORCHTPU_FUSION_MAX_NODES`` IR nodes (default 4000: past that,
    XLA's compile time per node grows, see csrc/runtime/fusion.cc). A tensor
    overwritten in place inside a fused graph (optimizer updates, ``copy_``)
    donates its old buffer to the program when no other tensor shares it, so
    the step does not hold two copies (``TORCHTPU_DONATE=0`` turns this off).
    A line that keeps producing new graphs warns, and one whose graphs keep
    changing shape stops fusing and runs strict (see :mod:`torchtpu.config`).

    Raises:
        ValueError: ``mode`` is not one of ``"strict"``, ``"debug"``, ``"fused"``.
    """
    if mode not in _MODES:
        raise ValueError(f"eager mode must be one of {_MODES}, got {mode!r}")
    _C._set_eager_mode(mode)


def get_eager_mode():
    """The current eager mode: ``"strict"``, ``"debug"`` or ``"fused"``."""
    return _C._get_eager_mode()

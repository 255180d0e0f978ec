"""Settings of torchtpu read at run time; assign to change them.

``recompile_warn_threshold`` (int or None, default 8, env
``TORCHTPU_RECOMPILE_WARN``): in fused eager mode, the number of distinct graphs
compiled from one Python line (the line that issued a graph's first op) after
which every further new graph from that line warns with a
:class:`torchtpu.RecompileWarning`. The warning names the line and what differed
from the closest graph compiled before from it (shape, dtype, op sequence).
``None`` turns the guard off.

``recompile`` (``"warn"`` or ``"error"``, env ``TORCHTPU_RECOMPILE``): with
``"error"``, the graph past the threshold raises :class:`torchtpu.RecompileError`
(a ``RuntimeError``) instead of compiling; the values it would have computed
raise at their next read.
"""

import os


def _env_threshold():
    value = os.environ.get("TORCHTPU_RECOMPILE_WARN", "")
    if value == "":
        return 8
    if value.lower() == "none":
        return None
    try:
        n = int(value)
    except ValueError:
        raise ValueError(
            f"TORCHTPU_RECOMPILE_WARN must be a non-negative integer or 'none', got {value!r}"
        ) from None
    if n < 0:
        raise ValueError(f"TORCHTPU_RECOMPILE_WARN must be a non-negative integer, got {value!r}")
    return n


def _env_recompile():
    value = os.environ.get("TORCHTPU_RECOMPILE", "") or "warn"
    if value not in ("warn", "error"):
        raise ValueError(f"TORCHTPU_RECOMPILE must be 'warn' or 'error', got {value!r}")
    return value


recompile_warn_threshold = _env_threshold()
recompile = _env_recompile()

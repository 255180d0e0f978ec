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

``fused_storm_threshold`` (int or None, default None, env ``TORCHTPU_FUSED_STORM``):
in fused eager mode, once this many new graphs from one Python line (the line
that issued a graph's first op) have differed from an earlier graph from that
line by shape (a growing sequence, a varying batch), that line stops fusing:
a later graph starting there that is not compiled yet is not compiled; its ops
run one by one as strict mode's programs (cached per op, so a new shape
recompiles only the few small programs it reaches). Graphs already compiled
still run fused. One :class:`torchtpu.RecompileWarning` says so, naming the
line. Results are the same either way. ``None`` (the default) keeps compiling
every shape: measured here, switching costs more compiles than it saves on
small graphs (GPT-2 2-layer generate, 20 tokens: 218 programs with 4 vs 25
fused graphs with None; ten sizes of a 3-op graph: 30 vs 10), because per-op
programs are shared only across repeated layers of a large model.
:func:`torchtpu.metrics.reset` forgets which lines stopped fusing; the
``fused_strict_ops`` metric counts the ops run one by one this way.

``fused_flush_at_optimizer_step`` (bool, default True, env
``TORCHTPU_FUSED_STEP_FLUSH``, ``0`` turns it off): in fused eager mode, the
end of every ``optimizer.step()`` whose parameters are on tpu flushes the
pending graph without waiting, so a training step is one program even when
the loop reads no value, and the next step records while it runs (see
``torchtpu/_step_flush.py``).
"""

import os


def _env_threshold(name, default):
    value = os.environ.get(name, "")
    if value == "":
        return default
    if value.lower() == "none":
        return None
    try:
        n = int(value)
    except ValueError:
        raise ValueError(
            f"{name} must be a non-negative integer or 'none', got {value!r}"
        ) from None
    if n < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return n


def _env_recompile():
    value = os.environ.get("TORCHTPU_RECOMPILE", "") or "warn"
    if value not in ("warn", "error"):
        raise ValueError(f"TORCHTPU_RECOMPILE must be 'warn' or 'error', got {value!r}")
    return value


recompile_warn_threshold = _env_threshold("TORCHTPU_RECOMPILE_WARN", 8)
recompile = _env_recompile()
fused_storm_threshold = _env_threshold("TORCHTPU_FUSED_STORM", None)
fused_flush_at_optimizer_step = os.environ.get("TORCHTPU_FUSED_STEP_FLUSH", "1") != "0"

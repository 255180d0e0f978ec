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

``growing_buckets`` (None, ``"pow2"``, or a list of positive ints; default
``"pow2"``, env ``TORCHTPU_GROWING_BUCKETS``: ``pow2``, comma-separated sizes
such as ``64,128,256``, or ``none`` for off): bounded dynamism for tensors that
grow a few elements per step (Hugging Face ``generate``'s token ids and
attention mask, its default dynamic KV cache). When set, a new result of
``torch.cat`` (not its ``out=`` form) of at most four parts that appends (its
last part at most half as long as the longest other part: a token, a KV entry;
not a cat of similar parts such as autograd's backward of ``split`` or a
``torch.stack`` of a list) or extends such a result, and that
CPU lays out contiguously, gets a storage whose length along the cat dim is the
result's rounded up to a bucket: the next power of two, or the smallest listed
size at least as large (a length past the largest listed size is not rounded).
The tensor itself is the one CPU makes (same sizes, contiguous strides,
values); only ``untyped_storage().nbytes()`` is larger, by less than 2x with
``"pow2"``. ``torch.cat`` and ``scaled_dot_product_attention`` (without an
attention mask) read such a tensor as its whole bucket with the length a
run-time value, so their programs are keyed on the bucket, not the length: a KV
cache or token list that grows by one reuses a few programs per bucket instead
of compiling at every length, in strict and fused mode (fused graphs that
contain them are reused likewise). Results are the same values as without;
attention sums its softmax over the bucket (the padding contributes exact
zeros), which can change the last bits of a float result. Assigning validates:
a value that is not None, ``"pow2"`` or a non-empty list of positive ints
raises ``TypeError`` or ``ValueError``.

``fused_flush_at_optimizer_step`` (bool, default True, env
``TORCHTPU_FUSED_STEP_FLUSH``, ``0`` turns it off): in fused eager mode, the
end of every ``optimizer.step()`` whose parameters are on tpu flushes the
pending graph without waiting, so a training step is one program even when
the loop reads no value, and the next step records while it runs (see
``torchtpu/_step_flush.py``).
"""

import os
import sys
import types

from torchtpu import _C


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
    return _C._setting_choice("TORCHTPU_RECOMPILE", "warn", ["warn", "error"])


recompile_warn_threshold = _env_threshold("TORCHTPU_RECOMPILE_WARN", 8)
recompile = _env_recompile()
fused_storm_threshold = _env_threshold("TORCHTPU_FUSED_STORM", None)
fused_flush_at_optimizer_step = _C._setting_flag("TORCHTPU_FUSED_STEP_FLUSH", True)


def _growing_buckets(value):
    """Validates a ``growing_buckets`` value, hands it to the runtime and returns
    it normalised (None, "pow2" or a sorted tuple of ints)."""
    if value is None:
        _C._set_growing_buckets(False, [])
        return None
    if isinstance(value, str):
        if value != "pow2":
            raise ValueError(
                f"growing_buckets must be None, 'pow2' or a list of sizes, got {value!r}"
            )
        _C._set_growing_buckets(True, [])
        return value
    if not isinstance(value, (list, tuple)) or not value:
        raise TypeError(
            f"growing_buckets must be None, 'pow2' or a non-empty list of ints, got {value!r}"
        )
    for size in value:
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError(f"growing_buckets sizes must be ints, got {size!r}")
        if size <= 0:
            raise ValueError(f"growing_buckets sizes must be positive, got {size}")
    sizes = tuple(sorted(value))
    _C._set_growing_buckets(False, list(sizes))
    return sizes


def _env_growing_buckets():
    # On by default: a cold GPT-2 generate(20) compiles 82 strict programs
    # instead of 147 and comes back about 2x sooner (bench/bench_cold_start.py).
    value = os.environ.get("TORCHTPU_GROWING_BUCKETS", "pow2").strip()
    if value.lower() in ("", "none"):
        return None
    if value.lower() == "pow2":
        return "pow2"
    try:
        return [int(part) for part in value.split(",")]
    except ValueError:
        raise ValueError(
            f"must be 'pow2' or comma-separated sizes, got {value!r}"
        ) from None


class _Config(types.ModuleType):
    """This module's type: assigning ``growing_buckets`` validates the value and
    hands it to the runtime."""

    def __setattr__(self, name, value):
        if name == "growing_buckets":
            value = _growing_buckets(value)
        super().__setattr__(name, value)

    def __delattr__(self, name):
        if name == "growing_buckets":
            _growing_buckets(None)
        super().__delattr__(name)


sys.modules[__name__].__class__ = _Config
try:
    growing_buckets = _growing_buckets(_env_growing_buckets())
except (TypeError, ValueError) as e:
    raise ValueError(f"TORCHTPU_GROWING_BUCKETS: {e}") from None

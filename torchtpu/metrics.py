"""Counters of the tpu runtime, for finding recompiles, transfers and fallbacks.

``metrics()`` returns a dict: ``compiles`` (XLA compilations), ``compile_seconds``
(total wall seconds compiling), ``executes`` (programs run), ``cache_hits`` /
``cache_misses`` (in-memory program cache), ``persistent_hits`` /
``persistent_misses`` / ``persistent_rejected`` (on-disk cache, consulted on an
in-memory miss; see :mod:`torchtpu.cache`), ``persistent_load_seconds`` (wall
seconds reading and deserializing hits), ``bytes_to_device`` /
``bytes_to_host`` (bytes copied by transfers), ``donations`` / ``donated_bytes``
(fused mode: buffers of tensors overwritten in place whose memory a program
reused for the new value, see :func:`torchtpu.set_eager_mode`),
``fused_flushes`` (fused mode: pending graphs run as programs),
``spmd_programs`` / ``spmd_executes`` (programs over a mesh that
``torchtpu.spmd`` made and ran, each run one execute over all the mesh's
devices, also counted in ``compiles`` and ``executes``),
``fused_strict_ops`` (fused mode: ops run one by one as strict programs in place
of compiling a new graph from a line that stopped fusing, see
``torchtpu.config.fused_storm_threshold``),
``dispatch_cache_hits`` (calls of add, sub, mul, div and a few unary ops
that were not lowered again: in strict mode they ran their program again, also
counted in ``cache_hits``; in fused mode their recorded graph was appended
again; ``TORCHTPU_DISPATCH_CACHE=0`` turns this off), ``deferred_ops`` (strict
mode: ops recorded while their programs, or their inputs', compiled in the
background, see :func:`torchtpu.set_eager_mode`), ``background_compiles_peak``
(the most of those compiles that ran at once), ``cached_programs``.
"""

import time

from torchtpu import _C


# Counters kept in Python (torchtpu.spmd's), merged into metrics().
_counts = {"spmd_programs": 0, "spmd_executes": 0}


def count(name, n=1):
    """Adds ``n`` to the Python-side counter ``name`` (one of ``_counts``)."""
    _counts[name] += n


def metrics():
    """Runtime counters since start or the last :func:`reset` (see module doc)."""
    return {**dict(_C._metrics()), **_counts}


def fallback_counts():
    """Per-op counts of CPU fallbacks, e.g. ``{"aten::cumsum": 3}``."""
    return dict(_C._fallback_counts())


def total_fallbacks():
    """Number of CPU fallback calls since the last :func:`reset`."""
    return sum(_C._fallback_counts().values())


def recompile_counts():
    """Fused mode: distinct graphs compiled per start line, ``{"train.py:42": 3}``.

    The start line is the user's line that issued a graph's first op; see
    :mod:`torchtpu.config` for the warning these counts drive.
    """
    return dict(_C._recompile_counts())


def reset():
    """Zeroes every counter, the fallback counts and the recompile counts, and
    forgets which lines stopped fusing (they fuse again).

    First waits (interruptibly) for the compiles still running in the
    background (strict mode's, see :func:`torchtpu.set_eager_mode`), so that
    a compile started before the reset is counted before it."""
    if _C._is_initialized():
        while _C._compiles_running():
            time.sleep(0.002)
    _C._reset_metrics()
    _C._reset_recompile_counts()
    for name in _counts:
        _counts[name] = 0


def lowered_ops():
    """Names of the ATen ops with a tpu lowering (functional overloads)."""
    return sorted(_C._lowered_ops())

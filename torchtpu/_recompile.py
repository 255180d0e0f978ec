"""The Python side of fused mode's recompile guard (csrc/runtime/fusion_guard.h).

The runtime calls :func:`user_line` when it records the first op of a pending
graph, and :func:`on_new_graph` for every graph that is not in the program
cache, just before it compiles.
"""

import functools
import os
import sys
import sysconfig
import threading
import warnings

import torch

from torchtpu import _C, config


class RecompileWarning(UserWarning):
    """A Python line keeps producing new fused graphs (see torchtpu.config)."""

    __module__ = "torchtpu"


class RecompileError(RuntimeError):
    """Raised instead of RecompileWarning when ``TORCHTPU_RECOMPILE=error``."""

    __module__ = "torchtpu"


def _dir(path):
    return os.path.dirname(os.path.abspath(path)) + os.sep


_PACKAGE = _dir(__file__)
_EXAMPLES = os.path.join(_PACKAGE, "examples") + os.sep  # user code, shipped with us
_TORCH = _dir(torch.__file__)
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
_SITE = tuple(os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib"))


@functools.lru_cache(maxsize=4096)  # called per frame at every graph start
def _internal(filename):
    """True for frames of torch, torchtpu and the standard library: the graph's
    start is reported at the user's line that called into them."""
    if filename.startswith(("<frozen", "<eval_with_key")):  # FX generated code too
        return True
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path.startswith(_PACKAGE):
        return not path.startswith(_EXAMPLES)
    if path.startswith(_TORCH):
        return True
    return path.startswith(_STDLIB) and not path.startswith(_SITE)


def user_line():
    """``"file:line"`` of the innermost frame outside torch, torchtpu and the
    standard library; ``""`` if there is none.

    An op recorded on one of autograd's device threads (inside ``backward()``)
    has no Python frames of its own: the main thread, which waits in
    ``backward()``, is searched instead.
    """
    frame = sys._getframe(0).f_back
    if frame is None:
        frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        if not _internal(frame.f_code.co_filename):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def on_new_graph(start, count, difference, shape_changes=0):
    """Called before a new fused graph compiles. At
    ``config.fused_storm_threshold`` shape changes, marks ``start`` as a line
    that stops fusing (one warning; this graph still compiles, later new ones
    from there run op by op); otherwise warns (or raises) once ``count``
    distinct graphs started at ``start`` exceed ``config.recompile_warn_threshold``."""
    compared = (
        f"Against the closest earlier graph from that line: {difference}."
        if difference
        else "It is the first graph from that line."
    )
    storm = config.fused_storm_threshold
    if storm is not None and shape_changes >= storm and _C._stop_fusing(start):
        _warn(start, (
            f"torchtpu fused mode: the code starting at {start} keeps changing shape: its "
            f"distinct graph #{count}, {shape_changes} of them new shapes "
            f"(torchtpu.config.fused_storm_threshold = {storm}). {compared} From now on "
            f"it stops fusing: a graph starting there that is not compiled yet is not "
            f"compiled, its ops run as strict per-op programs (same results; small compiles "
            f"for the ops whose shapes are new; slower steps); shapes already compiled still "
            f"run fused. For the fused speed, "
            f"keep shapes static (pad to a fixed length, e.g. cache_implementation=\"static\" "
            f"in Hugging Face generate) or bucket them (pad to a few sizes, such as powers "
            f"of two); set the threshold to None to keep compiling every shape."), once=False)
        return
    threshold = config.recompile_warn_threshold
    if threshold is None or count <= threshold:
        return
    message = (
        f"torchtpu fused mode: the code starting at {start} produced its distinct graph "
        f"#{count} (torchtpu.config.recompile_warn_threshold = {threshold}). {compared} "
        f"Each new graph costs an XLA compile: keep shapes, dtypes and the op sequence the "
        f"same between steps (pad or bucket variable batch sizes), or raise the threshold."
    )
    if config.recompile == "error":
        raise RecompileError(message)
    _warn(start, message)


def _in_library(filename):
    path = os.path.abspath(filename)
    return path.startswith(_SITE) and not path.startswith(_PACKAGE)


def _caller_outside_libraries():
    """``"file:line"`` of the innermost frame of the running thread outside
    torch, torchtpu, the standard library and installed packages; ``""`` if none."""
    frame = sys._getframe(1)
    if threading.current_thread() is not threading.main_thread() and frame is not None:
        frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        name = frame.f_code.co_filename
        if not _internal(name) and not _in_library(name):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


_warned_library_calls = set()


def _warn(start, message, once=True):
    filename, _, lineno = start.rpartition(":")
    if filename and _in_library(filename):
        # A line of an installed library (transformers' masking_utils during
        # generate): the user can act only where their code calls it, so the
        # warning points there, and (`once`) only the first time for that
        # library line and calling line.
        caller = _caller_outside_libraries()
        if once and (caller, start) in _warned_library_calls:
            return
        _warned_library_calls.add((caller, start))
        message += (f" The line is in an installed package; it was reached from "
                    f"{caller or 'code outside any file'}, where the shapes it gets can be "
                    f"made static (e.g. cache_implementation=\"static\" for generate) or "
                    f"bucketed (torchtpu.config.growing_buckets).")
        filename, _, lineno = caller.rpartition(":")
    if filename and lineno.isdigit():
        warnings.warn_explicit(message, RecompileWarning, filename, int(lineno))
    else:
        warnings.warn(message, RecompileWarning, stacklevel=3)

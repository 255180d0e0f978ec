"""Eager execution modes: ``strict`` (default, asynchronous) and ``debug``."""

from torchtpu import _C

_MODES = ("strict", "debug", "fused")


def set_eager_mode(mode, *, hybrid=None, background_compile=None):
    """Selects how ATen ops execute on tpu.

    ``"strict"``: each op is compiled once per signature, enqueued, and the host
    waits only when a value is read; a multi-tensor ``torch._foreach_*`` call
    (the optimizers' default step) is one program, as on CUDA one kernel. ``"debug"``: the same, but
    waits after every op, so an error is raised at the Python line that issued it. ``"fused"``: ops
    are recorded into one pending graph per device, compiled as ONE program (cached by structure, so
    a training loop compiles its step once) and run when a value is read, at ``torchtpu.sync()``, at
    an op with no lowering, at the end of ``optimizer.step()`` (without waiting: the next step
    records while this one runs; ``torchtpu.config.fused_flush_at_optimizer_step``), or past
    ``TORCHTPU_FUSION_MAX_NODES`` IR nodes (default 4000: past that, XLA's compile time per node
    grows, see csrc/runtime/fusion.cc). A tensor overwritten in place inside a fused graph
    (optimizer updates, ``copy_``) donates its old buffer to the program when no other tensor shares
    it, so the step does not hold two copies (``TORCHTPU_DONATE=0`` turns this off). A line that
    keeps producing new graphs warns, and one whose graphs keep changing shape stops fusing and runs
    strict (see :mod:`torchtpu.config`).

    ``hybrid`` (bool, or None to leave it as it is; at start
    ``TORCHTPU_FUSED_HYBRID=1`` turns it on, else off): in fused mode, a graph
    whose program is not compiled yet does not wait for XLA when every op's
    own program is at hand (in memory or in the persistent compile cache, as
    after a strict run of the same code; not a foreach optimizer step's ops,
    which strict mode runs as one program per call): its fused program compiles on a
    background thread while its ops run one by one as strict mode's programs,
    and the same graph runs as one program once that compile is done. When
    some op's program is not at hand the graph compiles as usual (measured,
    a GPT step's ~150 small compiles cost more than its one fused compile:
    see csrc/runtime/fusion.h). A Python line whose graph was found compiled
    records without per-op programs again. Values equal strict mode's while
    a graph runs op by op and fused mode's once it runs fused (fused results
    equal strict's up to the last bits). ``torch.compile`` graphs are always
    one program.

    ``background_compile`` (bool, or None to leave it as it is; on at start
    unless ``TORCHTPU_BACKGROUND_COMPILE=0``: measured, a cold GPT-2
    ``generate`` comes back 1.5-1.7x sooner, see bench/README.md): in strict
    mode, an op whose program is not loaded yet does not wait for XLA: its
    program starts compiling on a pool of threads
    (``TORCHTPU_COMPILE_THREADS``, default the cores, 2 to 8) and the op is
    recorded, as is every op that reads a value
    such an op computes, so the host keeps dispatching and distinct programs
    compile at once. The recorded ops run, each as its own strict program and
    in issue order, at the first read of one of their values (``.cpu()``,
    ``.item()``, printing), ``torchtpu.sync()``, ``torch.tpu.synchronize()``,
    an event's ``record()`` or a ``torch._foreach_*`` call; each result is
    freed after its last reader, as in strict mode. Ctrl-C while such a read
    waits for their compiles raises KeyboardInterrupt: a tensor whose last
    recorded write ran keeps its value; one that an op not run yet would
    have written (an in-place update included) is lost, as its value can no
    longer be made (a later read of it raises).
    Results are strict mode's; what changes: an error of such an op (a
    program XLA rejects, a failed execution) is raised at the next read, as
    in fused mode, and only the values computed from that op are lost; one
    never read is reported at exit by a warning, as an asynchronous error
    is (the exit status stays the script's). ``metrics()["deferred_ops"]``
    counts the ops recorded this way. An op whose results take more than
    256 MiB runs at the op (its recorded inputs first), so running out of
    device memory raises there. A script ended by an exception or Ctrl-C
    does not wait at exit for compiles not started yet. Debug mode never
    defers.

    Raises:
        ValueError: ``mode`` is not one of ``"strict"``, ``"debug"``, ``"fused"``.
        TypeError: ``hybrid`` or ``background_compile`` is not a bool or None.
    """
    if mode not in _MODES:
        raise ValueError(f"eager mode must be one of {_MODES}, got {mode!r}")
    for name, value in (("hybrid", hybrid), ("background_compile", background_compile)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool or None, got {type(value).__name__}")
    _C._set_eager_mode(mode)
    if hybrid is not None:
        _C._set_fused_hybrid(hybrid)
    if background_compile is not None:
        _C._set_background_compile(background_compile)


def fused_hybrid():
    """Whether fused mode runs new graphs op by op while they compile (see
    :func:`set_eager_mode`'s ``hybrid``)."""
    return _C._get_fused_hybrid()


def background_compile():
    """Whether strict mode compiles new programs in the background (see
    :func:`set_eager_mode`'s ``background_compile``)."""
    return _C._get_background_compile()


def get_eager_mode():
    """The current eager mode: ``"strict"``, ``"debug"`` or ``"fused"``."""
    return _C._get_eager_mode()

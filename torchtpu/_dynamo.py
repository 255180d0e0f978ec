"""The ``torch.compile`` backend ``"tpu"`` (first cut of issue 5).

    model = torch.compile(model, backend="tpu")

Dynamo captures the Python code into FX graphs; AOTAutograd (with PyTorch's core
ATen decompositions, :func:`torch._decomp.core_aten_decompositions`) turns each
into a functional ATen forward graph and, when gradients are needed, a backward
graph. Each of those graphs is run by :class:`FusedGraph`. Its first call issues
the ATen nodes through the ordinary tpu kernels (the same lowering table as eager)
in fused mode, so the whole graph is recorded into one IR graph and compiled as
ONE XLA program (cached by structure in memory and on disk), while the runtime
captures that program with a recipe for its arguments
(csrc/aten/compiled_call.h). Every later call with inputs of the same layout is a
replay: one PJRT execute plus argument marshalling, no per-node work. Measured
with ``bench/bench_compile.py``: a replayed one-add graph costs about 0-2 us over
the raw execute of its program; Dynamo's guards and AOTAutograd's runtime
wrapper add about 30 us more per call on this 2-core machine.

Semantics, all inherited from eager tpu execution:

- A node without a tpu lowering runs through the CPU fallback. The first call
  finds such nodes (they cut the fused graph) and the graph is split around
  them: each runs eagerly, the parts between them are captured programs of
  their own; a warning names the ops. ``TORCHTPU_FALLBACK=error`` raises
  ``RuntimeError`` at the call instead.
- Input mutations that AOTAutograd can keep in the graph (data written under
  no_grad or to inputs that need no gradient: a static KV cache's
  ``index_copy_``, batch-norm running stats) stay in it as ``copy_`` nodes
  (``keep_inference_input_mutations``, as Inductor asks): the captured program
  writes the input, in place where its buffer can be donated, instead of
  AOTAutograd's wrapper copying a new value into it after the graph, one strict
  program per input and call. Other input mutations are applied by that wrapper.
- Random ops (dropout) draw from the tpu generator at each call: results differ
  call to call and repeat after ``torch.manual_seed``, as in eager.
- A new input shape makes Dynamo recompile (a new FX graph), and fused mode
  compiles a new XLA program for it. With a symbolic shape (``mark_dynamic``,
  or Dynamo's automatic dynamic shapes on the second size) one FX graph serves
  every size and fused mode compiles one program per concrete size: exact,
  never padded.
- A tpu input that views part of a larger storage is copied first (see
  :func:`_whole_storage`), so slicing batches out of one tensor does not
  compile the graph again for every offset.
- If the caller is already in fused mode the graph joins the caller's pending
  graph instead of being flushed at its end (fewer, larger programs).

The backend is registered under the entry point group ``torch_dynamo_backends``
(so ``torch._dynamo.list_backends()`` lists it without importing torchtpu) and,
when that entry point is not installed, by importing this module (see
:func:`register`). Dynamo's device interface for ``"tpu"`` is torchtpu's
(:mod:`torchtpu._dynamo_device`), registered when Dynamo loads.
"""

import warnings

import torch
from torch._decomp import core_aten_decompositions
from torch._dynamo.backends import registry
from torch._dynamo.backends.common import aot_autograd

from torchtpu import _C

BACKEND_NAME = "tpu"


class FusedGraph:
    """One AOTAutograd graph (forward or backward) run as one fused tpu program.

    Called with AOTAutograd's boxed convention (what
    :func:`functorch.compile.make_boxed_func` produces, spelled out here):
    one list of arguments (real tensors, SymInts, Python scalars), returns what
    the graph returns (a tuple/list of tensors).

    The first call runs the graph's nodes in fused mode and captures the program
    (``torchtpu._C._capture_*``, see csrc/aten/compiled_call.h); later calls
    whose inputs have the same dtypes, sizes, strides, storage layout and
    integer values replay it: one PJRT execute, no per-node work. If a node cut
    the fused graph at that first call (it has no tpu lowering and ran through
    the CPU fallback, or it read a value on the host), the graph is split around
    such nodes (:func:`split_graph`, warned once, naming the ops): they run
    eagerly, and each part between them is a FusedGraph of its own. A graph that
    cannot be captured for another reason (a float or CPU-tensor input, a
    non-tensor output, a written input) keeps running node by node in fused mode,
    with the same results.

    Raises:
        RuntimeError: an op failed on tpu, or had no lowering while
            ``TORCHTPU_FALLBACK=error``.
    """

    # Captures kept per graph (one per distinct input layout); past this the
    # graph runs node by node, as a new layout per call would capture forever.
    MAX_CAPTURES = 8

    def __init__(self, gm, example_inputs=None):
        self.gm = gm
        self.written = _written_inputs(gm)  # positions of the inputs the graph writes
        self.tpu_inputs = None  # set by _set_layout (from examples or the first call)
        if example_inputs is not None:
            self._set_layout(example_inputs)
        self.split = None       # the graph split around cutting nodes, once found
        self.probed = False     # whether a first call looked for cutting nodes
        self.captures = {}      # values of the int inputs -> [_C._CompiledCall]
        self.capture_failures = 0
        # On the instance, not the class: AOTAutograd wraps the backward in
        # torch._dynamo.disable, whose functools.wraps copies only __dict__.
        self._boxed_call = True

    def _set_layout(self, args):
        # Positions of the tpu tensor inputs (fixed per graph: Dynamo guards on
        # device), checked for partial views at each call, and of the integer
        # inputs (SymInts: sizes under dynamic shapes), whose values select the
        # capture: a program is exact for them.
        self.tpu_inputs = tuple(i for i, a in enumerate(args)
                                if isinstance(a, torch.Tensor) and a.device.type == "tpu")
        self.int_inputs = tuple(i for i, a in enumerate(args) if isinstance(a, (int, torch.SymInt)))
        self.capturable = len(self.tpu_inputs) + len(self.int_inputs) == len(args)

    def all_captures(self):
        """Every capture of this graph (a list of ``_C._CompiledCall``)."""
        return [c for group in self.captures.values() for c in group]

    def __call__(self, args):
        previous = _C._get_eager_mode()
        if previous == "fused":
            return self.gm(*args)
        if self.split is not None:
            return list(self.split(*args))
        if self.tpu_inputs is None:
            self._set_layout(args)
        if not self.capturable:
            return self._run(list(args), None)
        key = tuple(args[i] for i in self.int_inputs)
        tensors = [args[i] for i in self.tpu_inputs] if self.int_inputs else args
        captures = self.captures.setdefault(key, [])
        if captures:
            out = _C._compiled_replay(captures, tensors)
            if out is not None:
                return out
        args = list(args)
        for i in self.tpu_inputs:
            if i not in self.written:  # (a copy would take the write)
                args[i] = _whole_storage(args[i])
        tensors = [args[i] for i in self.tpu_inputs]
        if captures:
            out = _C._compiled_replay(captures, tensors)
            if out is not None:
                return out
        capture = (sum(map(len, self.captures.values())) < self.MAX_CAPTURES
                   and self.capture_failures < 2)
        return self._run(args, tensors if capture else None, captures)

    def _run(self, args, tensors, captures=None):
        """Runs the nodes in fused mode; captures the program when ``tensors``
        (the tpu inputs) is given, appending it to ``captures``."""
        previous = _C._get_eager_mode()
        # Switching flushes: first whatever the caller's mode left pending
        # (the copies above), then, on the way back, this graph's recorded ops
        # as one program, enqueued without waiting for it.
        _C._set_eager_mode("fused")
        try:
            if tensors is None:
                return self.gm(*args)
            _C._capture_begin(tensors, writes=bool(self.written))
            finder = None
            try:
                if self.probed:
                    out = self.gm(*args)
                else:
                    finder = _CutFinder(self.gm)
                    out = finder.run(*args)
                    self.probed = True
            except BaseException:
                _C._capture_abort(tensors)
                raise
            outs = list(out)
            if finder is not None and finder.cuts:
                _C._capture_abort(tensors)
                self.split = split_graph(self.gm, finder.cuts)
                return outs
            call = None
            if all(o is None or isinstance(o, torch.Tensor) for o in outs):
                call = _C._capture_end(tensors, outs)
            else:
                _C._capture_abort(tensors)
            if call is None:
                self.capture_failures += 1
            else:
                captures.append(call)
            return outs
        finally:
            _C._set_eager_mode(previous)


def _written_inputs(gm):
    """Positions of ``gm``'s placeholders that an op of the graph writes (the
    ``copy_`` nodes AOTAutograd keeps for input mutations)."""
    written = set()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, p in enumerate(placeholders):
        for user in p.users:
            schema = getattr(user.target, "_schema", None)
            if schema is None or user.op != "call_function":
                continue
            for arg, value in zip(schema.arguments, user.args):
                if value is p and arg.alias_info is not None and arg.alias_info.is_write:
                    written.add(i)
    return written


def _cuts_so_far():
    """Fused graphs run plus CPU fallbacks taken: a node that moves it cut the graph."""
    return _C._metrics()["fused_flushes"] + sum(_C._fallback_counts().values())


class _CutFinder(torch.fx.Interpreter):
    """Runs a graph node by node (in fused mode), noting the nodes that cut it."""

    def __init__(self, gm):
        super().__init__(gm)
        self.cuts = []

    def run_node(self, n):
        if n.op != "call_function":
            return super().run_node(n)
        before = _cuts_so_far()
        out = super().run_node(n)
        if _cuts_so_far() != before:
            self.cuts.append(n)
        return out


class _Segment(torch.nn.Module):
    """A part of a split graph between cutting nodes, run as a :class:`FusedGraph`."""

    def __init__(self, sub):
        super().__init__()
        out = next(n for n in reversed(sub.graph.nodes) if n.op == "output")
        self.single = not isinstance(out.args[0], (tuple, list))
        if self.single:  # FusedGraph returns a list: make the part return one
            out.args = ((out.args[0],),)
            sub.recompile()
        self.fused = FusedGraph(sub)

    def forward(self, *args):
        outs = self.fused(list(args))
        return outs[0] if self.single else tuple(outs)


def split_graph(gm, cuts):
    """``gm`` split around the nodes ``cuts`` (each alone in its own part, run
    eagerly); every other part becomes a :class:`_Segment`. Warns once per split,
    naming the ops, unless every cut is a synchronize the code asked for.
    """
    from torch.fx.passes.split_module import split_module

    cut = set(cuts)
    part, parts, alone = 0, {}, set()
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr", "output"):
            continue
        if n in cut:
            part += 1
            alone.add(part)
            parts[n] = part
            part += 1
        else:
            parts[n] = part
    split = split_module(gm, None, lambda n: parts[n], keep_original_order=True)
    segments = 0
    for name, sub in list(split.named_children()):
        if int(name.rsplit("_", 1)[1]) not in alone:
            setattr(split, name, _Segment(sub))
            segments += 1
    unasked = [n for n in cuts if not _is_synchronize(gm, n)]
    if unasked:
        ops = ", ".join(sorted({str(n.target) for n in unasked}))
        warnings.warn(f"tpu: torch.compile graph split around {ops} (no tpu lowering, or a "
                      f"value read on the host): runs eagerly between {segments} tpu programs "
                      "per call", stacklevel=2)
    return split


def _is_synchronize(gm, n):
    """Whether ``n`` is a synchronize the traced code called (``torch.tpu.synchronize``,
    a stream's or event's: Dynamo's ``control_deps`` over a ``streams::`` op). It
    cuts the graph as it must, so no warning names it."""
    if n.target is not torch.ops.higher_order.control_deps or len(n.args) < 2:
        return False
    sub = getattr(gm, getattr(n.args[1], "target", ""), None)
    return sub is not None and any(
        getattr(m.target, "namespace", None) == "streams"
        for m in sub.graph.nodes if m.op == "call_function")


def _whole_storage(t):
    """``t``, or a copy of it when it is a view of part of a larger storage.

    Fused mode wires a view into the program through its storage offset and
    size, so a batch sliced from a bigger tensor at a new offset every step
    (``xs[i * b:(i + 1) * b]``) would compile a new program for the whole graph
    at each step. Copying it first in the caller's (per-op) mode compiles one
    small copy per offset instead, and the graph's program is reused. Inputs the
    graph writes are never copied (the write must reach them).
    """
    if t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size():
        return t
    return t.clone()


def compile_graph(gm, example_inputs):
    """AOTAutograd's ``fw_compiler``/``bw_compiler``: wraps ``gm`` in :class:`FusedGraph`.

    ``example_inputs`` are FakeTensors; nothing is compiled here, fused mode
    compiles the XLA program at the first real call.
    """
    return FusedGraph(gm, example_inputs)


_aot_backend = aot_autograd(
    fw_compiler=compile_graph,
    bw_compiler=compile_graph,
    inference_compiler=compile_graph,
    decompositions=core_aten_decompositions(),
    keep_inference_input_mutations=True,
)


def tpu_backend(gm, example_inputs, mode=None, options=None):
    """The Dynamo backend: ``torch.compile(model, backend="tpu")`` (or ``backend=tpu_backend``).

    ``mode`` and ``options`` are what ``torch.compile(mode=..., options=...)``
    passes on; both are accepted and have no effect: every captured tpu graph
    already replays as one PJRT execute (what ``"reduce-overhead"`` asks of CUDA
    graphs), and the options are Inductor's settings, which this backend does
    not use.
    """
    del mode, options
    return _aot_backend(gm, example_inputs)


def register():
    """Registers :data:`tpu_backend` as ``"tpu"`` when no installed entry point does.

    With the package installed, the registry finds the ``torch_dynamo_backends``
    entry point and loads this module itself on the first lookup of ``"tpu"``;
    registering here as well would make that lookup fail with "duplicate name".
    Without it (a source tree on ``sys.path``), this registration is the only one.
    """
    registry._discover_entrypoint_backends()  # cached; fills registry._BACKENDS
    if BACKEND_NAME in registry._BACKENDS or BACKEND_NAME in registry._COMPILER_FNS:
        return
    registry.register_backend(tpu_backend, name=BACKEND_NAME)


register()

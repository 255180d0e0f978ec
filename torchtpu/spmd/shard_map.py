"""``torchtpu.spmd.shard_map``: a function of one device's blocks, run on
every device of a mesh as ONE program whose collectives are compiled in
(JAX's ``shard_map``, PyTorch's ``local_map``; docs/spmd.md).

    mesh = spmd.Mesh([0, 1, 2, 3], (2, 2), ("data", "model"))

    def step(x, w):                       # x: [2, 16] and w: [16, 8] per device
        y = x @ w
        return funcol.all_reduce(y, "sum", mesh.group("model"))

    f = spmd.shard_map(step, mesh, in_specs=(("data", "model"), ("model", None)),
                       out_specs=("data", None))
    y = f(x, w)                           # a ShardedTensor of [4, 8]

How a program is made, once per input layout: the function runs once in
fused mode on the first device's blocks under the capture ``torch.compile``
uses (a collective is a stand-in of its result type there,
torchtpu/spmd/collectives.py); the captured program, with each stand-in's
body replaced by its StableHLO collective, is compiled as ``mesh.size``
replicas, one per device, replica ``r`` on ``mesh.device_ids[r]``. Each
call is one PJRT execute over the mesh: every device passes its blocks'
own buffers and gets its blocks of the results.
"""

import math

import torch

from torchtpu import _C, metrics
from torchtpu.spmd import collectives
from torchtpu.spmd.program import _capture, _type
from torchtpu.spmd.tensor import ShardedTensor, _normalize_spec, _own, mark_sharding

__all__ = ["shard_map"]

collectives.register()


def _specs(specs, count, what, name):
    """One spec per tensor; ValueError for another count."""
    specs = list(specs)
    if len(specs) != count:
        raise ValueError(f"{name}: {len(specs)} {what} for {count} tensors")
    return specs


def _unwait(t):
    """A functional collective's result outside tracing is an
    AsyncCollectiveTensor; the program's output is its value."""
    wait = getattr(t, "wait", None)
    return wait() if callable(wait) and type(t) is not torch.Tensor else t


def _replace_function(text, symbol, body):
    """``text`` with private function @symbol's body replaced by ``body``
    (lines from ``%x``, its argument, to ``%y``, its result)."""
    lines = text.split("\n")
    start = next((i for i, s in enumerate(lines) if f"@{symbol}(" in s and "func.func" in s),
                 None)
    if start is None:
        raise RuntimeError(f"shard_map: collective {symbol} is missing from the program")
    depth, end = 0, start
    for end in range(start, len(lines)):
        depth += lines[end].count("{") - lines[end].count("}")
        if depth == 0 and end > start:
            break
    head = lines[start]
    arg = head.split("(", 1)[1].split(":", 1)[0].strip()
    result_type = head.rsplit("->", 1)[1].rsplit("{", 1)[0].strip().strip("()").strip()
    new = [head]
    body = body.replace("(%x)", f"({arg})")
    new += body.rstrip("\n").split("\n")
    new += [f"    return %y : {result_type}", "  }"]
    return "\n".join(lines[:start] + new + lines[end + 1:])


class _Program:
    """One layout's program: capture, the replicated module, its runs."""

    def __init__(self, fn, args, mesh, out_specs, name):
        self.mesh, self.name = mesh, name
        # Copies: the capture runs the function on them, and a function that
        # writes its input (refused below) must not change the caller's block.
        local = [a._shards[0].clone() for a in args]
        with collectives.tracing(mesh, name) as trace:
            _, self.single, call = _capture(
                lambda *xs: _outputs(fn(*xs)), local, name)
        text, _, params, prog_outs, call_outs, self.check_outputs = _C._compiled_describe(call)
        self.call = call
        self.call_outs = call_outs
        self.out_dtypes = [d for d, _ in prog_outs]
        specs = _specs([out_specs] if self.single else out_specs, len(call_outs),
                       "out_specs", name)
        self.out_axes = [_normalize_spec(s, len(c[3]), mesh, f"{name}: out_specs")
                         for s, c in zip(specs, call_outs)]
        self.sources = []
        for source, index, _dtype, dims, const in params:
            if source == "rng":
                raise NotImplementedError(f"{name}: random ops are not yet run over a mesh")
            if source == "input":
                if list(dims) != [args[index]._shards[0].numel()]:
                    raise RuntimeError(f"{name}: input {index} read as {dims}, not whole")
                self.sources.append(("input", index))
            else:
                host = const.cpu()
                self.sources.append(
                    ("constant", [host.to(torch.device("tpu", d)) for d in mesh.device_ids]))
        for symbol, body in trace.bodies.items():
            text = _replace_function(text, symbol, body)
        self.text = _replicated_module(_flat_params(text, params), mesh.size)
        metrics.count("spmd_programs")

    def run(self, args):
        shards = [args[v]._shards if s == "input" else v for s, v in self.sources]
        outs = _C._spmd_run(self.text, self.mesh.device_ids, shards, self.out_dtypes,
                            self.name)
        metrics.count("spmd_executes")
        if self.check_outputs:  # each device's blocks checked (an index range)
            for d in range(self.mesh.size):
                _C._compiled_defer_checks(self.call, [o[d] for o in outs])
        result = []
        for (frm, index, dtype, sizes, strides, offset), axes in zip(self.call_outs,
                                                                     self.out_axes):
            if frm == "none":
                result.append(None)
                continue
            if frm == "program":
                blocks = [_own(torch.as_strided(o, sizes, strides, offset)) for o in outs[index]]
            elif frm == "input":
                blocks = [_own(torch.as_strided(s, sizes, strides, offset))
                          for s in args[index]._shards]
            else:
                blocks = [torch.empty(sizes, dtype=dtype, device=torch.device("tpu", d))
                          for d in self.mesh.device_ids]
            shape = [s * math.prod(self.mesh.shape[a] for a in ax) for s, ax in zip(sizes, axes)]
            result.append(ShardedTensor(blocks, self.mesh, axes, shape, dtype))
        return result[0] if self.single else tuple(result)


def _outputs(out):
    if isinstance(out, (tuple, list)):
        return tuple(_unwait(o) for o in out)
    return _unwait(out)


def _flat_params(text, params):
    """``text`` with every parameter of @main taken as its storage's flat
    buffer (what each device passes) and reshaped to the program's dims."""
    lines = text.split("\n")
    head = next(i for i, s in enumerate(lines) if "func.func public @main(" in s)
    prologue = []
    for k, (_, _, dtype, dims, _) in enumerate(params):
        if len(dims) == 1:
            continue
        shaped, flat = _type(dims, dtype), _type([math.prod(dims)], dtype)
        lines[head] = lines[head].replace(f"%arg{k}: {shaped}", f"%arg{k}_flat: {flat}", 1)
        prologue.append(f'    %arg{k} = "stablehlo.reshape"(%arg{k}_flat) : ({flat}) -> {shaped}')
    return "\n".join(lines[:head + 1] + prologue + lines[head + 1:])


def _replicated_module(text, replicas):
    """The captured module as a program of ``replicas`` replicas."""
    lines = text.split("\n")
    head = next(i for i, s in enumerate(lines) if s.lstrip().startswith("module"))
    lines[head] = (f"module @shard_map attributes {{mhlo.num_partitions = 1 : i32, "
                   f"mhlo.num_replicas = {replicas} : i32}} {{")
    return "\n".join(lines)


class ShardMapFunction:
    """A function of per-device blocks run over a mesh (see :func:`shard_map`)."""

    def __init__(self, fn, mesh, in_specs, out_specs):
        self.fn, self.mesh, self.in_specs, self.out_specs = fn, mesh, in_specs, out_specs
        self.programs = {}
        self.name = f"spmd.shard_map({getattr(fn, '__qualname__', 'fn')})"

    def __call__(self, *args):
        specs = _specs(self.in_specs, len(args), "in_specs", self.name)
        blocks = []
        for a, spec in zip(args, specs):
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"{self.name}: arguments must be tensors, got {type(a).__name__}")
            axes = _normalize_spec(spec, a.dim(), self.mesh, f"{self.name}: in_specs")
            if isinstance(a, ShardedTensor):
                if a.mesh != self.mesh:
                    raise ValueError(f"{self.name}: an argument on {a.mesh}, the function's "
                                     f"mesh is {self.mesh}")
                if a.axes != axes:
                    a = mark_sharding(a.full_tensor(), self.mesh, spec)
            else:
                a = mark_sharding(a, self.mesh, spec)
            blocks.append(a)
        key = tuple((tuple(a.shape), a.dtype, a.axes) for a in blocks)
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = _Program(self.fn, blocks, self.mesh,
                                                    self.out_specs, self.name)
        return program.run(blocks)


def shard_map(fn, mesh, in_specs, out_specs):
    """``fn`` run on every device of ``mesh`` on that device's blocks, as ONE
    program with its collectives inside (JAX's ``shard_map``).

    Args:
        fn: takes tensors (one device's block of each argument) and returns a
            tensor or a tuple of tensors (that device's block of each result).
            Collectives go through ``torch.distributed._functional_collectives``
            with ``group=mesh.group(axes)`` (all_reduce, all_gather_tensor,
            reduce_scatter_tensor, all_to_all_single with equal splits), or
            :func:`torchtpu.spmd.ppermute`. ``torch.compile(backend="tpu")``
            functions may be called inside (their graphs join the program).
        mesh: the :class:`~torchtpu.spmd.Mesh`.
        in_specs: a partition spec per argument (a sequence, also for one
            argument): how the argument is split into blocks. A plain tensor, or a
            :class:`ShardedTensor` with another spec, is laid out so first.
        out_specs: a partition spec per result (one spec when ``fn``
            returns one tensor): how its blocks form the
            global result; an axis a result's dims do not name means the
            blocks along it are equal (not checked, as in JAX with
            ``check_rep=False``).

    Returns a :class:`ShardMapFunction`; called, it returns
    :class:`ShardedTensor` s. Raises ValueError (a spec that does not divide
    its dim, arguments on another mesh, a collective over another mesh's
    group, a wrong spec count), TypeError (a non-tensor argument or result, a
    collective's dtype), NotImplementedError (random ops, unequal all_to_all
    splits), RuntimeError (a function that is not one program: a host read, an
    op without a tpu lowering).
    """
    return ShardMapFunction(fn, mesh, in_specs, out_specs)

"""``torchtpu.spmd.jit``: a PyTorch function over sharded tensors run as ONE
SPMD program that XLA partitions over the mesh (docs/spmd.md).

How a program is made, once per input layout (shapes, dtypes, specs):

1. The function runs once in fused mode on the full values, gathered onto
   the mesh's first device, under the same capture as ``torch.compile``'s
   replay (csrc/aten/compiled_call.h): its ops become one program over
   global shapes. That run's results are dropped: every call, the first
   too, returns what the partitioned program computes.
2. The captured program is compiled again over the mesh with Shardy
   (``sdy.mesh``, ``sdy.sharding``; csrc/pjrt/compile_options.h): each
   parameter becomes a flat value laid out device-major (shard ``p`` of the
   tensor is elements ``[p * L, (p + 1) * L)``), sharded on its one dim, so
   every device passes its own shard's storage as is; a prologue in the
   program reshapes it to the logical tensor and constrains that to the
   tensor's spec. Results are laid out the same way for ``out_specs``
   (default: replicated, each device gets the whole value). XLA inserts the
   collectives the partitioned program needs.
3. Later calls run that program: one PJRT execute over the mesh's devices.
"""

import math

import torch

from torchtpu import _C, metrics
from torchtpu.spmd.reductions import partitionable
from torchtpu.spmd.tensor import ShardedTensor, _normalize_spec, _own, mark_sharding

__all__ = ["jit"]

_ELEMENT = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.bool: "i1", torch.int8: "i8", torch.int16: "i16", torch.int32: "i32",
    torch.int64: "i64", torch.uint8: "ui8", torch.complex64: "complex<f32>",
    torch.complex128: "complex<f64>",
}


def _type(dims, dtype):
    if dtype not in _ELEMENT:
        raise NotImplementedError(f"torchtpu.spmd: dtype {dtype} is not supported yet")
    return "tensor<" + "".join(f"{d}x" for d in dims) + _ELEMENT[dtype] + ">"


def _layout(shape, axes, mesh):
    """(groups, local, used): devices splitting each dim, the local shape, the
    mesh axes that split the tensor (the device-major order)."""
    groups = [math.prod(mesh.shape[a] for a in ax) for ax in axes]
    local = [s // g for s, g in zip(shape, groups)]
    used = [a for ax in axes for a in ax]
    return groups, local, used


def _sharding(mesh, dims_axes):
    body = ", ".join("{" + ", ".join(f'"{mesh.axis_names[a]}"' for a in ax) + "}"
                     for ax in dims_axes)
    return f"#sdy.sharding<@mesh, [{body}]>"


def _relayout(shape, axes, mesh):
    """How the device-major flat value of a tensor and its logical shape meet:
    ``split`` = [groups..., local...] (the flat value reshaped), ``inter`` =
    [g0, l0, g1, l1, ...] (reshapes to ``shape``), ``perm`` transposes
    ``split`` to ``inter`` and ``inverse`` back."""
    groups, local, _ = _layout(shape, axes, mesh)
    r = len(shape)
    split = groups + local
    perm = [i for d in range(r) for i in (d, r + d)]
    inverse = [perm.index(i) for i in range(2 * r)]
    return split, [split[i] for i in perm], perm, inverse


def _constraint(name, src, shape, axes, mesh, dtype):
    return (f"    %{name} = sdy.sharding_constraint %{src} "
            f"{_sharding(mesh, axes)[len('#sdy.sharding'):]} : {_type(shape, dtype)}")


def _to_logical(name, src, shape, axes, mesh, dtype, lines):
    """Lines defining %name (logical ``shape``, constrained to ``axes``) from
    the device-major flat %src."""
    flat = _type([math.prod(shape)], dtype)
    if not shape:
        lines.append(f"    %{name} = stablehlo.reshape %{src} : ({flat}) -> {_type([], dtype)}")
        return
    split, inter, perm, _ = _relayout(shape, axes, mesh)
    lines += [
        f"    %{name}_s = stablehlo.reshape %{src} : ({flat}) -> {_type(split, dtype)}",
        f"    %{name}_t = stablehlo.transpose %{name}_s, dims = {perm} : "
        f"({_type(split, dtype)}) -> {_type(inter, dtype)}",
        f"    %{name}_l = stablehlo.reshape %{name}_t : ({_type(inter, dtype)}) -> "
        f"{_type(shape, dtype)}",
        _constraint(name, f"{name}_l", shape, axes, mesh, dtype),
    ]


def _to_device_major(name, src, shape, axes, mesh, dtype, lines):
    """Lines defining the device-major flat %name from logical %src (the
    inverse of :func:`_to_logical`)."""
    flat = _type([math.prod(shape)], dtype)
    if not shape:
        lines.append(f"    %{name} = stablehlo.reshape %{src} : ({_type([], dtype)}) -> {flat}")
        return
    split, inter, _, inverse = _relayout(shape, axes, mesh)
    lines += [
        _constraint(f"{name}_c", src, shape, axes, mesh, dtype),
        f"    %{name}_i = stablehlo.reshape %{name}_c : ({_type(shape, dtype)}) -> "
        f"{_type(inter, dtype)}",
        f"    %{name}_t = stablehlo.transpose %{name}_i, dims = {inverse} : "
        f"({_type(inter, dtype)}) -> {_type(split, dtype)}",
        f"    %{name} = stablehlo.reshape %{name}_t : ({_type(split, dtype)}) -> {flat}",
    ]


class _Program:
    def __init__(self, fn, args, mesh, out_specs, name):
        self.mesh = mesh
        self.name = name
        full = [a.full_tensor() for a in args]
        _, single, call = _capture(fn, full, self.name)
        self.single = single
        text, _, params, prog_outs, call_outs, self.check_outputs = _C._compiled_describe(call)
        self.call = call
        self.call_outs = call_outs
        self.out_dtypes = [d for d, _ in prog_outs]
        self.out_axes = self._out_axes(out_specs, call_outs, prog_outs)
        self.param_sources = []
        sig, lines = [], []
        for k, (source, index, dtype, dims, const) in enumerate(params):
            if source == "rng":
                raise NotImplementedError(f"{self.name}: random ops are not yet run over a mesh")
            if source == "input":
                shape, axes = tuple(args[index].shape), args[index].axes
                if list(dims) != [math.prod(shape)]:
                    raise RuntimeError(f"{self.name}: input {index} read as {dims}, not whole")
                self.param_sources.append(("input", index))
            else:
                shape, axes = tuple(dims), ((),) * len(dims)
                host = const.cpu()
                self.param_sources.append(
                    ("constant", [host.to(torch.device("tpu", d)) for d in mesh.device_ids]))
            _, _, used = _layout(shape, axes, mesh)
            sig.append(f"%p{k}: {_type([math.prod(shape)], dtype)} "
                       f"{{sdy.sharding = {_sharding(mesh, [used])}}}")
            _to_logical(f"p{k}_v", f"p{k}", shape, axes, mesh, dtype, lines)
            lines.append(f"    %arg{k} = stablehlo.reshape %p{k}_v : ({_type(shape, dtype)}) -> "
                         f"{_type(dims, dtype)}")
        results = []
        for o, (dtype, _dims) in enumerate(prog_outs):
            shape, axes = self.out_axes[o]
            _, _, used = _layout(shape, axes, mesh)
            results.append(f"{_type([math.prod(shape)], dtype)} "
                           f"{{sdy.sharding = {_sharding(mesh, [used])}}}")
        self.text = partitionable(_assemble(text, mesh, sig, results, lines, prog_outs,
                                            self.out_axes))
        metrics.count("spmd_programs")

    def _out_axes(self, out_specs, call_outs, prog_outs):
        """Per program output: (logical shape, axes) it is returned in."""
        per_prog = [(tuple(dims), ((),) * len(dims)) for _, dims in prog_outs]
        if out_specs is None:
            return per_prog
        specs = [out_specs] if self.single else list(out_specs)
        if len(specs) != len(call_outs):
            raise ValueError(f"{self.name}: {len(specs)} out_specs for {len(call_outs)} outputs")
        for spec, (frm, index, _dtype, sizes, strides, offset) in zip(specs, call_outs):
            if spec is None:
                continue
            dims = prog_outs[index][1] if frm == "program" else None
            whole = (frm == "program" and offset == 0 and math.prod(sizes) == math.prod(dims)
                     and list(strides) == _contiguous_strides(sizes))
            if not whole:
                raise ValueError(f"{self.name}: an output that is not a whole program result "
                                 "(a view, or an input returned) cannot take an out_spec yet")
            axes = _normalize_spec(spec, len(sizes), self.mesh, f"{self.name}: out_specs")
            for s, ax in zip(sizes, axes):
                if s % math.prod(self.mesh.shape[a] for a in ax):
                    raise ValueError(f"{self.name}: out_spec {spec} does not divide shape {sizes}")
            per_prog[index] = (tuple(sizes), axes)
        return per_prog

    def run(self, args):
        shards = []
        for source, value in self.param_sources:
            shards.append(args[value]._shards if source == "input" else value)
        try:
            outs = _C._spmd_run(self.text, self.mesh.device_ids, shards, self.out_dtypes,
                                self.name)
            metrics.count("spmd_executes")
        except RuntimeError as e:
            if "PJRT_Client_Compile" not in str(e):
                raise
            raise _NotPartitioned(f"{self.name}: XLA could not partition the program over the "
                                  f"mesh (docs/spmd.md, 'Not built yet'): {e}") from None
        if self.check_outputs:
            # Value checks (an index range), replicated: reported at the next
            # host read, as for any tpu program (csrc/aten/deferred_check.h).
            _C._compiled_defer_checks(self.call, [o[0] for o in outs])
        return self._wrap(outs, args)

    def _wrap(self, outs, args):
        result = []
        for frm, index, dtype, sizes, strides, offset in self.call_outs:
            if frm == "none":
                result.append(None)
            elif frm == "input":
                # A view of an input's storage: its value, replicated (a
                # view's layout over the mesh is not derived yet).
                view = torch.as_strided(args[index].full_tensor(), sizes, strides, offset)
                result.append(mark_sharding(view, self.mesh, (None,) * len(sizes)))
            elif frm == "empty":
                result.append(mark_sharding(torch.empty(sizes, dtype=dtype), self.mesh,
                                            (None,) * len(sizes)))
            else:
                shape, axes = self.out_axes[index]
                if any(axes):
                    _, local, _ = _layout(shape, axes, self.mesh)
                    shards = [o.view(local) for o in outs[index]]
                    result.append(ShardedTensor(shards, self.mesh, axes, sizes, dtype))
                else:
                    shards = [_own(torch.as_strided(o, sizes, strides, offset))
                              for o in outs[index]]
                    result.append(ShardedTensor(shards, self.mesh, ((),) * len(sizes),
                                                sizes, dtype))
        return result[0] if self.single else tuple(result)


def _contiguous_strides(sizes):
    strides, step = [], 1
    for s in reversed(sizes):
        strides.append(step)
        step *= max(s, 1)
    return list(reversed(strides))


def _assemble(text, mesh, sig, results, lines, prog_outs, out_axes):
    """The captured module with the mesh, the new signature, the prologue and
    the results laid out device-major."""
    src = text.split("\n")
    head = next(i for i, s in enumerate(src) if s.lstrip().startswith("func.func public @main("))
    ret = max(
        i for i, s in enumerate(src) if '"func.return"(' in s or s.lstrip().startswith("return")
    )
    axes = ", ".join(f'"{n}"={s}' for n, s in zip(mesh.axis_names, mesh.shape))
    module = (f"module @spmd attributes {{mhlo.num_partitions = {mesh.size} : i32, "
              f"mhlo.num_replicas = 1 : i32}} {{")
    out = [module, f"  sdy.mesh @mesh = <[{axes}]>",
           f"  func.func public @main({', '.join(sig)}) -> ({', '.join(results)}) {{"]
    out += lines
    out += src[head + 1:ret]
    # The returned values, renamed and laid out device-major.
    returned = src[ret].split("(", 1)[1].split(")", 1)[0]
    names = [n.strip() for n in returned.split(",") if n.strip()]
    final = []
    for o, (name, (dtype, dims)) in enumerate(zip(names, prog_outs)):
        shape, ax = out_axes[o]
        out.append(f"    %ret{o}_l = stablehlo.reshape {name} : ({_type(dims, dtype)}) -> "
                   f"{_type(shape, dtype)}")
        _to_device_major(f"ret{o}", f"ret{o}_l", shape, ax, mesh, dtype, out)
        final.append((f"%ret{o}", _type([math.prod(shape)], dtype)))
    out.append(f"    return {', '.join(n for n, _ in final)} : {', '.join(t for _, t in final)}")
    out += src[ret + 1:]
    return "\n".join(out)


class _NotOneProgram(RuntimeError):
    """The function could not be captured as one program."""


class _NotPartitioned(_NotOneProgram):
    """XLA refused to partition the captured program over the mesh (a
    NaN-propagating max/min reduction over a sharded dim, on the CPU plugin)."""


def _capture(fn, full, name):
    """Runs ``fn`` on the full values in fused mode under a capture."""
    previous = _C._get_eager_mode()
    with torch.no_grad():
        _C._set_eager_mode("fused")
        try:
            _C._capture_begin(full)
            try:
                out = fn(*full)
            except BaseException:
                _C._capture_abort(full)
                raise
            single = isinstance(out, torch.Tensor)
            outs = [out] if single else list(out) if isinstance(out, (tuple, list)) else None
            if outs is None or not all(isinstance(o, torch.Tensor) for o in outs):
                _C._capture_abort(full)
                raise TypeError(f"{name}: the function must return a tensor or a tuple of tensors")
            call = _C._capture_end(full, outs)
        finally:
            _C._set_eager_mode(previous)
    if call is None:
        raise _NotOneProgram(
            f"{name}: the function could not be captured as one program (an op without a tpu "
            "lowering, a host read such as .item() or printing, a write to an input, a "
            "random op with a generator of its own, or nothing but views of the inputs)")
    return outs, single, call


class SpmdFunction:
    """A function run as one SPMD program per input layout (see :func:`jit`)."""

    def __init__(self, fn, out_specs=None):
        self.fn = fn
        self.out_specs = out_specs
        self.programs = {}
        self.name = f"spmd.jit({getattr(fn, '__qualname__', 'fn')})"

    def __call__(self, *args):
        meshes = {a.mesh for a in args if isinstance(a, ShardedTensor)}
        if len(meshes) != 1:
            raise ValueError("spmd.jit: the arguments must be tensors with sharded ones all on one "
                             f"mesh; got {len(meshes)} meshes")
        mesh = meshes.pop()
        sharded = []
        for a in args:
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"spmd.jit: arguments must be tensors, got {type(a).__name__}")
            sharded.append(a if isinstance(a, ShardedTensor)
                           else mark_sharding(a, mesh, (None,) * a.dim()))
        key = tuple((tuple(a.shape), a.dtype, a.axes) for a in sharded)
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = _Program(self.fn, sharded, mesh, self.out_specs,
                                                    self.name)
        return program.run(sharded)


def jit(fn=None, *, out_specs=None):
    """``fn`` (tensors in, a tensor or tuple of tensors out, no writes to its
    inputs, no random ops yet) run as ONE program over the mesh of its
    sharded arguments, partitioned by XLA (Shardy).

    Args:
        fn: the function; ``jit`` is also a decorator, ``@jit(out_specs=...)``.
        out_specs: a partition spec per output (one spec for a single
            output; ``None`` entries: replicated). Default: replicated.

    Returns an :class:`SpmdFunction`: called with :class:`ShardedTensor` s on
    one mesh (plain tensors are replicated on it), it returns
    :class:`ShardedTensor` s. Raises ValueError for arguments on several
    meshes or an out_spec that does not divide its output, RuntimeError when
    ``fn`` cannot be captured as one program, NotImplementedError for random
    ops.
    """
    if fn is None:
        return lambda f: SpmdFunction(f, out_specs)
    return SpmdFunction(fn, out_specs)

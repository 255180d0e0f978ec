"""Collectives over a mesh's axes, compiled into the program of
:func:`torchtpu.spmd.shard_map` as StableHLO collectives (docs/spmd.md).

Inside a ``shard_map`` function each tensor is one device's block. PyTorch's
functional collectives (``torch.distributed._functional_collectives``: what
DTensor, FSDP2 and TP emit) given a mesh group (``mesh.group("data")``, a
group name registered with c10d) become ``stablehlo.all_reduce``,
``all_gather``, ``reduce_scatter`` and ``all_to_all`` over that axis's
devices; :func:`ppermute` is ``stablehlo.collective_permute``. Any other
group (a real process group) keeps c10d's own path (the host-staged ``tpu``
backend).

How: while ``shard_map`` captures its function on one device's blocks, each
collective is a kernel call (``torch.ops.torchtpu.kernel_call``) of a
stand-in of the right result type (the capture runs on one device, where a
collective over N devices cannot compile); ``shard_map`` swaps each
stand-in's body for the collective before compiling the program for the
mesh's devices, one replica each.
"""

import hashlib
import math
import threading

import torch

from torchtpu.spmd.program import _ELEMENT, _type
from torchtpu.spmd.reductions import float_compare

__all__ = ["mesh_group", "ppermute"]

# What a collective takes: every element type the programs have but bool.
_DTYPES = tuple(d for d in _ELEMENT if d is not torch.bool)
_COMBINE = {"sum": "add", "avg": "add", "product": "multiply", "min": "minimum",
            "max": "maximum"}

# group name -> (mesh, axis positions); (mesh, axes) -> group name.
_GROUPS = {}
_NAMES = {}
_KEEP = []
_state = threading.local()  # .trace: the _Trace of the shard_map capturing now, or None


def mesh_group(mesh, axes):
    """The c10d group name for ``axes`` (an axis name or index, or a tuple of
    them: their devices together, first axis major) of ``mesh``: pass it as
    ``group=`` to a functional collective inside :func:`shard_map`. Its size
    is the product of the axes' sizes; a device's rank in it is its index
    along them. Raises ValueError for an unknown or repeated axis."""
    names = axes if isinstance(axes, tuple) else (axes,)
    positions = tuple(mesh.axis(a) for a in names)
    if len(set(positions)) != len(positions) or not positions:
        raise ValueError(f"mesh_group: axes {axes!r} must be distinct axes of {mesh}")
    key = (mesh, positions)
    name = _NAMES.get(key)
    if name is None:
        from torch._C import _distributed_c10d as c10d
        label = ",".join(mesh.axis_names[p] for p in positions)
        name = f"torchtpu.spmd/{len(_NAMES)}:{label}"
        size = math.prod(mesh.shape[p] for p in positions)
        group = c10d.ProcessGroup(0, size)  # c10d's registry holds it weakly: kept here
        c10d._register_process_group(name, group)
        _GROUPS[name] = key
        _KEEP.append(group)
        _NAMES[key] = name
    return name


def replica_groups(mesh, positions):
    """Per fixed coordinate of the other axes, the mesh positions along
    ``positions`` (first axis major): the ``replica_groups`` of a collective
    over those axes when replica r runs mesh position r."""
    groups = {}
    for p in range(mesh.size):
        coords = mesh.coords(p)
        rest = tuple(c for a, c in enumerate(coords) if a not in positions)
        rank = 0
        for a in positions:
            rank = rank * mesh.shape[a] + coords[a]
        groups.setdefault(rest, {})[rank] = p
    return [[g[r] for r in sorted(g)] for _, g in sorted(groups.items())]


class _Trace:
    """The collectives of one shard_map capture: symbol prefix -> real body."""

    def __init__(self, mesh, name):
        self.mesh = mesh
        self.name = name
        self.bodies = {}


def _mark_constant():
    """Lets Dynamo call :func:`mesh_group` while tracing and keep the name (it
    cannot trace the function itself). Done at the first shard_map, not at
    import: the marker imports torch._dynamo."""
    global mesh_group
    if not getattr(mesh_group, "_ttpu_marked", False):
        mesh_group = torch.compiler.assume_constant_result(mesh_group)
        mesh_group._ttpu_marked = True


def tracing(mesh, name):
    """Context manager: collectives over ``mesh``'s groups are recorded."""
    _mark_constant()

    class _Scope:
        def __enter__(self):
            self.previous = getattr(_state, "trace", None)
            _state.trace = _Trace(mesh, name)
            return _state.trace

        def __exit__(self, *exc):
            _state.trace = self.previous
    return _Scope()


def _dense(groups):
    return (f"dense<{[list(g) for g in groups]}> : "
            f"tensor<{len(groups)}x{len(groups[0])}xi64>")


def _region(op, dtype):
    s = _type((), dtype)
    return ("({\n      ^bb0(%a: " + s + ", %b: " + s + "):\n"
            f"        %r = stablehlo.{_COMBINE[op]} %a, %b : {s}\n"
            f"        stablehlo.return %r : {s}\n    }})")


def _function(symbol, in_t, out_t, body):
    return (f"  func.func private @{symbol}(%x: {in_t}) -> {out_t} {{\n{body}"
            f"    return %y : {out_t}\n  }}")


def _standin(kind, shape, dtype, out_shape):
    """A one-device program of the collective's result type (its value is
    never used: only the capture runs it)."""
    in_t, out_t = _type(shape, dtype), _type(out_shape, dtype)
    if kind == "all_gather":
        n = out_shape[0] // shape[0]
        body = (f"    %y = stablehlo.concatenate {', '.join(['%x'] * n)}, dim = 0 : "
                f"({', '.join([in_t] * n)}) -> {out_t}\n")
    elif kind == "reduce_scatter":
        limits = list(out_shape)
        body = (f"    %y = stablehlo.slice %x [{', '.join(f'0:{e}' for e in limits)}] : "
                f"({in_t}) -> {out_t}\n")
    else:
        body = f"    %y = stablehlo.add %x, %x : {in_t}\n"
    return ("module {\n  func.func public @main(%x: " + in_t + ") -> " + out_t + " {\n" + body
            + f"    return %y : {out_t}\n  }}\n}}\n")


def _real_body(kind, shape, dtype, out_shape, groups, op, pairs):
    """The collective's lines (``%x`` in, ``%y`` out) for replica groups ``groups``."""
    in_t, out_t = _type(shape, dtype), _type(out_shape, dtype)
    attrs = f"replica_groups = {_dense(groups)}"
    if kind == "all_reduce":
        lines = (f"    %s = \"stablehlo.all_reduce\"(%x) {_region(op, dtype)} {{{attrs}}} : "
                 f"({in_t}) -> {out_t}\n")
    elif kind == "reduce_scatter":
        lines = (f"    %s = \"stablehlo.reduce_scatter\"(%x) {_region(op, dtype)} "
                 f"{{scatter_dimension = 0 : i64, {attrs}}} : ({in_t}) -> {out_t}\n")
    elif kind == "all_gather":
        lines = (f"    %s = \"stablehlo.all_gather\"(%x) {{all_gather_dim = 0 : i64, {attrs}}} : "
                 f"({in_t}) -> {out_t}\n")
    elif kind == "all_to_all":
        lines = (f"    %s = \"stablehlo.all_to_all\"(%x) {{split_dimension = 0 : i64, "
                 f"concat_dimension = 0 : i64, split_count = {len(groups[0])} : i64, {attrs}}} : "
                 f"({in_t}) -> {out_t}\n")
    else:  # collective_permute
        lines = (f"    %s = \"stablehlo.collective_permute\"(%x) "
                 f"{{source_target_pairs = {_dense(pairs)}}} : ({in_t}) -> {out_t}\n")
    if op in ("max", "min") and dtype.is_floating_point:
        # The CPU plugin's cross-device max/min drops NaN (and makes an
        # all-NaN one -inf/inf): the same collective sums the NaN count too.
        f32_in, i1_in = _type(shape, torch.float32), _type(shape, torch.float32)[:-4] + "i1>"
        f32, i1 = _type(out_shape, torch.float32), _type(out_shape, torch.float32)[:-4] + "i1>"
        count_attrs = attrs if kind == "all_reduce" else f"scatter_dimension = 0 : i64, {attrs}"
        lines += (
            f'    %isnan = "stablehlo.compare"(%x, %x) {float_compare("NE")} : ({in_t}, {in_t}) -> '
            f'{i1_in}\n'
            f'    %ones = "stablehlo.convert"(%isnan) : ({i1_in}) -> {f32_in}\n'
            f'    %count = "stablehlo.{kind}"(%ones) {_region("sum", torch.float32)} '
            f'{{{count_attrs}}} : ({f32_in}) -> {f32}\n'
            f'    %none = stablehlo.constant dense<0.0> : {f32}\n'
            f'    %has = "stablehlo.compare"(%count, %none) {float_compare("GT")} : '
            f'({f32}, {f32}) -> {i1}\n'
            f'    %z = stablehlo.subtract %s, %s : {out_t}\n'
            f'    %nan = stablehlo.divide %z, %z : {out_t}\n'
            f'    %y = stablehlo.select %has, %nan, %s : {i1}, {out_t}\n')
    elif op == "avg":
        count = f"{len(groups[0])}.0"
        if dtype.is_complex:
            count = f"({count}, 0.0)"
        lines += (f"    %n = stablehlo.constant dense<{count}> : {out_t}\n"
                  f"    %y = stablehlo.divide %s, %n : {out_t}\n")
    else:
        lines = lines.replace("%s = ", "%y = ", 1)
    return lines


_STANDINS = {}  # (kind, shape, dtype, out_shape) -> (StableHloOp, symbol prefix)


def _standin_op(kind, shape, dtype, out_shape):
    key = (kind, shape, dtype, out_shape)
    if key not in _STANDINS:
        from torchtpu import kernels
        name = f"spmd.{kind}"
        text = _standin(kind, shape, dtype, out_shape)
        op = kernels.stablehlo_op(text, name=name)
        # csrc/aten/user_kernel.cc: symbols are "ttpu_k" + 16 hex digits of
        # sha256(name NUL text) + "_" + the function's own name.
        digest = hashlib.sha256((name + "\0" + text).encode()).hexdigest()[:16]
        _STANDINS[key] = (op, f"ttpu_k{digest}_main")
    return _STANDINS[key]


def _collective(kind, x, group, out_shape, op=None, pairs=None):
    """Records collective ``kind`` of tpu tensor ``x`` over mesh group name
    ``group`` in the shard_map capturing now; returns its result (a stand-in
    while capturing)."""
    trace = getattr(_state, "trace", None)
    mesh, positions = _GROUPS[group]
    if trace is None:
        raise RuntimeError(f"{kind} over the spmd mesh group {group!r} runs only inside "
                           "torchtpu.spmd.shard_map (each tensor there is one device's block)")
    if trace.mesh != mesh:
        raise ValueError(f"{trace.name}: a collective over {group!r}, a group of {mesh}, "
                         f"inside a shard_map over {trace.mesh}")
    if x.dtype not in _DTYPES:
        raise TypeError(f"{trace.name}: {kind} of {x.dtype} tensors is not supported "
                        f"(dtypes: {', '.join(str(d) for d in _DTYPES)})")
    if op is not None and op not in _COMBINE:
        raise ValueError(f"{trace.name}: {kind} reduce op {op!r} is not one of "
                         f"{', '.join(_COMBINE)}")
    if op == "avg" and not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise TypeError(f"{trace.name}: {kind} with 'avg' needs a floating or complex tensor, "
                        f"got {x.dtype}")
    shape = tuple(x.shape)
    standin, symbol = _standin_op(kind, shape, x.dtype, tuple(out_shape))
    groups = replica_groups(mesh, positions)
    trace.bodies[symbol] = _real_body(kind, shape, x.dtype, tuple(out_shape), groups, op, pairs)
    return standin(x)


def _group_size(group):
    mesh, positions = _GROUPS[group]
    return math.prod(mesh.shape[p] for p in positions)


def ppermute(x, axis, perm):
    """``x`` sent along mesh axis ``axis`` (a name or index, or a tuple of
    them) by ``perm``, pairs ``(source, destination)`` of indices along the
    axis; a device no pair sends to gets zeros (JAX's ``lax.ppermute``:
    ``stablehlo.collective_permute``). Only inside :func:`shard_map`.
    Raises RuntimeError outside it, ValueError for an index outside the axis
    or one used twice as a source or as a destination."""
    trace = getattr(_state, "trace", None)
    if trace is None:
        raise RuntimeError("ppermute runs only inside torchtpu.spmd.shard_map")
    group = mesh_group(trace.mesh, axis)
    size = _group_size(group)
    pairs = [(int(s), int(d)) for s, d in perm]
    for side in (0, 1):
        seen = [p[side] for p in pairs]
        if len(set(seen)) != len(seen) or not all(0 <= i < size for i in seen):
            raise ValueError(f"ppermute: {perm} needs distinct indices in [0, {size})")
    groups = replica_groups(*_GROUPS[group])
    global_pairs = [(g[s], g[d]) for g in groups for s, d in pairs]
    return _collective("collective_permute", x, group, tuple(x.shape), pairs=global_pairs)


# ------------------------------------------------- c10d's functional collectives on tpu

def _is_mesh_group(group):
    return isinstance(group, str) and group in _GROUPS


def _composite(op, *args):
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)
    return op.redispatch(keys, *args)


def _all_reduce(x, reduce_op, group):
    if not _is_mesh_group(group):
        return _composite(torch.ops._c10d_functional.all_reduce.default, x, reduce_op, group)
    return _collective("all_reduce", x, group, x.shape, op=reduce_op)


def _all_gather(x, group_size, group):
    if not _is_mesh_group(group):
        return _composite(torch.ops._c10d_functional.all_gather_into_tensor.default, x,
                          group_size, group)
    _check_size(group, group_size)
    return _collective("all_gather", x, group, (x.shape[0] * group_size, *x.shape[1:]))


def _reduce_scatter(x, reduce_op, group_size, group):
    if not _is_mesh_group(group):
        return _composite(torch.ops._c10d_functional.reduce_scatter_tensor.default, x,
                          reduce_op, group_size, group)
    _check_size(group, group_size)
    if x.dim() == 0 or x.shape[0] % group_size:
        raise ValueError(f"reduce_scatter_tensor: dim 0 of shape {tuple(x.shape)} is not "
                         f"divisible by the group size {group_size}")
    return _collective("reduce_scatter", x, group, (x.shape[0] // group_size, *x.shape[1:]),
                       op=reduce_op)


def _all_to_all(x, output_split_sizes, input_split_sizes, group):
    if not _is_mesh_group(group):
        return _composite(torch.ops._c10d_functional.all_to_all_single.default, x,
                          output_split_sizes, input_split_sizes, group)
    n = _group_size(group)
    if x.dim() == 0 or x.shape[0] % n:
        raise ValueError(f"all_to_all_single: dim 0 of shape {tuple(x.shape)} is not "
                         f"divisible by the group size {n}")
    even = [x.shape[0] // n] * n
    for sizes in (output_split_sizes, input_split_sizes):
        if sizes is not None and list(sizes) != even:
            raise NotImplementedError(f"all_to_all_single over a mesh group takes equal "
                                      f"splits ({even}), got {list(sizes)}")
    return _collective("all_to_all", x, group, tuple(x.shape))


def _check_size(group, group_size):
    if group_size != _group_size(group):
        raise ValueError(f"group size {group_size} given for {group!r} of size "
                         f"{_group_size(group)}")


def _coalesced(name, single):
    """The ``_coalesced`` form of a collective: a list of tensors, one group."""
    overload = getattr(torch.ops._c10d_functional, name).default

    def run(xs, *rest):
        if not _is_mesh_group(rest[-1]):
            return _composite(overload, xs, *rest)
        return [single(x, *rest) for x in xs]
    return run


_LIBRARY = None


def register():
    """Routes c10d's functional collectives on tpu tensors through here
    (mesh groups) or c10d's own kernels (every other group). Idempotent."""
    global _LIBRARY
    if _LIBRARY is not None:
        return
    lib = torch.library.Library("_c10d_functional", "IMPL")
    lib.impl("all_reduce", _all_reduce, "PrivateUse1")
    lib.impl("all_gather_into_tensor", _all_gather, "PrivateUse1")
    lib.impl("reduce_scatter_tensor", _reduce_scatter, "PrivateUse1")
    lib.impl("all_to_all_single", _all_to_all, "PrivateUse1")
    for name, single in (("all_reduce_coalesced", _all_reduce),
                         ("all_gather_into_tensor_coalesced", _all_gather),
                         ("reduce_scatter_tensor_coalesced", _reduce_scatter)):
        lib.impl(name, _coalesced(name, single), "PrivateUse1")
    _LIBRARY = lib

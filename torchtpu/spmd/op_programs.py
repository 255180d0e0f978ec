"""Ops on sharded tensors outside ``jit``: each runs as one program over the
mesh (strict mode's per-op programs, for a mesh), made by
:class:`torchtpu.spmd.program.SpmdFunction` from a function of that one op,
one per op, arguments and input layout.

Taken by an op that is functional (no write, no result aliasing an input),
returns only tensors, draws no random numbers, and whose tensor arguments are
sharded tensors of one mesh or tpu tensors. Each result keeps the spec of the
first sharded argument of its shape, else is replicated (the compiler inserts
what moving between them takes). Python scalars are part of the key: their
values are constants of the captured program, so ``x * 3`` after ``x * 2``
is captured again (its first call gathers; the compile is a cache hit).
Anything else, or an op whose program cannot
be captured, returns ``(False, None)``: the caller gathers the full values.
"""

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from torchtpu.spmd.program import SpmdFunction, _NotOneProgram
from torchtpu.spmd.tensor import ShardedTensor

__all__ = ["run"]

_NOT_TAKEN = {torch.ops.aten._to_copy.default, torch.ops.aten.copy.default,
              torch.ops.aten._local_scalar_dense.default, torch.ops.aten.clone.default}
# (op, argument structure, non-tensor values, layouts) -> SpmdFunction, or
# None for an op found not to make one program.
_programs = {}
# Python scalar values are part of the key: a loop with a changing scalar
# would grow the table without end, so it is emptied past this size (the
# compiled programs stay in the runtime's cache).
_MAX_PROGRAMS = 256


def _eligible(func):
    schema = func._schema
    return (func not in _NOT_TAKEN and not schema.is_mutable
            and all(r.alias_info is None and str(r.type) == "Tensor" for r in schema.returns)
            and torch.Tag.nondeterministic_seeded not in func.tags)


def run(func, args, kwargs):
    """``(True, results)`` when ``func`` ran as one program over the mesh,
    else ``(False, None)``."""
    if not _eligible(func):
        return False, None
    leaves, spec = tree_flatten((args, kwargs))
    tensor_at = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    sharded = [leaves[i] for i in tensor_at if isinstance(leaves[i], ShardedTensor)]
    if len({t.mesh for t in sharded}) != 1:
        return False, None
    if any(not isinstance(leaves[i], ShardedTensor) and leaves[i].device.type != "tpu"
           for i in tensor_at):
        return False, None
    layout = tuple((tuple(t.shape), t.dtype, getattr(t, "axes", None)) for t in
                   (leaves[i] for i in tensor_at))
    others = tuple(repr(x) for i, x in enumerate(leaves) if i not in tensor_at)
    key = (func, str(spec), tuple(tensor_at), others, layout)
    if key not in _programs:
        if len(_programs) >= _MAX_PROGRAMS:
            _programs.clear()
        _programs[key] = _make(func, leaves, spec, tensor_at, sharded)
    program = _programs[key]
    if program is None:
        return False, None
    try:
        out = program(*(leaves[i] for i in tensor_at))
    except (_NotOneProgram, NotImplementedError):
        _programs[key] = None
        return False, None
    return True, out


def _make(func, leaves, spec, tensor_at, sharded):
    def one_op(*tensors):
        filled = list(leaves)
        for i, t in zip(tensor_at, tensors):
            filled[i] = t
        a, k = tree_unflatten(filled, spec)
        return func(*a, **k)

    meta = list(leaves)
    for i in tensor_at:
        meta[i] = torch.empty(leaves[i].shape, dtype=leaves[i].dtype, device="meta")
    a, k = tree_unflatten(meta, spec)
    try:
        shapes = func(*a, **k)
    except Exception:  # noqa: BLE001  (the op's own error comes from the gathered run)
        return None
    single = isinstance(shapes, torch.Tensor)
    out_specs = [_spec_of(o.shape, sharded) for o in ([shapes] if single else shapes)]
    fn = SpmdFunction(one_op, out_specs[0] if single else tuple(out_specs))
    fn.name = f"spmd op {func}"
    return fn


def _spec_of(shape, sharded):
    for t in sharded:
        if tuple(t.shape) == tuple(shape):
            return t.spec
    return None

"""Sharded tpu tensors: one logical tensor stored as one shard per mesh device
(docs/spmd.md)."""

import math

import torch
from torch.utils._pytree import tree_map

from torchtpu.spmd.mesh import Mesh

__all__ = ["ShardedTensor", "mark_sharding", "clear_sharding"]


def _normalize_spec(spec, ndim, mesh, who="mark_sharding"):
    """``spec`` (one entry per dim: None, an axis name or index, or a tuple of
    them) as a tuple of axis-index tuples. ValueError on a wrong length, an
    unknown axis, an axis used twice."""
    if spec is None:  # the whole tensor on every device
        spec = (None,) * ndim
    elif isinstance(spec, (str, int)):  # one entry: a 1-D tensor's only dim
        spec = (spec,)
    spec = tuple(spec)
    if len(spec) != ndim:
        raise ValueError(f"{who}: the partition spec {spec} has {len(spec)} entries "
                         f"for a tensor of {ndim} dims")
    out, used = [], set()
    for entry in spec:
        names = () if entry is None else entry if isinstance(entry, tuple) else (entry,)
        if any(n is None or isinstance(n, (tuple, list)) for n in names):
            raise ValueError(f"{who}: the spec entry {entry!r} of {spec} is a tuple of mesh "
                             "axes, which cannot hold None or another tuple (one spec per "
                             "tensor: is it a list of specs where one spec was expected?)")
        axes = tuple(mesh.axis(n) for n in names)
        for a in axes:
            if a in used:
                raise ValueError(f"{who}: mesh axis {mesh.axis_names[a]!r} shards "
                                 f"two dims of {spec}")
            used.add(a)
        out.append(axes)
    return tuple(out)


def _shard_slices(shape, axes_per_dim, mesh, position):
    """The global slices the device at mesh ``position`` holds."""
    coords = mesh.coords(position)
    slices = []
    for size, axes in zip(shape, axes_per_dim):
        count, index = 1, 0
        for a in axes:
            index = index * mesh.shape[a] + coords[a]
            count *= mesh.shape[a]
        local = size // count
        slices.append(slice(index * local, (index + 1) * local))
    return tuple(slices)


def _own(t):
    """``t`` as a contiguous tensor that is its whole storage (what a program
    reads as a device's shard)."""
    if (t.is_contiguous() and t.storage_offset() == 0
            and t.untyped_storage().nbytes() == t.numel() * t.element_size()):
        return t
    return t.contiguous().clone()


class ShardedTensor(torch.Tensor):
    """A tensor of global shape ``shape`` held as ``mesh.size`` shards, shard
    ``p`` on ``tpu:mesh.device_ids[p]`` (a plain tpu tensor of the local
    shape). ``spec`` gives, per dim, the mesh axes that split it (none:
    the dim is whole on every device; axes that shard no dim replicate).

    An op on sharded tensors (functional, tensors out, no random draw) runs
    as one program over the mesh, as :func:`torchtpu.spmd.jit` runs a
    function (torchtpu/spmd/op_programs.py); its results keep the spec of an
    input of the same shape, else are replicated. Any other op (in-place,
    views, copies to another device, random) sees the full value: the shards
    are gathered onto the mesh's first device and the result is a plain tpu
    tensor there (an in-place op writes its result back as shards), so
    ``.cpu()``, printing, ``state_dict()`` and ``torch.save`` give the full
    value.
    """

    @staticmethod
    def __new__(cls, shards, mesh, axes_per_dim, shape, dtype):
        r = torch.Tensor._make_wrapper_subclass(
            cls, shape, dtype=dtype, device=torch.device("tpu", mesh.device_ids[0]))
        r._own_shards = list(shards)
        r._view = None  # (base ShardedTensor, function of base's full value) for a view
        r.mesh = mesh
        r.axes = axes_per_dim
        return r

    @property
    def _shards(self):
        if self._view is None:
            return self._own_shards
        # A view's value is always its base's, read afresh (a write to the
        # base shows through it, as through a view of a plain tensor).
        base, view_fn = self._view
        return _split(view_fn(base.full_tensor()), self.mesh, self.axes)

    def _store(self, value):
        """Makes ``value`` (full, on the mesh's first device) this tensor's
        value: its shards, or for a view, the viewed elements of its base."""
        if self._view is None:
            self._own_shards = _split(value, self.mesh, self.axes)
            return
        base, view_fn = self._view
        full = base.full_tensor()
        view_fn(full).copy_(value)
        base._store(full)

    @property
    def spec(self):
        """The partition spec with axis names: one entry per dim."""
        names = self.mesh.axis_names
        return tuple(None if not a else names[a[0]] if len(a) == 1 else tuple(names[i] for i in a)
                     for a in self.axes)

    @property
    def shards(self):
        """The per-device tensors, in mesh order (do not write them)."""
        return list(self._shards)

    def full_tensor(self):
        """The full value on the mesh's first device (a new tensor)."""
        dev = torch.device("tpu", self.mesh.device_ids[0])
        if self._view is not None:
            base, view_fn = self._view
            return view_fn(base.full_tensor()).clone()
        if not any(self.axes):
            return self._shards[0].clone()
        out = torch.empty(self.shape, dtype=self.dtype, device=dev)
        seen = set()
        for p, shard in enumerate(self._shards):
            sl = _shard_slices(self.shape, self.axes, self.mesh, p)
            key = tuple((s.start, s.stop) for s in sl)
            if key not in seen:
                seen.add(key)
                out[sl] = shard.to(dev)
        return out

    def __repr__(self, *, tensor_contents=None):
        return (f"ShardedTensor({self.full_tensor().cpu()}, mesh={self.mesh}, "
                f"spec={self.spec})")

    def __format__(self, format_spec):
        return self.full_tensor().__format__(format_spec)

    def __reduce_ex__(self, proto):
        return self.full_tensor().__reduce_ex__(proto)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        from torchtpu.spmd import op_programs  # (imports this module)

        done, out = op_programs.run(func, args, kwargs)
        if done:
            return out
        return _gathered(func, args, kwargs)


def _gathered(func, args, kwargs):
    """``func`` on the full values gathered onto the mesh's first device."""
    meshes = set()
    full = {}

    def gather(x):
        if isinstance(x, ShardedTensor):
            meshes.add(x.mesh)
            if id(x) not in full:
                full[id(x)] = (x, x.full_tensor())
            return full[id(x)][1]
        return x

    args2, kwargs2 = tree_map(gather, args), tree_map(gather, kwargs)
    if len(meshes) > 1:
        raise ValueError(
            f"{func}: sharded tensors on different meshes: {sorted(map(repr, meshes))}"
        )
    out = func(*args2, **kwargs2)
    # An op that wrote a sharded argument wrote its gathered copy: store
    # the new value back as shards, so the write is not lost.
    for arg, value in full.values():
        if func._schema.is_mutable and _written(func, args, kwargs, arg):
            arg._store(value)
            out = tree_map(lambda o: arg if o is value else o, out)
    if _is_view(func) and full:
        # A view (x[0], x.t(), x.split(...)) of a sharded tensor: a replicated
        # ShardedTensor tied to its base, so writes through it (x[0] = 1,
        # x[:, 1].zero_()) reach the base and the base's writes show in it.
        base = next(iter(full.values()))[0]
        if isinstance(out, torch.Tensor):
            return _view_of(base, func, args, kwargs, out, None)
        if isinstance(out, (tuple, list)) and all(isinstance(o, torch.Tensor) for o in out):
            return type(out)(_view_of(base, func, args, kwargs, o, i) for i, o in enumerate(out))
    return out


def _is_view(func):
    schema = func._schema
    return not schema.is_mutable and any(r.alias_info is not None for r in schema.returns)


def _view_of(base, func, args, kwargs, value, index):
    def view_fn(full_base):
        swap = lambda x: full_base if x is base else x  # noqa: E731
        result = func(*tree_map(swap, args), **tree_map(swap, kwargs))
        return result if index is None else result[index]

    axes = ((),) * value.dim()
    view = ShardedTensor([], base.mesh, axes, value.shape, value.dtype)
    view._view = (base, view_fn)
    return view


def _written(func, args, kwargs, tensor):
    for i, a in enumerate(func._schema.arguments):
        v = args[i] if i < len(args) else kwargs.get(a.name)
        if v is tensor and a.alias_info is not None and a.alias_info.is_write:
            return True
    return False


def _split(t, mesh, axes):
    for size, a in zip(t.shape, axes):
        count = math.prod(mesh.shape[i] for i in a)
        if size % count:
            names = tuple(mesh.axis_names[i] for i in a)
            raise ValueError(f"mark_sharding: a dim of size {size} is not divisible by mesh "
                             f"axes {names} of {count} devices")
    return [_own(t[_shard_slices(t.shape, axes, mesh, p)].to(torch.device("tpu", d)))
            for p, d in enumerate(mesh.device_ids)]


def mark_sharding(t, mesh, partition_spec):
    """``t`` (a CPU or tpu tensor) sharded over ``mesh``: a new
    :class:`ShardedTensor` (``t`` is not changed; PyTorch/XLA's
    ``mark_sharding`` annotates in place, which a tpu storage living on one
    device cannot do).

    Args:
        t: the full value, any device, any dtype tpu holds.
        mesh: a :class:`Mesh`.
        partition_spec: one entry per dim of ``t``: ``None`` (whole), a mesh
            axis name or index, or a tuple of them (split over their product,
            the first axis major).

    Raises:
        ValueError: a spec of the wrong length, an unknown or repeated axis, a
            dim not divisible by its axes' device count.
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(
            f"mark_sharding: mesh must be a torchtpu.spmd.Mesh, got {type(mesh).__name__}"
        )
    if isinstance(t, ShardedTensor):
        t = t.full_tensor()
    axes = _normalize_spec(partition_spec, t.dim(), mesh)
    return ShardedTensor(_split(t.detach(), mesh, axes), mesh, axes, t.shape, t.dtype)


def clear_sharding(t):
    """The full value of a :class:`ShardedTensor` as a plain tensor on its
    mesh's first device; any other tensor unchanged."""
    return t.full_tensor() if isinstance(t, ShardedTensor) else t

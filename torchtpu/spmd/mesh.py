"""A logical mesh over this process's tpu devices (docs/spmd.md)."""

import math

import torch

__all__ = ["Mesh"]


class Mesh:
    """``len(device_ids)`` tpu devices of this process arranged as an
    N-dimensional array with named axes, as PyTorch/XLA's ``xs.Mesh`` and JAX's
    ``Mesh``.

    Args:
        device_ids: tpu device indices (``tpu:i``), in mesh order (row-major
            over ``mesh_shape``). The CPU plugin gives a process
            ``TORCHTPU_CPU_DEVICES`` devices.
        mesh_shape: sizes of the axes; default ``(len(device_ids),)``.
        axis_names: one name per axis; default ``("x", "y", "z", ...)``
            truncated to the rank.

    Raises:
        ValueError: an id repeated or not one of this process's devices, a
            shape whose product is not the id count, names not unique or of
            the wrong count.
    """

    def __init__(self, device_ids, mesh_shape=None, axis_names=None):
        ids = [int(i) for i in device_ids]
        if not ids:
            raise ValueError("Mesh: no devices")
        count = torch.tpu.device_count()
        for i in ids:
            if not 0 <= i < count:
                raise ValueError(f"Mesh: tpu:{i} is not one of this process's {count} tpu "
                                 "devices (TORCHTPU_CPU_DEVICES sets the CPU plugin's count)")
        if len(set(ids)) != len(ids):
            raise ValueError(f"Mesh: device ids repeat: {ids}")
        shape = tuple(int(s) for s in (mesh_shape or (len(ids),)))
        if math.prod(shape) != len(ids):
            raise ValueError(f"Mesh: shape {shape} holds {math.prod(shape)} devices, "
                             f"{len(ids)} ids given")
        names = tuple(axis_names) if axis_names is not None else tuple("xyzwuv"[: len(shape)])
        if len(names) != len(shape) or len(set(names)) != len(names):
            raise ValueError(f"Mesh: axis names {names} for {len(shape)} axes: give one distinct "
                             "name per axis")
        self.device_ids = ids
        self.shape = shape
        self.axis_names = names

    @property
    def size(self):
        return len(self.device_ids)

    def axis(self, name_or_index):
        """The position of an axis given by name or index (ValueError if none)."""
        if isinstance(name_or_index, int) and not isinstance(name_or_index, bool):
            if 0 <= name_or_index < len(self.shape):
                return name_or_index
        elif name_or_index in self.axis_names:
            return self.axis_names.index(name_or_index)
        raise ValueError(f"Mesh: no axis {name_or_index!r} (axes {self.axis_names})")

    def group(self, axes):
        """The c10d group name of ``axes`` (an axis, or a tuple of axes) for
        functional collectives inside :func:`torchtpu.spmd.shard_map`
        (torchtpu/spmd/collectives.py, :func:`mesh_group`)."""
        from torchtpu.spmd.collectives import mesh_group
        return mesh_group(self, axes)

    def coords(self, position):
        """Mesh coordinates of the device at ``position`` in ``device_ids``."""
        out = []
        for size in reversed(self.shape):
            out.append(position % size)
            position //= size
        return tuple(reversed(out))

    def __eq__(self, other):
        return (isinstance(other, Mesh) and self.device_ids == other.device_ids
                and self.shape == other.shape and self.axis_names == other.axis_names)

    def __hash__(self):
        return hash((tuple(self.device_ids), self.shape, self.axis_names))

    def __repr__(self):
        axes = ", ".join(f"{n}={s}" for n, s in zip(self.axis_names, self.shape))
        return f"Mesh({axes}; tpu:{self.device_ids})"

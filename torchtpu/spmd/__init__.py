"""SPMD over this process's tpu devices: one logical tensor sharded over a
device mesh, and functions compiled as ONE program that XLA partitions
(docs/spmd.md).

    import torchtpu.spmd as spmd
    mesh = spmd.Mesh([0, 1, 2, 3], (2, 2), ("data", "model"))
    x = spmd.mark_sharding(torch.randn(8, 16), mesh, ("data", None))
    w = spmd.mark_sharding(torch.randn(16, 32), mesh, (None, "model"))
    y = spmd.jit(lambda x, w: torch.relu(x @ w), out_specs=("data", "model"))(x, w)
    y.full_tensor()  # [8, 32] on tpu:0

On the CPU plugin a process has ``TORCHTPU_CPU_DEVICES`` devices.
"""

from torchtpu.spmd import recipes
from torchtpu.spmd.collectives import ppermute
from torchtpu.spmd.mesh import Mesh
from torchtpu.spmd.program import SpmdFunction, jit
from torchtpu.spmd.shard_map import ShardMapFunction, shard_map
from torchtpu.spmd.tensor import ShardedTensor, clear_sharding, mark_sharding

__all__ = ["Mesh", "ShardMapFunction", "ShardedTensor", "SpmdFunction", "clear_sharding", "jit",
           "mark_sharding", "ppermute", "recipes", "shard_map"]

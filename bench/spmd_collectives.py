"""What XLA makes of a torchtpu.spmd program: the collectives it inserted and
the per-device dot shapes, read from the optimized HLO.

The PJRT C API gives no executable's HLO or output shardings, so the program
text torchtpu.spmd.jit builds is compiled a second time here with jaxlib's
XLA (same partitioner, Shardy, 4 host devices) and its HLO read:

    TORCHTPU_CPU_DEVICES=4 python bench/spmd_collectives.py

Prints one line per collective kind with its count, then the dots.
"""

import os
import re
import subprocess
import sys
import tempfile

KINDS = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"]


def build_text(path):
    """The Megatron-style MLP (x sharded on data, W1 on columns, W2 on rows)."""
    import torch
    import torch.nn.functional as F

    import torchtpu.spmd as spmd

    mesh = spmd.Mesh([0, 1, 2, 3], (2, 2), ("data", "model"))
    x = spmd.mark_sharding(torch.randn(8, 16), mesh, ("data", None))
    w1 = spmd.mark_sharding(torch.randn(16, 32), mesh, (None, "model"))
    w2 = spmd.mark_sharding(torch.randn(32, 4), mesh, ("model", None))
    f = spmd.jit(lambda x, w1, w2: F.gelu(x @ w1) @ w2, out_specs=("data", None))
    f(x, w1, w2)
    with open(path, "w") as out:
        out.write(next(iter(f.programs.values())).text)


def optimized_hlo(path, partitions=4):
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={partitions}"
    import numpy as np
    from jax._src import xla_bridge
    from jax._src.lib import xla_client as xc

    backend = xla_bridge.get_backend("cpu")
    opts = xc.CompileOptions()
    opts.num_replicas, opts.num_partitions = 1, partitions
    build = opts.executable_build_options
    build.use_spmd_partitioning = True
    build.use_shardy_partitioner = True
    build.device_assignment = xc.DeviceAssignment.create(
        np.arange(partitions, dtype=np.int32).reshape(1, partitions).T)
    devices = xc.DeviceList(tuple(backend.devices()[:partitions]))
    with open(path) as f:
        exe = backend.compile_and_load(f.read(), devices, opts)
    return exe.hlo_modules()[0].to_string()


def main():
    if len(sys.argv) == 2:  # the jaxlib half, in a process without torchtpu
        hlo = optimized_hlo(sys.argv[1])
        for kind in KINDS:
            print(f"{kind}: {len(re.findall(rf'= [^ ]+ {kind}(-start)?[(]', hlo))}")
        for line in hlo.splitlines():
            if " dot(" in line:
                print(line.strip().split(", metadata")[0])
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "spmd.mlir")
        build_text(path)
        subprocess.run([sys.executable, __file__, path], check=True)


if __name__ == "__main__":
    main()

"""One rank of test_distributed_recipes.py's CPU-only scripts: a DDP, an FSDP2
(no mesh given) and a DTensor script that never name tpu nor import torchtpu.
With torch's backend autoload on, torchtpu is loaded and tpu is the
accelerator, as CUDA would be on a GPU host; with it off, plain CPU. Prints
``VALUE <name> <float>`` per script and ``CHECK <name> ok|FAIL <msg>``.

Usage: python _dist_cpu_only.py <group> <rank> <world> <port>
"""

import datetime
import os
import sys
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn


def _batch(rank, step):
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(10 * rank + step))


def _train(model, rank, device):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        loss = model(_batch(rank, step).to(device)).square().mean()
        loss.backward()
        opt.step()
    return loss.item()


def ddp(rank, world):
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(),
                                                              nn.Linear(16, 4)))
    return _train(model, rank, "cpu")


def fsdp2(rank, world):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)  # the default mesh follows the current accelerator
    return _train(model, rank, next(model.parameters()).device)


def dtensor(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    full = torch.randn(8, 4)
    d = distribute_tensor(full, mesh, [Shard(0)])
    return (d * 2).sum().full_tensor().item()


def main():
    _group, rank, world, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                      WORLD_SIZE=str(world))
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    for name, fn in (("ddp", ddp), ("fsdp2", fsdp2), ("dtensor", dtensor)):
        try:
            print(f"VALUE {name} {fn(rank, world)!r}", flush=True)
            print(f"CHECK {name} ok", flush=True)
        except Exception as e:  # reported to the parent
            print(f"CHECK {name} FAIL {type(e).__name__}: {e}".replace("\n", " | "), flush=True)
            traceback.print_exc()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

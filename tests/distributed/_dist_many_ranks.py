"""Worker for tests/distributed/test_distributed.py's groups of more than two
ranks (one tpu device each). Usage: python _dist_many_ranks.py <group> <rank>
<world> <port>; prints "CHECK <name> ok|FAIL <message>" lines.

Group "late_peers": back-to-back collectives while one rank at a time is a
few milliseconds late. With 3 and 4 ranks the call-signature exchange through
the c10d store failed at once ("no signature from rank 0 ... queue is empty")
where it should wait for the late peer."""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

from _dist_worker import close, report


def late_peers(rank, world):
    dist.init_process_group("tpu", timeout=datetime.timedelta(seconds=60))
    x = torch.full((64,), float(rank + 1), device="tpu")
    total = world * (world + 1) / 2
    for it in range(30):
        if it % world == rank:
            time.sleep(0.002 * (1 + it % 5))
        y = x.clone()
        dist.all_reduce(y)
        close(y, torch.full((64,), total))
        if it % 10 == 9:
            out = [torch.empty(64, device="tpu") for _ in range(world)]
            dist.all_gather(out, x)
            want = torch.arange(1.0, world + 1).repeat_interleave(64).view(world, 64)
            close(torch.stack(out), want)
            dist.barrier()
    dist.destroy_process_group()


def main():
    group, rank, world, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                      WORLD_SIZE=str(world))
    report(f"{group}_{world}_ranks", lambda: {"late_peers": late_peers}[group](rank, world))


if __name__ == "__main__":
    main()

"""all_reduce on 2 processes: tpu tensors (backend "tpu", host-staged) vs CPU gloo.

    python bench/bench_distributed.py [--sizes 4K,64K,1M,4M,16M,64M] [--iters N] [--out f.json]

Launches 2 ranks (each its own single tpu device, TCPStore on 127.0.0.1). For
each size (bytes of float32) both ranks time `iters` all_reduce calls (after
one warm-up) on a tpu tensor and on a CPU tensor over gloo, in turn and each
after a barrier (drift on a busy machine hits both alike), and rank 0 reports
the median latency (ms), the bus bandwidth (GB/s; 2(n-1)/n * bytes / time, as
nccl-tests count it) and the tpu/gloo latency ratio, of the medians and of the
fastest calls (`*_min_ms`, `ratio_min`: the least disturbed). Also the DDP step time of a
small MLP on 2 ranks vs 1 rank (per step, ms). JSON on stdout (and --out).
"""

import datetime
import os
import statistics
import sys
import time

SIZES = {"4K": 4 << 10, "64K": 64 << 10, "1M": 1 << 20, "4M": 4 << 20, "16M": 16 << 20,
         "64M": 64 << 20}


def _time(fn, iters):
    fn()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _time_pair(fn_a, fn_b, iters, before):
    """Times two calls in turn (a, b, a, b, ...; `before` ahead of each) after
    one warm-up of each, so drift on a busy machine hits both alike. Returns
    their (median, fastest) times in seconds."""
    fn_a(), fn_b()
    a, b = [], []
    for _ in range(iters):
        for fn, samples in ((fn_a, a), (fn_b, b)):
            before()
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return (statistics.median(a), min(a)), (statistics.median(b), min(b))


def _ddp_step_ms(rank, world, group, steps=10):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).to("tpu")
    if world > 1:
        model = DDP(model, process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64 // world, 256, device="tpu"), torch.randn(64 // world, 10, device="tpu")

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        model_param = next(model.parameters())
        model_param.sum().item()  # wait for the step

    return 1000 * _time(step, steps)


def worker(rank, world, port, sizes, iters):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                      WORLD_SIZE=str(world))
    import torch
    import torch.distributed as dist

    import torchtpu

    dist.init_process_group("cpu:gloo,tpu:tpu", timeout=datetime.timedelta(seconds=120))
    rows = []
    for name in sizes:
        n = SIZES[name] // 4
        t = torch.ones(n, device="tpu")
        c = torch.ones(n)

        def tpu_op():
            dist.all_reduce(t)
            torchtpu.sync()

        (tpu_s, tpu_min), (cpu_s, cpu_min) = _time_pair(
            tpu_op, lambda: dist.all_reduce(c), iters, dist.barrier)
        busbw = lambda s: 2 * (world - 1) / world * SIZES[name] / s / 1e9  # noqa: E731
        rows.append({"size": name, "bytes": SIZES[name], "tpu_ms": round(1000 * tpu_s, 3),
                     "gloo_ms": round(1000 * cpu_s, 3), "tpu_busbw_GBps": round(busbw(tpu_s), 3),
                     "gloo_busbw_GBps": round(busbw(cpu_s), 3),
                     "ratio_tpu_over_gloo": round(tpu_s / cpu_s, 2),
                     "tpu_min_ms": round(1000 * tpu_min, 3),
                     "gloo_min_ms": round(1000 * cpu_min, 3),
                     "ratio_min": round(tpu_min / cpu_min, 2)})
    ddp2 = _ddp_step_ms(rank, world, dist.group.WORLD)
    dist.barrier()
    if rank == 0:
        ddp1 = _ddp_step_ms(0, 1, None)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from _report import emit

        emit({"world": world, "iters": iters, "all_reduce": rows,
              "ddp_step_ms": {"2_ranks": round(ddp2, 2), "1_rank": round(ddp1, 2),
                              "batch": 64, "model": "MLP 256-512-10"}},
             os.environ.get("BENCH_OUT") or None)
    dist.barrier()
    dist.destroy_process_group()


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _report import run_two_ranks, two_rank_args

    args = two_rank_args(__doc__.splitlines()[0], "4K,64K,1M,4M,16M,64M")
    sizes = args.sizes.split(",")
    if args.rank is not None:
        return worker(args.rank, 2, args.port, sizes, args.iters)
    run_two_ranks(__file__, args.sizes, args.iters, args.out, 900)


if __name__ == "__main__":
    main()

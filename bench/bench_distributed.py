"""all_reduce on 2 processes: tpu tensors (backend "tpu", host-staged) vs CPU gloo.

    python bench/bench_distributed.py [--sizes 4K,64K,1M,4M,16M,64M|none] [--iters N] [--out f.json]

Launches 2 ranks (each its own single tpu device, TCPStore on 127.0.0.1). For
each size (bytes of float32) both ranks time `iters` all_reduce calls (after
one warm-up) on a tpu tensor and on a CPU tensor over gloo, in turn and each
after a barrier (drift on a busy machine hits both alike), and rank 0 reports
the median latency (ms), the bus bandwidth (GB/s; 2(n-1)/n * bytes / time, as
nccl-tests count it) and the tpu/gloo latency ratio, of the medians and of the
fastest calls (`*_min_ms`, `ratio_min`: the least disturbed), and the median of
each round's own tpu/gloo ratio (`ratio_paired`: the two calls of a round ran
back to back, so a slow spell of the host hits both). Also the DDP step
time (ms, batch 64) on 2 ranks vs 1 rank of a small MLP (one bucket) and of a
deeper one (7 MB of gradients in 1 MB buckets), and how much of the gradients'
all_reduce time backward hides (`overlap`: 1 - (step - step under no_sync()) /
one all_reduce of all the gradients; 1 = fully hidden, 0 = none).
`--sizes none` runs the DDP part alone. JSON on stdout (and --out).
"""

import datetime
import os
import statistics
import sys
import time

SIZES = {"4K": 4 << 10, "64K": 64 << 10, "1M": 1 << 20, "4M": 4 << 20, "16M": 16 << 20,
         "64M": 64 << 20}


def _time(fn, iters, warmup=1):
    for _ in range(warmup):
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
    their (median, fastest) times in seconds, and the median of the rounds'
    own a/b ratios (each round's two calls ran back to back: the least
    touched by a slow spell of the host)."""
    fn_a(), fn_b()
    a, b = [], []
    for _ in range(iters):
        for fn, samples in ((fn_a, a), (fn_b, b)):
            before()
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    paired = statistics.median(x / y for x, y in zip(a, b))
    return (statistics.median(a), min(a)), (statistics.median(b), min(b)), paired


def _model(kind):
    import torch

    torch.manual_seed(0)
    if kind == "mlp":
        return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                   torch.nn.Linear(512, 10))
    layers = []  # "deep": 6 x Linear(512, 512), 1 MB of gradients each
    for _ in range(6):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(512, 10))


def _ddp_step_ms(rank, world, group, kind="mlp", steps=10, sync=True):
    """Median ms of one SGD step (forward, backward, step, then a read that
    waits for it) on batch 64 split over `world` ranks; DDP when world > 1
    (buckets of 1 MB for "deep": several all_reduces during backward).
    sync=False runs the DDP steps under no_sync(): compute without comm."""
    import contextlib

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = _model(kind).to("tpu")
    if world > 1:
        model = DDP(model, process_group=group, bucket_cap_mb=1 if kind == "deep" else 25)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64 // world, 256 if kind == "mlp" else 512, device="tpu"), \
        torch.randn(64 // world, 10, device="tpu")
    ctx = model.no_sync if world > 1 and not sync else contextlib.nullcontext

    def step():
        opt.zero_grad()
        with ctx():
            torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        model_param = next(model.parameters())
        model_param.sum().item()  # wait for the step

    # DDP's first steps run 3-15x slower than later ones without compiling
    # (measured: 82, 19, 14, 10, 6.5, then 4.5-8 ms; bucket rebuild after step
    # 1, gloo's first transfers): five untimed steps, not one.
    return 1000 * _time(step, steps, warmup=5)


def _ddp_rows(rank, world, dist):
    """DDP step on 2 ranks vs 1 rank, and how much of the gradients'
    all_reduce time backward hides: exposed = step - step under no_sync()
    (same compute, no comm); serial = one all_reduce of all the gradients
    (the comm a step without overlap would add); overlap = 1 - exposed/serial."""
    import torch

    import torchtpu

    rows = {}
    for kind in ("mlp", "deep"):
        ddp2 = _ddp_step_ms(rank, world, dist.group.WORLD, kind)
        nosync2 = _ddp_step_ms(rank, world, dist.group.WORLD, kind, sync=False)
        numel = sum(p.numel() for p in _model(kind).parameters())
        g = torch.ones(numel, device="tpu")

        def serial():
            dist.all_reduce(g)
            torchtpu.sync()
        serial_ms = 1000 * _time(serial, 10)
        dist.barrier()
        ddp1 = _ddp_step_ms(0, 1, None, kind) if rank == 0 else None
        dist.barrier()
        exposed = ddp2 - nosync2
        rows[kind] = {"2_ranks": round(ddp2, 2), "1_rank": round(ddp1, 2) if ddp1 else None,
                      "2_ranks_no_sync": round(nosync2, 2),
                      "grad_MB": round(numel * 4 / 2**20, 2),
                      "serial_all_reduce_ms": round(serial_ms, 2),
                      "exposed_comm_ms": round(exposed, 2),
                      "overlap": round(1 - exposed / serial_ms, 2)}
    rows["batch"] = 64
    rows["models"] = {"mlp": "Linear 256-512-10, one bucket",
                      "deep": "6 x Linear 512-512 + Linear 512-10, 1 MB buckets"}
    return rows


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

        (tpu_s, tpu_min), (cpu_s, cpu_min), paired = _time_pair(
            tpu_op, lambda: dist.all_reduce(c), iters, dist.barrier)
        busbw = lambda s: 2 * (world - 1) / world * SIZES[name] / s / 1e9  # noqa: E731
        rows.append({"size": name, "bytes": SIZES[name], "tpu_ms": round(1000 * tpu_s, 3),
                     "gloo_ms": round(1000 * cpu_s, 3), "tpu_busbw_GBps": round(busbw(tpu_s), 3),
                     "gloo_busbw_GBps": round(busbw(cpu_s), 3),
                     "ratio_tpu_over_gloo": round(tpu_s / cpu_s, 2),
                     "tpu_min_ms": round(1000 * tpu_min, 3),
                     "gloo_min_ms": round(1000 * cpu_min, 3),
                     "ratio_min": round(tpu_min / cpu_min, 2),
                     "ratio_paired": round(paired, 2)})
    ddp = _ddp_rows(rank, world, dist)
    if rank == 0:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from _report import emit

        emit({"world": world, "iters": iters, "all_reduce": rows, "ddp_step_ms": ddp},
             os.environ.get("BENCH_OUT") or None)
    dist.barrier()
    dist.destroy_process_group()


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _report import run_two_ranks, two_rank_args

    args = two_rank_args(__doc__.splitlines()[0], "4K,64K,1M,4M,16M,64M")
    sizes = [] if args.sizes == "none" else args.sizes.split(",")
    if args.rank is not None:
        return worker(args.rank, 2, args.port, sizes, args.iters)
    run_two_ranks(__file__, args.sizes, args.iters, args.out, 900)


if __name__ == "__main__":
    main()

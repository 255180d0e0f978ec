"""Where a DDP step's backward waits, on 2 processes: per bucket, how long the
all-reduce hook blocks the autograd thread, and how long after that its
future completes.

    python bench/ddp_hook_timing.py [--sizes mlp,deep] [--iters N] [--out f.json]

Launches 2 ranks (one tpu device each, loopback) and trains bench_distributed's
models (--sizes names them: "mlp", one bucket; "deep", 1 MB buckets) with DDP
and a comm hook that does what the default one does (divide by the world
size, all_reduce, get_future) and times it: `hook_blocks_ms` (the all_reduce
+ get_future call: what backward waits for per bucket), `future_after_ms`
(from the hook's return until its future completes), and the step's phases
(`backward_ms` ...), medians over `iters` steps after 4 warm-up steps.
Wall times on a shared machine are noisy: compare runs side by side.
JSON on stdout (and --out).
"""

import datetime
import os
import statistics
import sys
import time


def worker(rank, port, kinds, iters):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE="2")
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torchtpu  # noqa: F401  (registers the "tpu" backend)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_distributed import _model

    dist.init_process_group("cpu:gloo,tpu:tpu", timeout=datetime.timedelta(seconds=120))
    rows = {}
    for kind in kinds:
        hook_ms, after_ms = [], []

        def hook(state, bucket):
            start = time.perf_counter()
            fut = dist.all_reduce(bucket.buffer().div_(2), async_op=True).get_future()
            issued = time.perf_counter()
            hook_ms.append(1000 * (issued - start))

            def done(f):
                after_ms.append(1000 * (time.perf_counter() - issued))
                return f.value()[0]
            return fut.then(done)

        model = DDP(_model(kind).to("tpu"), bucket_cap_mb=1 if kind == "deep" else 25)
        model.register_comm_hook(None, hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(32, 256 if kind == "mlp" else 512, device="tpu")
        y = torch.randn(32, 10, device="tpu")
        phases = {"forward_ms": [], "backward_ms": [], "step_ms": [], "read_ms": []}
        for i in range(iters + 4):
            if i == 4:
                hook_ms.clear(), after_ms.clear()
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            opt.step()
            t3 = time.perf_counter()
            next(model.parameters()).sum().item()
            t4 = time.perf_counter()
            if i >= 4:
                for k, v in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                    phases[k].append(1000 * v)
        rows[kind] = {k: round(statistics.median(v), 2) for k, v in phases.items()}
        rows[kind].update(buckets=len(hook_ms) // iters,
                          hook_blocks_ms=round(statistics.median(hook_ms), 2),
                          future_after_ms=round(statistics.median(after_ms), 2))
        dist.barrier()
    if rank == 0:
        from _report import emit

        emit({"iters": iters, "check": os.environ.get("TORCHTPU_DIST_CHECK", "1"), "ddp": rows},
             os.environ.get("BENCH_OUT") or None)
    dist.barrier()
    dist.destroy_process_group()


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _report import run_two_ranks, two_rank_args

    args = two_rank_args(__doc__.splitlines()[0], "mlp,deep")
    if args.rank is not None:
        return worker(args.rank, args.port, args.sizes.split(","), args.iters)
    run_two_ranks(__file__, args.sizes, args.iters, args.out, 600)


if __name__ == "__main__":
    main()

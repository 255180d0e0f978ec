"""Where one tpu all_reduce's time goes, stage by stage, on 2 processes.

    python bench/profile_distributed.py [--sizes 1M,4M,16M] [--iters N] [--out f.json]

Launches 2 ranks (each its own single tpu device, TCPStore on 127.0.0.1) and,
per size (bytes of float32), times the stages the host path is made of, each on
its own, in the same process run and in turn (each round runs every stage once,
after a barrier) so that their ratios are comparable on a noisy machine
(median ms over `iters` rounds, and the fastest as `<stage>_min`):

- d2h: tpu tensor -> reused host tensor (``h.copy_(t)``);
- gloo: all_reduce of that host tensor on the CPU gloo group;
- h2d: host tensor -> the tpu tensor in place (``t.copy_(h)`` then sync);
- staged_by_hand: the three above in a row from Python (the host path's floor);
- signature: what the tpu backend checks calls with on 2 ranks (signature_check.h): one
  8-byte gloo send/recv with the peer (signature_all_gather: the 64-byte
  all_gather it used before, for comparison);
- tpu: ``all_reduce(t, async_op=True)`` (tpu_issue, until it returns), then
  ``wait()`` + sync (tpu_wait);
- issue_caller_cpu_ms: the calling thread's own CPU time in tpu_issue and
  overlapped_issue (time.thread_time; the rest of their wall time is waiting);
- sum_of_stages: d2h + gloo + h2d (what a serial host path costs at best);
- compute: unrelated device work (4 matmuls 384x384, then sync);
- overlapped: what DDP's bucket hook does: ``all_reduce(t, async_op=True)``
  and ``get_future()``, then the compute, then the future's ``wait()`` + sync;
  ``overlap`` = (tpu + compute - overlapped) / min(tpu, compute): 0 when the
  future waits for the collective before the compute can start, 1 when one
  hides the other completely (2 cores here: gloo and XLA:CPU share them).

Per stage, also the process CPU time (`cpu_ms`, all threads) and voluntary
context switches (`switches`, median per round): a busy machine inflates
wall times far more than these. Also the per-call counts of torchtpu.metrics (compiles, executes,
host bytes) over the tpu all_reduces: anything but 0 compiles and executes is a bug.
TORCHTPU_DIST_CHECK is read once per process: run it with =0 to drop the signature exchange.

`critical_path` (per size): the stages of one blocking ``all_reduce(t)`` +
``torchtpu.sync()`` as the backend marks them (``_C._dist_trace``), next to
plain gloo's all_reduce of the same bytes in the same rounds (in turn, after a
barrier each). `marks` lists, in order, each stage's median time since the
call started (`at_ms`, wall), the thread that marked it (`caller`, or the
first stage another thread marked: `job_start` = the issue queue's thread,
`inner_done` = gloo's worker) and that thread's own CPU time since its
previous mark in the call (`cpu_ms`, median); `tpu_ms` / `gloo_ms` are the
whole calls' median wall times and `tpu_cpu_ms` / `gloo_cpu_ms` their process
CPU times (all threads). JSON on stdout (and --out).
"""

import datetime
import os
import resource
import statistics
import sys
import time

SIZES = {"64K": 64 << 10, "1M": 1 << 20, "4M": 4 << 20, "16M": 16 << 20, "64M": 64 << 20}


def critical_path(dist, t, h, iters):
    """Stage marks of blocking tpu all_reduces of `t` beside gloo's of `h`
    (see the module docstring)."""
    import torchtpu
    from torchtpu import _C

    calls, tpu_wall, tpu_cpu, gloo_wall, gloo_cpu = [], [], [], [], []
    for i in range(iters + 1):
        dist.barrier()
        _C._dist_trace(True)
        start, cpu0 = time.monotonic_ns(), time.process_time()
        dist.all_reduce(t)
        torchtpu.sync()
        end, cpu1 = time.monotonic_ns(), time.process_time()
        marks = _C._dist_trace(False)
        dist.barrier()
        g0, gc0 = time.perf_counter(), time.process_time()
        dist.all_reduce(h)
        g1, gc1 = time.perf_counter(), time.process_time()
        if not i:
            continue  # warm-up
        tpu_wall.append((end - start) / 1e9)
        tpu_cpu.append(cpu1 - cpu0)
        gloo_wall.append(g1 - g0)
        gloo_cpu.append(gc1 - gc0)
        calls.append((start, end, marks))
    # Per call: (stage, thread label) -> (ms since start, thread CPU ms since
    # that thread's previous mark).
    table = {}
    order = []
    for start, end, marks in calls:
        caller = next((m[3] for m in marks if m[0] == "call"), None)
        labels, last_cpu = {caller: "caller"}, {}
        for what, wall, cpu, thread in sorted(marks, key=lambda m: m[1]):
            label = labels.setdefault(thread, what)
            key = (what, label)
            if key not in table:
                table[key] = ([], [])
                order.append(key)
            table[key][0].append((wall - start) / 1e6)
            table[key][1].append((cpu - last_cpu[thread]) / 1e6 if thread in last_cpu else 0.0)
            last_cpu[thread] = cpu
        key = ("synced", "caller")
        if key not in table:
            table[key] = ([], [])
            order.append(key)
        table[key][0].append((end - start) / 1e6)
        table[key][1].append(0.0)
    med = lambda xs: round(statistics.median(xs), 3)  # noqa: E731
    rows = [{"stage": what, "thread": label, "at_ms": med(table[(what, label)][0]),
             "cpu_ms": med(table[(what, label)][1]), "seen": len(table[(what, label)][0])}
            for what, label in sorted(order, key=lambda k: statistics.median(table[k][0]))]
    ms = lambda xs: round(1000 * statistics.median(xs), 3)  # noqa: E731
    return {"marks": rows, "tpu_ms": ms(tpu_wall), "gloo_ms": ms(gloo_wall),
            "tpu_cpu_ms": ms(tpu_cpu), "gloo_cpu_ms": ms(gloo_cpu),
            "tpu_min_ms": round(1000 * min(tpu_wall), 3),
            "gloo_min_ms": round(1000 * min(gloo_wall), 3)}


def worker(rank, port, sizes, iters):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE="2")
    import torch
    import torch.distributed as dist

    import torchtpu

    dist.init_process_group("cpu:gloo,tpu:tpu", timeout=datetime.timedelta(seconds=120))
    rows = []
    for name in sizes:
        n = SIZES[name] // 4
        t = torch.zeros(n, device="tpu")
        h = torch.zeros(n)
        sig_in, sig_out = torch.zeros(8, dtype=torch.long), torch.zeros(16, dtype=torch.long)
        sig_h, sig_peer = torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long)

        def exchange(mine, theirs):
            works = [dist.isend(mine, 1 - rank, tag=7), dist.irecv(theirs, 1 - rank, tag=7)]
            for w in works:
                w.wait()
        state = {}

        def tpu_issue():
            state["w"] = dist.all_reduce(t, async_op=True)

        def tpu_wait():
            state["w"].wait()
            torchtpu.sync()

        a = torch.randn(384, 384, device="tpu")

        def compute():
            b = a
            for _ in range(4):
                b = b @ a
            torchtpu.sync()

        def overlap_issue():
            state["f"] = dist.all_reduce(t, async_op=True).get_future()

        def overlap_wait():
            state["f"].wait()
            torchtpu.sync()

        # Stage name -> the calls timed one after the other (each its own
        # sample); all stages run in turn each round so drift hits them alike.
        stages = {
            "d2h": [lambda: h.copy_(t)],
            "gloo": [lambda: dist.all_reduce(h)],
            "h2d": [lambda: (t.copy_(h), torchtpu.sync())],
            "staged_by_hand": [lambda: (h.copy_(t), dist.all_reduce(h), t.copy_(h),
                                        torchtpu.sync())],
            "signature": [lambda: exchange(sig_h, sig_peer)],
            "signature_all_gather": [lambda: dist.all_gather_into_tensor(sig_out, sig_in)],
            "tpu": [tpu_issue, tpu_wait],
            "compute": [compute],
            "overlapped": [overlap_issue, compute, overlap_wait],
        }
        samples = {k: [[] for _ in v] for k, v in stages.items()}
        thread_cpu = {k: [[] for _ in v] for k, v in stages.items()}  # the caller's own
        # Per stage and call: process CPU seconds (all threads) and voluntary
        # context switches (thread hops, waits): counts that a busy machine's
        # scheduling delays do not inflate the way they inflate wall time.
        cpu = {k: [] for k in stages}
        csw = {k: [] for k in stages}
        counts = {}
        for i in range(iters + 1):
            for key, calls in stages.items():
                dist.barrier()
                if key == "tpu":
                    torchtpu.metrics.reset()
                cpu0, ru0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
                for j, fn in enumerate(calls):
                    start, tstart = time.perf_counter(), time.thread_time()
                    fn()
                    if i:  # round 0 warms up
                        samples[key][j].append(time.perf_counter() - start)
                        thread_cpu[key][j].append(time.thread_time() - tstart)
                if i:
                    cpu[key].append(time.process_time() - cpu0)
                    csw[key].append(resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
                                    - ru0.ru_nvcsw)
                if key == "tpu" and i:
                    m = torchtpu.metrics.metrics()
                    for k in ("compiles", "executes", "bytes_to_host", "bytes_to_device"):
                        counts[k] = counts.get(k, 0) + m[k] / iters
        ms = lambda xs: round(1000 * statistics.median(xs), 3)  # noqa: E731
        row = {"size": name}
        for key, per_call in samples.items():
            total = [sum(parts) for parts in zip(*per_call)]
            row[key] = ms(total)
            row[key + "_min"] = round(1000 * min(total), 3)
        row["tpu_issue"], row["tpu_wait"] = ms(samples["tpu"][0]), ms(samples["tpu"][1])
        row["sum_of_stages"] = round(row["d2h"] + row["gloo"] + row["h2d"], 3)
        row["overlap"] = round((row["tpu"] + row["compute"] - row["overlapped"])
                               / min(row["tpu"], row["compute"]), 2)
        row["overlapped_issue"] = ms(samples["overlapped"][0])
        # CPU time of the calling thread alone in the issuing call (what the
        # caller spends, as opposed to how long it is kept waiting).
        row["issue_caller_cpu_ms"] = {"tpu": ms(thread_cpu["tpu"][0]),
                                      "overlapped": ms(thread_cpu["overlapped"][0])}
        row["tpu_over_gloo"] = round(row["tpu"] / row["gloo"], 2)
        row["tpu_over_gloo_min"] = round(row["tpu_min"] / row["gloo_min"], 2)
        row["cpu_ms"] = {k: ms(v) for k, v in cpu.items()}
        row["switches"] = {k: statistics.median(v) for k, v in csw.items()}
        row["per_call"] = counts
        row["fallbacks"] = torchtpu.metrics.total_fallbacks()
        if hasattr(torchtpu._C, "_dist_trace"):  # builds before it have no marks
            row["critical_path"] = critical_path(dist, t, h, iters)
        rows.append(row)
    if rank == 0:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from _report import emit

        emit({"check": os.environ.get("TORCHTPU_DIST_CHECK", "1"), "iters": iters,
              "stages_ms": rows}, os.environ.get("BENCH_OUT") or None)
    dist.barrier()
    dist.destroy_process_group()


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _report import run_two_ranks, two_rank_args

    args = two_rank_args(__doc__.splitlines()[0], "1M,4M,16M")
    sizes = args.sizes.split(",")
    if args.rank is not None:
        return worker(args.rank, args.port, sizes, args.iters)
    run_two_ranks(__file__, args.sizes, args.iters, args.out, 600)


if __name__ == "__main__":
    main()

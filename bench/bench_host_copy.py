"""Host-to-device copies (issue 11): pageable vs pinned source, blocking vs
``non_blocking=True``, side by side in one process; prints JSON.

    python bench/bench_host_copy.py [--sizes 1,16,64] [--iters 10] [--out f.json]

For each size (MiB of float32) and configuration, ``dst.copy_(src, non_blocking=...)``
into a preallocated tpu tensor is timed two ways: ``issue_ms``, until the call
returns (what the Python thread waits for), and ``done_ms``, until
``torch.tpu.synchronize()`` says the copy is complete. Configurations:
``pageable`` (ordinary CPU tensor, blocking), ``pinned`` (``pin_memory()``,
blocking) and ``pinned_non_blocking``. A copy from pinned memory with
``non_blocking=True`` returns before the plugin has copied (CUDA's behaviour),
so its issue_ms is well under its done_ms; the others return when done.
Reported: medians over ``--iters`` and ``issue_ratio`` = pinned_non_blocking
issue_ms / pageable issue_ms. A benchmark, not a test: it asserts only that the values arrived.
"""

import argparse
import statistics
import time

import torch

import torchtpu  # noqa: F401  (registers the tpu device)
from _report import emit


def time_copy(dst, src, non_blocking, iters):
    issue, done = [], []
    for _ in range(iters):
        torch.tpu.synchronize()
        t0 = time.perf_counter()
        dst.copy_(src, non_blocking=non_blocking)
        t1 = time.perf_counter()
        torch.tpu.synchronize()
        t2 = time.perf_counter()
        issue.append((t1 - t0) * 1e3)
        done.append((t2 - t0) * 1e3)
    return {"issue_ms": statistics.median(issue), "done_ms": statistics.median(done)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1,16,64", help="MiB per copy, comma-separated")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--out", default=None, help="also write the JSON to this file")
    a = p.parse_args(argv)
    report = {"sizes_mib": {}}
    for mib in [int(s) for s in a.sizes.split(",")]:
        n = mib * (1 << 20) // 4
        pageable = torch.randn(n)
        pinned = pageable.pin_memory()
        dst = torch.empty(n, device="tpu")
        time_copy(dst, pinned, True, 2)  # warm-up: first allocations
        row = {
            "pageable": time_copy(dst, pageable, False, a.iters),
            "pinned": time_copy(dst, pinned, False, a.iters),
            "pinned_non_blocking": time_copy(dst, pinned, True, a.iters),
        }
        assert torch.equal(dst.cpu(), pageable)  # the copies carried the values
        row["issue_ratio"] = (row["pinned_non_blocking"]["issue_ms"]
                              / row["pageable"]["issue_ms"])
        report["sizes_mib"][str(mib)] = row
    emit(report, a.out)


if __name__ == "__main__":
    main()

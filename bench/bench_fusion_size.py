"""Compile time and memory of ONE fused graph against its size: the curve that
sets fused mode's default graph size cap (csrc/runtime/fusion.cc, max_nodes).

    python bench/bench_fusion_size.py [--sizes 250,500,1000,2000] [--stop-after 20]
        [--kinds chain,mixed] [--out bench_fusion_size.json]

Each point is a fresh Python process (peak RSS is a high-water mark) with the
persistent cache off and TORCHTPU_FUSION_MAX_NODES raised so nothing is cut.
It records N ops in fused mode on a 32x32 float32 tensor, then reads the result:
``chain`` repeats mul, add, tanh (an elementwise chain XLA fuses into one
loop); ``mixed`` repeats matmul, relu, sum, add, div, mul, add. Reported per
point: ``cpu_s`` (process CPU seconds from the first op to the read: recording,
compiling, running; less sensitive to other load than wall time), ``compile_s``
(the runtime's compile seconds, wall), ``ms_per_op`` (cpu_s per op) and
``rss_growth_mb`` (peak RSS minus RSS before the first op). A kind stops at the
first point whose CPU time exceeds ``--stop-after`` seconds. Nodes per op:
``--nodes`` also measures the graph size in IR nodes (by cutting at 1000 nodes
and counting flushes). A benchmark, not a test: nothing here asserts.
"""

import argparse
import json
import os
import subprocess
import sys

from _report import emit

CHILD = r"""
import json, resource, sys, time
import torch, torchtpu
kind, n = sys.argv[1], int(sys.argv[2])
torchtpu.set_eager_mode("fused")
x = torch.linspace(-1, 1, 1024, device="tpu").reshape(32, 32)
w = torch.randn(32, 32, device="tpu") * 0.1
x.cpu(); w.cpu()
torchtpu.metrics.reset()
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
c0 = time.process_time()
ops = 0
while ops < n:
    if kind == "chain":
        x = torch.tanh(x * 1.0001 + 0.001); ops += 3
    else:
        y = (x @ w).relu(); s = y.sum(dim=1, keepdim=True); x = y / (s + 1) * 0.5 + x; ops += 7
x.cpu()
cpu = time.process_time() - c0
m = torchtpu.metrics.metrics()
print(json.dumps(dict(ops=ops, cpu_s=round(cpu, 3), compile_s=round(m["compile_seconds"], 3),
                      ms_per_op=round(cpu / ops * 1000, 2), flushes=m["fused_flushes"],
                      rss_growth_mb=(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0)
                      // 1024)))
"""


def point(kind, n, max_nodes):
    env = dict(os.environ, TORCHTPU_CACHE="0", TORCHTPU_FUSION_MAX_NODES=str(max_nodes))
    out = subprocess.run([sys.executable, "-c", CHILD, kind, str(n)], env=env,
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        return {"ops": n, "error": out.stderr[-500:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="250,500,1000,2000,4000")
    ap.add_argument("--kinds", default="chain,mixed")
    ap.add_argument("--stop-after", type=float, default=20.0)
    ap.add_argument("--nodes", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    report = {}
    for kind in args.kinds.split(","):
        rows = []
        for n in (int(s) for s in args.sizes.split(",")):
            row = point(kind, n, 10**9)
            rows.append(row)
            if "error" in row or row["cpu_s"] > args.stop_after:
                break
        report[kind] = rows
        if args.nodes:
            cut = point(kind, 6000, 1000)
            report[f"{kind}_nodes_per_op"] = round(cut["flushes"] * 1000 / cut["ops"], 2)
    emit(report, args.out)


if __name__ == "__main__":
    main()

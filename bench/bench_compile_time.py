"""Compile time of a GPT-2 training step under torch.compile(backend="tpu"),
cold and with a warm persistent cache; prints JSON medians and ratios.

    python bench/bench_compile_time.py [--out bench_compile_time.json] [--rounds 2]

Each round runs two fresh Python processes on one cache directory: cold (the
directory emptied first) and warm (reusing what the cold one stored). Each
builds a GPT-2 from ``transformers`` (``GPT2Config``: 4 layers, d_model 256, 4
heads, 128 positions, vocabulary 1024, dropout 0.1; random init, seed 0),
compiles it with ``torch.compile(backend="tpu")`` and runs ONE training step
(batch 8, sequence 128, language-model loss, backward, AdamW in strict eager),
then ``torchtpu.sync()``.

Reported per run, in seconds (median over rounds): ``first_step`` (model built
to step finished: Dynamo's trace, AOTAutograd, our lowering, XLA compiles or
cache loads, execution), ``xla_compile`` (the runtime's own compile seconds:
what the persistent cache removes), ``persistent_load`` (reading and
deserializing cached executables), ``compiles`` and ``persistent_hits``.
``cold_over_warm``: the ratios. Dynamo's and AOTAutograd's tracing are paid
again by every process (torchtpu does not cache FX graphs), so the first step
cannot shrink below them.

``--per-op``: instead, strict mode's per-op programs. Each round runs two
fresh processes without a persistent cache, one with the quick per-op compile
settings (the default) and one with ``TORCHTPU_QUICK_COMPILE=0`` (every program
at full optimization). Each runs 20 common ops (elementwise, reductions,
softmax, layer_norm, matmul, indexing, cat, cumsum, casts) on 33x33 float32
(small: compiled with the quick settings) and 1024x1024 (large: full
optimization either way), timing each compile in process CPU milliseconds
(less sensitive to other processes than wall time), then each op's run time on
both sizes (best of 5, milliseconds, programs already compiled). Reported:
median and p90 compile ms per program over each size class, and per-op run
time ratios quick/full.

The cache directory is a fresh temp dir, removed afterwards. A benchmark, not a
test: nothing here asserts.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _report import emit

CHILD = r"""
import json, time, warnings
import torch
import torchtpu
from transformers import GPT2Config, GPT2LMHeadModel
warnings.filterwarnings("ignore")
torch.optim.AdamW([torch.zeros(1, requires_grad=True)])  # PyTorch's lazy imports
torch.manual_seed(0)
t_ready = time.time()
cfg = GPT2Config(n_layer=4, n_embd=256, n_head=4, n_positions=128, vocab_size=1024)
model = GPT2LMHeadModel(cfg).to("tpu")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
step = torch.compile(lambda ids: model(input_ids=ids, labels=ids).loss, backend="tpu")
ids = torch.randint(0, 1024, (8, 128)).to("tpu")
loss = step(ids)
loss.backward()
opt.step()
value = loss.item()
torchtpu.sync()
t_done = time.time()
print(json.dumps({"first_step": t_done - t_ready, "loss": value,
                  "metrics": torchtpu.metrics.metrics()}))
"""


PER_OP_CHILD = r"""
import json, time, torch, torchtpu
import torch.nn.functional as F
def ops(x, y, i):
    return {"add": lambda: x + y, "mul": lambda: x * y, "exp": lambda: torch.exp(x),
            "tanh": lambda: torch.tanh(x), "sum_dim": lambda: x.sum(1),
            "max_dim": lambda: x.max(0).values, "mm": lambda: x @ y,
            "softmax": lambda: F.softmax(x, -1), "gelu": lambda: F.gelu(x),
            "layer_norm": lambda: F.layer_norm(x, x.shape[-1:]),
            "where": lambda: torch.where(x > 0, x, y), "index": lambda: x[i],
            "cat": lambda: torch.cat([x, y]), "transpose_copy": lambda: x.t().contiguous(),
            "rsqrt": lambda: torch.rsqrt(x.abs() + 1), "mean": lambda: x.mean(),
            "cumsum": lambda: torch.cumsum(x, 0), "relu": lambda: F.relu(x),
            "pow": lambda: x.pow(2), "to_half": lambda: x.to(torch.float16)}
torch.ones(1, device="tpu").sum().item()   # plugin started
compile_ms, run_ms = {}, {}
for n in (33, 1024):
    x, y = torch.randn(n, n, device="tpu"), torch.randn(n, n, device="tpu")
    i = torch.tensor([0, 2, 1], device="tpu")
    torch.tpu.synchronize()
    for name, f in ops(x, y, i).items():
        c0, p0 = torchtpu.metrics.metrics()["compiles"], time.process_time()
        r = f(); torch.tpu.synchronize()
        p1, c1 = time.process_time(), torchtpu.metrics.metrics()["compiles"]
        if c1 > c0:
            compile_ms[f"{name}@{n}"] = (p1 - p0) * 1000 / (c1 - c0)
        best = []
        for _ in range(5):
            t = time.perf_counter(); r = f(); torch.tpu.synchronize()
            best.append(time.perf_counter() - t)
        run_ms[f"{name}@{n}"] = min(best) * 1000
print(json.dumps({"compile_ms": compile_ms, "run_ms": run_ms}))
"""


def per_op(rounds):
    runs = {"quick": [], "full": []}
    for _ in range(rounds):
        for kind in ("quick", "full"):
            env = dict(os.environ, TORCHTPU_CACHE="0",
                       TORCHTPU_QUICK_COMPILE="1" if kind == "quick" else "0")
            r = subprocess.run([sys.executable, "-c", PER_OP_CHILD], capture_output=True,
                               text=True, env=env, timeout=1800)
            if r.returncode != 0:
                raise RuntimeError(f"benchmark child failed:\n{r.stderr[-4000:]}")
            runs[kind].append(json.loads(r.stdout.strip().splitlines()[-1]))

    def pct(values, q):
        v = sorted(values)
        return round(v[min(len(v) - 1, int(q * len(v)))], 1)

    summary = {}
    for kind, rs in runs.items():
        for size in ("33", "1024"):
            ms = [v for r in rs for k, v in r["compile_ms"].items() if k.endswith("@" + size)]
            summary[f"{kind}_compile_ms_{size}"] = {"median": pct(ms, 0.5), "p90": pct(ms, 0.9),
                                                   "programs": len(ms)}
    # Run time per op: median over rounds, then quick / full.
    run = {kind: {k: statistics.median(r["run_ms"][k] for r in rs) for k in rs[0]["run_ms"]}
           for kind, rs in runs.items()}
    ratio = {k: round(run["quick"][k] / run["full"][k], 2) for k in run["full"]}
    by_op = {k: {kind: round(statistics.median(r["compile_ms"][k] for r in rs
                                               if k in r["compile_ms"]), 1)
                 for kind, rs in runs.items()}
             for k in runs["full"][0]["compile_ms"]
             if all(k in r["compile_ms"] for rs in runs.values() for r in rs)}
    return {
        "compile": summary,
        "compile_ms_by_op": by_op,
        "run_ms": {k: {kind: round(run[kind][k], 3) for kind in run} for k in ratio},
        "run_quick_over_full": ratio,
    }


def run_child(cache_dir):
    env = dict(os.environ, TORCHTPU_CACHE_DIR=cache_dir)
    env.pop("TORCHTPU_CACHE", None)
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env,
                       timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{r.stderr[-4000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    m = out["metrics"]
    return {
        "first_step": out["first_step"],
        "xla_compile": m["compile_seconds"],
        "persistent_load": m["persistent_load_seconds"],
        "compiles": m["compiles"],
        "persistent_hits": m["persistent_hits"],
        "loss": out["loss"],
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="also write the JSON to this file")
    p.add_argument("--rounds", type=int, default=2, help="process pairs")
    p.add_argument("--per-op", action="store_true",
                   help="strict per-op programs: quick vs full compile settings")
    args = p.parse_args(argv)
    if args.per_op:
        start = time.time()
        return emit({
            "command": "python bench/bench_compile_time.py " + " ".join(argv or sys.argv[1:]),
            "strict_per_op": per_op(args.rounds),
            "host": {"cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0],
                     "wall_s": time.time() - start},
        }, args.out)
    cache_dir = tempfile.mkdtemp(prefix="torchtpu-bench-compile-")
    runs = {"cold": [], "warm": []}
    start = time.time()
    try:
        for _ in range(args.rounds):
            shutil.rmtree(cache_dir)
            os.mkdir(cache_dir, 0o700)
            runs["cold"].append(run_child(cache_dir))
            runs["warm"].append(run_child(cache_dir))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    med = {kind: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
           for kind, rs in runs.items()}
    return emit({
        "command": "python bench/bench_compile_time.py " + " ".join(argv or sys.argv[1:]),
        "seconds_median": med,
        "cold_over_warm": {k: med["cold"][k] / med["warm"][k]
                           for k in ("first_step", "xla_compile") if med["warm"][k] > 0},
        "same_loss": len({r["loss"] for rs in runs.values() for r in rs}) == 1,
        "runs": runs,
        "host": {"cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0],
                 "wall_s": time.time() - start},
    }, args.out)


if __name__ == "__main__":
    main()

"""Time to first result: a new user's first generate() on tpu, cold and warm, next
to CPU PyTorch; prints JSON.

    python bench/bench_cold_start.py [--out cold_start.json] [--modes cpu,strict,fused]
                                     [--static] [--new-tokens 20]

Workload (issue 12): a ``transformers`` GPT-2 with a small config (2 layers,
d_model 64, 2 heads, vocabulary 1000, 128 positions; random init, seed 0),
``generate(input_ids (1, 8), max_new_tokens=20, do_sample=False)``, called
twice in one process. ``--static`` adds the same with
``cache_implementation="static"``.

Each (mode, cache) runs in a fresh Python process: ``cpu`` is CPU PyTorch;
``strict`` and ``fused`` are tpu's eager modes, each run first with an empty
compile cache directory (``cold``) and then again on what that run stored
(``warm``). Reported per run: ``first_s`` (the first generate, model already
on the device: what compiles), ``second_s`` (the same call again: programs in
memory), ``first_over_second``, ``compiles`` (XLA compiles in the process),
``compile_s`` (their seconds), ``persistent_hits``, ``tokens_equal_cpu``.
Compile counts do not depend on the machine's load; report them beside every
time. ``ratios``: each tpu first call over CPU's, and cold over warm.

The cache directories are fresh temp dirs, removed afterwards. A benchmark, not
a test: nothing here asserts.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from _report import emit

CHILD = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import torch
mode, static, new_tokens = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
device = "cpu"
if mode != "cpu":
    import torchtpu
    torchtpu.set_eager_mode(mode)
    device = "tpu"
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging
logging.set_verbosity_error()
torch.manual_seed(0)
cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=128)
model = GPT2LMHeadModel(cfg).eval().to(device)
ids = torch.randint(0, 1000, (1, 8)).to(device)
kw = dict(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
if static:
    kw["cache_implementation"] = "static"
times, tokens = [], None
with torch.no_grad():
    for _ in range(2):
        t = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), **kw)
        tokens = out.cpu().tolist()           # the result read on the host
        times.append(time.perf_counter() - t)
m = torchtpu.metrics.metrics() if mode != "cpu" else {}
print(json.dumps({"times": times, "tokens": tokens, "metrics": m}))
"""


def run_child(mode, static, new_tokens, cache_dir):
    env = dict(os.environ)
    env.pop("TORCHTPU_CACHE", None)
    env.pop("TORCHTPU_EAGER_MODE", None)
    if cache_dir is not None:
        env["TORCHTPU_CACHE_DIR"] = cache_dir
    r = subprocess.run([sys.executable, "-c", CHILD, mode, "1" if static else "0",
                        str(new_tokens)], capture_output=True, text=True, env=env, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"benchmark child ({mode}) failed:\n{r.stderr[-4000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    first, second = out["times"]
    m = out["metrics"]
    row = {"first_s": round(first, 4), "second_s": round(second, 4),
           "first_over_second": round(first / second, 1) if second > 0 else None}
    if m:
        row.update({"compiles": m["compiles"], "compile_s": round(m["compile_seconds"], 3),
                    "persistent_hits": m["persistent_hits"], "executes": m["executes"]})
    return row, out["tokens"]


def workload(static, modes, new_tokens):
    rows, cpu_tokens = {}, None
    if "cpu" in modes:
        rows["cpu"], cpu_tokens = run_child("cpu", static, new_tokens, None)
    for mode in (m for m in modes if m != "cpu"):
        cache_dir = tempfile.mkdtemp(prefix="torchtpu-bench-cold-")
        try:
            for kind in ("cold", "warm"):
                row, tokens = run_child(mode, static, new_tokens, cache_dir)
                if cpu_tokens is not None:
                    row["tokens_equal_cpu"] = tokens == cpu_tokens
                rows[f"{mode}_{kind}"] = row
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
    ratios = {}
    for mode in (m for m in modes if m != "cpu"):
        cold, warm = rows[f"{mode}_cold"], rows[f"{mode}_warm"]
        if "cpu" in rows:
            ratios[f"{mode}_cold_first_over_cpu_first"] = round(
                cold["first_s"] / rows["cpu"]["first_s"], 1)
        ratios[f"{mode}_cold_first_over_warm_first"] = round(cold["first_s"] / warm["first_s"], 1)
    return {"runs": rows, "ratios": ratios}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="also write the JSON to this file")
    p.add_argument("--modes", default="cpu,strict,fused",
                   help="comma-separated, from cpu, strict, fused")
    p.add_argument("--static", action="store_true",
                   help="also run generate with cache_implementation='static'")
    p.add_argument("--new-tokens", type=int, default=20)
    args = p.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    start = time.time()
    report = {"command": "python bench/bench_cold_start.py " + " ".join(argv or sys.argv[1:]),
              "gpt2_generate": workload(False, modes, args.new_tokens)}
    if args.static:
        report["gpt2_generate_static_cache"] = workload(True, modes, args.new_tokens)
    report["host"] = {"cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0],
                      "wall_s": round(time.time() - start, 1)}
    return emit(report, args.out)


if __name__ == "__main__":
    main()

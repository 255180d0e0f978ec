"""Persistent compile cache benchmark: cold vs warm process, time to first finished
training step; prints JSON medians and ratios.

    python bench/bench_cache.py [--out bench_cache.json] [--rounds 3] [--mode strict]
        [--cache-dir DIR]

Each round runs three fresh Python processes: a cold tpu one (the cache
directory emptied first), a warm tpu one (reusing what the cold one stored) and
the same step on CPU PyTorch (the floor: every Python cost, no XLA). Each does
one ``train_digits`` step: the :class:`DigitsCNN` on the first 64 training
images, cross-entropy, backward, SGD update, then ``torchtpu.sync()`` so the
whole step (optimizer update included) has finished.

Reported per run, in seconds (median over rounds):
- ``from_spawn``: from starting the process to the finished step: interpreter,
  ``import torch``/``torchtpu``, data loading, then the step. What a user waits.
- ``step_only``: from just before the model is built to the finished step: the
  part the cache can shorten (plugin start, compiles or loads, execution). The
  one-time imports PyTorch does when the first optimizer is created (~2.5 s on
  a 2-core machine, tpu and CPU alike) are paid before this clock starts.
Ratios are cold over warm. The issue's target is a warm run reaching its first
finished step at least 5x sooner than a cold one.

The cache directory defaults to a fresh temp dir (removed afterwards), so the
user's ``~/.cache/torchtpu`` is never emptied. A benchmark, not a test: nothing
here asserts.
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

import torch

import torchtpu
from _report import emit

TARGET_RATIO = 5.0

CHILD = r"""
import time
t_start = time.time()
DEVICE = "{device}"
import json, warnings
import torch
import torch.nn.functional as F
import torchtpu
from torchtpu.examples.train_digits import DigitsCNN, load_data, make_optimizer
warnings.filterwarnings("ignore", message=r"tpu: .* has no tpu lowering")
x_train, y_train, _, _ = load_data(0)
torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)  # PyTorch's lazy imports
t_ready = time.time()
torch.manual_seed(0)
model = DigitsCNN().to(DEVICE)
opt = make_optimizer("sgd", model.parameters())
xb, yb = x_train[:64].to(DEVICE), y_train[:64].to(DEVICE)
loss = F.cross_entropy(model(xb), yb)
opt.zero_grad(set_to_none=True)
loss.backward()
opt.step()
loss_value = loss.item()
if DEVICE != "cpu":
    torchtpu.sync()
t_done = time.time()
print(json.dumps({{"t_start": t_start, "t_ready": t_ready, "t_done": t_done,
                  "loss": loss_value, "metrics": torchtpu.metrics.metrics(),
                  "fallbacks": torchtpu.metrics.fallback_counts(),
                  "cache": torchtpu.cache.info()}}))
"""


def run_child(cache_dir, mode, device="tpu"):
    env = dict(os.environ, TORCHTPU_CACHE_DIR=cache_dir, TORCHTPU_EAGER_MODE=mode)
    env.pop("TORCHTPU_CACHE", None)
    t_spawn = time.time()
    r = subprocess.run([sys.executable, "-c", CHILD.format(device=device)], capture_output=True,
                       text=True, env=env,
                       timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{r.stderr}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    m = out["metrics"]
    return {
        "from_spawn": out["t_done"] - t_spawn,
        "step_only": out["t_done"] - out["t_ready"],
        "interpreter_and_imports": out["t_ready"] - t_spawn,
        "loss": out["loss"],
        "compiles": m["compiles"],
        "compile_seconds": m["compile_seconds"],
        "persistent_hits": m["persistent_hits"],
        "persistent_misses": m["persistent_misses"],
        "persistent_load_seconds": m["persistent_load_seconds"],
        "fallbacks": sum(out["fallbacks"].values()),
        "entries": out["cache"]["entries"],
        "bytes": out["cache"]["bytes"],
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="also write the JSON to this file")
    p.add_argument("--rounds", type=int, default=3, help="cold+warm process pairs")
    p.add_argument("--mode", choices=("strict", "debug"), default="strict")
    p.add_argument("--cache-dir", default=None,
                   help="cache directory to use and EMPTY each round (default: a temp dir)")
    args = p.parse_args(argv)

    own_dir = args.cache_dir is None
    cache_dir = tempfile.mkdtemp(prefix="torchtpu-bench-cache-") if own_dir else args.cache_dir
    load_at_start = os.getloadavg()[0]
    runs = {"cold": [], "warm": [], "cpu": []}
    try:
        for _ in range(args.rounds):
            shutil.rmtree(cache_dir, ignore_errors=True)
            runs["cold"].append(run_child(cache_dir, args.mode))
            runs["warm"].append(run_child(cache_dir, args.mode))
            runs["cpu"].append(run_child(cache_dir, args.mode, device="cpu"))
    finally:
        if own_dir:
            shutil.rmtree(cache_dir, ignore_errors=True)

    def med(kind, field):
        return statistics.median(r[field] for r in runs[kind])

    cold, warm = runs["cold"], runs["warm"]
    programs = cold[-1]["compiles"]
    per_compile = med("cold", "compile_seconds") / max(programs, 1)
    per_load = med("warm", "persistent_load_seconds") / max(warm[-1]["persistent_hits"], 1)
    report = {
        "command": " ".join([sys.executable.rsplit("/", 1)[-1]] + sys.argv),
        "torch": torch.__version__,
        "torchtpu": torchtpu.__version__,
        "mode": args.mode,
        "rounds": args.rounds,
        # Timings on a busy machine are noisy: say how busy it was.
        "host": {"cpus": os.cpu_count(), "loadavg_1m": [load_at_start, os.getloadavg()[0]]},
        "seconds_median": {
            kind: {field: med(kind, field)
                   for field in ("from_spawn", "step_only", "interpreter_and_imports")}
            for kind in ("cold", "warm", "cpu")
        },
        "ratio_cold_over_warm": {
            "from_spawn": med("cold", "from_spawn") / med("warm", "from_spawn"),
            "step_only": med("cold", "step_only") / med("warm", "step_only"),
        },
        "target_ratio": TARGET_RATIO,
        "meets_target": {
            kind: med("cold", kind) / med("warm", kind) >= TARGET_RATIO
            for kind in ("from_spawn", "step_only")
        },
        "programs": {
            "cold_compiles": [r["compiles"] for r in cold],
            "warm_compiles": [r["compiles"] for r in warm],
            "warm_persistent_hits": [r["persistent_hits"] for r in warm],
            "ms_per_compile_cold": per_compile * 1e3,
            "ms_per_load_warm": per_load * 1e3,
            "entries": warm[-1]["entries"],
            "bytes_on_disk": warm[-1]["bytes"],
            "fallback_calls": cold[-1]["fallbacks"],
        },
        "same_loss_cold_and_warm": all(c["loss"] == w["loss"] for c, w in zip(cold, warm)),
        "runs": runs,
    }
    return emit(report, args.out)


if __name__ == "__main__":
    main()

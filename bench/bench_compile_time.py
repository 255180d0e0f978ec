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
    p.add_argument("--rounds", type=int, default=2, help="cold+warm process pairs")
    args = p.parse_args(argv)
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

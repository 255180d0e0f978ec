"""Programs compiled by Hugging Face GPT-2 ``generate`` per eager mode and KV
cache, from an empty compile cache: where per-token recompiles come from.

    python bench/bench_fused_generate.py [--modes strict,fused] [--caches dynamic,static]
        [--storm 4] [--out bench_fused_generate.json]

Each configuration runs in a fresh process with an empty persistent cache dir:
a random GPT-2 (``GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128,
n_positions=64)``, seed 0), prompt of 5 tokens, ``generate(max_new_tokens=20,
do_sample=False)`` twice. Reported per configuration: ``equal`` (tokens equal
CPU PyTorch's), ``compiles`` and ``compile_s`` of the first call,
``per_token`` (programs compiled while producing each token, from a streamer),
``fused_graphs`` (distinct fused graphs per start line), ``strict_ops``
(fused mode: ops run per op or in segments by the storm detector), wall
seconds of both calls and ``second_call_compiles``. ``--storm`` sets
``torchtpu.config.fused_storm_threshold`` (``none``: off). Counts do not
depend on the machine's load; seconds do. A benchmark: nothing asserts.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from _report import emit

CHILD = r"""
import json, sys, time, warnings
import torch, torchtpu
from transformers import GPT2Config, GPT2LMHeadModel
mode, cache, storm = sys.argv[1], sys.argv[2], sys.argv[3]
torchtpu.config.fused_storm_threshold = None if storm == "none" else int(storm)
torch.manual_seed(0)
cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64)
model = GPT2LMHeadModel(cfg).eval()
ids = torch.randint(0, 128, (1, 5))
kw = dict(max_new_tokens=20, do_sample=False, pad_token_id=0)
if cache == "static":
    kw["cache_implementation"] = "static"
with torch.no_grad():
    ref = model.generate(ids, **kw)
m = model.to("tpu")
torchtpu.set_eager_mode(mode)
torchtpu.metrics.reset()
marks = []
class Streamer:
    def put(self, value):
        marks.append(torchtpu.metrics.metrics()["compiles"])
    def end(self):
        marks.append(torchtpu.metrics.metrics()["compiles"])
warnings.simplefilter("ignore")
t0 = time.perf_counter()
with torch.no_grad():
    out = m.generate(ids.to("tpu"), streamer=Streamer(), **kw).cpu()
first = time.perf_counter() - t0
mt = torchtpu.metrics.metrics()
marks_first = list(marks)
t0 = time.perf_counter()
with torch.no_grad():  # the same streamer, so the same reads and graphs
    again = m.generate(ids.to("tpu"), streamer=Streamer(), **kw).cpu()
second = time.perf_counter() - t0
print(json.dumps(dict(
    equal=bool(torch.equal(out, ref) and torch.equal(again, ref)), compiles=mt["compiles"],
    compile_s=round(mt["compile_seconds"], 2), first_call_s=round(first, 2),
    second_call_s=round(second, 3),
    second_call_compiles=torchtpu.metrics.metrics()["compiles"] - mt["compiles"],
    per_token=[b - a for a, b in zip([0] + marks_first, marks_first)][1:],
    fused_graphs=sorted(torchtpu.metrics.recompile_counts().values(), reverse=True),
    strict_ops=mt["fused_strict_ops"])))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="strict,fused")
    ap.add_argument("--caches", default="dynamic,static")
    ap.add_argument("--storm", default="4")
    ap.add_argument("--out")
    args = ap.parse_args()
    report = {}
    for mode in args.modes.split(","):
        for cache in args.caches.split(","):
            with tempfile.TemporaryDirectory() as d:
                env = dict(os.environ, TORCHTPU_CACHE_DIR=d)
                out = subprocess.run([sys.executable, "-c", CHILD, mode, cache, args.storm],
                                     env=env, capture_output=True, text=True, timeout=1800)
            key = f"{mode}/{cache}"
            if out.returncode != 0:
                report[key] = {"error": out.stderr[-1000:]}
            else:
                report[key] = json.loads(out.stdout.strip().splitlines()[-1])
    emit(report, args.out)


if __name__ == "__main__":
    main()

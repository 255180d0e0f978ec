"""Time to first result: a new user's first generate() on tpu, cold and warm, next
to CPU PyTorch; prints JSON.

    python bench/bench_cold_start.py [--out cold_start.json] [--modes cpu,strict,fused]
                                     [--static] [--new-tokens 20] [--models t5,efficientnet]

Workload (issue 12): a ``transformers`` GPT-2 with a small config (2 layers,
d_model 64, 2 heads, vocabulary 1000, 128 positions; random init, seed 0),
``generate(input_ids (1, 8), max_new_tokens=20, do_sample=False)``, called
twice in one process. ``--static`` adds the same with
``cache_implementation="static"``.

``--models`` adds issue 12's other first runs (same cold/warm/CPU scheme; the
``second_s`` column is the same work again in the process): ``t5``, a
``transformers`` T5 with t5-small's default config (6+6 layers, d_model 512,
random init, seed 0): one forward/backward with labels (batch 2, 16 source and
8 target tokens) then ``generate(max_new_tokens=8)``; ``efficientnet``,
``timm``'s efficientnet_b0 (random init, 10 classes): 3 SGD training steps on
(8, 3, 224, 224) inputs. ``tokens_equal_cpu`` compares T5's generated tokens;
for efficientnet it compares the 3 losses within 1e-3 relative.

Each (mode, cache) runs in a fresh Python process: ``cpu`` is CPU PyTorch;
``strict`` and ``fused`` are tpu's eager modes with the default settings
(strict compiles in the background, growing buckets ``pow2``); the suffixes
turn a default off: ``_sync`` (``background_compile=False``: each new program
compiled at its op), ``_exact`` (``TORCHTPU_GROWING_BUCKETS=none``: a program
per length), and ``_hybrid`` turns one on (``fused_hybrid``: fused mode's
hybrid, ``TORCHTPU_FUSED_HYBRID=1``, ops run one by one while a new graph's
program compiles in the background); they combine (``strict_sync_exact`` is the settings before they
became the defaults), and the ratios ``<mode>_<suffix>_cold_first_over_<mode>_cold_first``
say what each default gains), each run first with an empty
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
    torchtpu.set_eager_mode(mode.split("_")[0], background_compile="_sync" not in mode)
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


MODEL_CHILD = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import torch
mode, model_name = sys.argv[1], sys.argv[2]
device = "cpu"
if mode != "cpu":
    import torchtpu
    torchtpu.set_eager_mode(mode.split("_")[0], background_compile="_sync" not in mode)
    device = "tpu"
torch.manual_seed(0)


def t5():
    from transformers import T5Config, T5ForConditionalGeneration
    from transformers.utils import logging
    logging.set_verbosity_error()
    config = T5Config(decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(config).to(device)
    src = torch.randint(0, 32000, (2, 16)).to(device)
    labels = torch.randint(0, 32000, (2, 8)).to(device)

    def once():
        model.train()
        model(input_ids=src, labels=labels).loss.backward()
        model.eval()
        with torch.no_grad():
            out = model.generate(src, max_new_tokens=8, do_sample=False)
        return out.cpu().tolist()
    return once


def efficientnet():
    from torchtpu.tools import timm_compat
    timm = timm_compat.import_timm()
    model = timm.create_model("efficientnet_b0", pretrained=False, num_classes=10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 3, 224, 224).to(device)
    y = torch.randint(0, 10, (8,)).to(device)

    def once():
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses
    return once


once = {"t5": t5, "efficientnet": efficientnet}[model_name]()
times, result = [], None
for _ in range(2):
    t = time.perf_counter()
    r = once()
    times.append(time.perf_counter() - t)
    result = r if result is None else result
m = torchtpu.metrics.metrics() if mode != "cpu" else {}
print(json.dumps({"times": times, "tokens": result, "metrics": m}))
"""


def run_child(mode, static, new_tokens, cache_dir, model=None):
    env = dict(os.environ)
    env.pop("TORCHTPU_CACHE", None)
    env.pop("TORCHTPU_EAGER_MODE", None)
    env.pop("TORCHTPU_GROWING_BUCKETS", None)
    env.pop("TORCHTPU_FUSED_HYBRID", None)
    if mode.endswith("_exact"):
        env["TORCHTPU_GROWING_BUCKETS"] = "none"
    if mode.endswith("_hybrid"):
        env["TORCHTPU_FUSED_HYBRID"] = "1"
    if cache_dir is not None:
        env["TORCHTPU_CACHE_DIR"] = cache_dir
    argv = ([sys.executable, "-c", MODEL_CHILD, mode, model] if model else
            [sys.executable, "-c", CHILD, mode, "1" if static else "0", str(new_tokens)])
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
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


def same_result(a, b):
    """Tokens equal, or losses (floats) within 1e-3 relative."""
    if a and isinstance(a[0], float):
        return all(abs(x - y) <= 1e-3 * max(abs(y), 1e-6) for x, y in zip(a, b))
    return a == b


def workload(static, modes, new_tokens, model=None):
    rows, cpu_tokens = {}, None
    if "cpu" in modes:
        rows["cpu"], cpu_tokens = run_child("cpu", static, new_tokens, None, model)
    for mode in (m for m in modes if m != "cpu"):
        cache_dir = tempfile.mkdtemp(prefix="torchtpu-bench-cold-")
        try:
            for kind in ("cold", "warm"):
                row, tokens = run_child(mode, static, new_tokens, cache_dir, model)
                if cpu_tokens is not None:
                    row["tokens_equal_cpu"] = same_result(tokens, cpu_tokens)
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
    for mode in ("strict", "fused"):
        for suffix in ("_sync", "_exact", "_sync_exact", "_hybrid"):
            if f"{mode}{suffix}_cold" in rows and f"{mode}_cold" in rows:
                ratios[f"{mode}{suffix}_cold_first_over_{mode}_cold_first"] = round(
                    rows[f"{mode}{suffix}_cold"]["first_s"] / rows[f"{mode}_cold"]["first_s"], 2)
    return {"runs": rows, "ratios": ratios}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="also write the JSON to this file")
    p.add_argument("--modes", default="cpu,strict,fused",
                   help="comma-separated, from cpu, strict, fused, strict_sync, strict_exact, "
                        "strict_sync_exact, fused_exact, fused_hybrid (_sync: strict without "
                        "background compiles; _exact: growing_buckets off; _hybrid: fused "
                        "hybrid on, TORCHTPU_FUSED_HYBRID=1)")
    p.add_argument("--static", action="store_true",
                   help="also run generate with cache_implementation='static'")
    p.add_argument("--new-tokens", type=int, default=20)
    p.add_argument("--models", default="",
                   help="comma-separated extra first runs, from t5, efficientnet")
    p.add_argument("--skip-gpt2", action="store_true", help="only the --models runs")
    args = p.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    start = time.time()
    report = {"command": "python bench/bench_cold_start.py " + " ".join(argv or sys.argv[1:])}
    if not args.skip_gpt2:
        report["gpt2_generate"] = workload(False, modes, args.new_tokens)
    if args.static:
        report["gpt2_generate_static_cache"] = workload(True, modes, args.new_tokens)
    for model in (m for m in args.models.split(",") if m):
        report[f"{model}_first_run"] = workload(False, modes, args.new_tokens, model)
    report["host"] = {"cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0],
                      "wall_s": round(time.time() - start, 1)}
    return emit(report, args.out)


if __name__ == "__main__":
    main()

"""Fused eager mode benchmark: three training steps in tpu debug, strict and fused
mode and on CPU PyTorch, side by side in one process; prints JSON medians and ratios.

    python bench/bench_fused.py [--out bench_fused.json] [--steps 20] [--rounds 5]
        [--warmup 3] [--compile-steps 50] [--cache-rounds 2] [--mem-steps 5]
        [--only mlp,digits,gpt] [--quick] [--hybrid-rounds N]

Workloads (issue 4), each a full training step: forward, loss, backward,
optimizer update:
1. ``mlp``: 3 linear layers (1024 -> 1024 -> 1024 -> 10, ReLU between), batch
   256 of float32 noise, cross-entropy, AdamW.
2. ``digits``: the ``train_digits`` CNN (:class:`DigitsCNN`) on its first 64
   training images, cross-entropy, the example's SGD with momentum.
3. ``gpt``: a decoder-only transformer (GPT-2 layout: token and position
   embeddings, 2 pre-norm blocks of causal self-attention and a GELU MLP, d_model
   256, 4 heads, final LayerNorm, linear head over a 512-token vocabulary) on
   sequences of 128 random tokens, batch 8, next-token cross-entropy, AdamW.
   Written with plain ``torch.nn`` modules; no dropout, so every configuration
   computes the same numbers.

Each workload has four configurations, each with its own copy of the model
(same initial weights, from a CPU seed) and the same cycle of 4 batches already
on the device: ``cpu`` (PyTorch eager), ``tpu_debug``, ``tpu_strict`` and
``tpu_fused``. A tpu step ends with ``torchtpu.sync()``, so a timed step is a
finished step; in fused mode that sync is also the flush that cuts the op
stream into one graph per step (the place ``torch_xla`` calls ``mark_step``).
After ``--warmup`` untimed steps per configuration (they compile), ``--rounds``
rounds follow; in each round every configuration runs its share of ``--steps``
timed steps in turn, so the load of a shared machine weighs on all alike.

Reported per workload:
- ``ms_per_step_median`` per configuration and the ratios; the issue's target
  is fused at least 2x faster than strict on ``mlp`` and ``gpt``. Also the
  host part of a step (``ms_issue_median``: until the last op was issued), the
  programs run per step, and the step's FLOPs and the rate achieved: fusion
  saves per-op dispatch and memory traffic, not the matmul FLOPs.
- ``compiles``: XLA compiles and programs needed (in-memory cache misses)
  during warm-up, and during ``--compile-steps`` more fused steps after it; the
  target is none in the latter (a flat compile counter).
- ``losses``: the largest relative difference between configurations, step by
  step (the same batches in the same order): a wrong result shows here.
- CPU fallbacks per tpu configuration (an op without a lowering).

For ``gpt`` only, in separate processes (RSS is per process):
- ``peak_rss``: peak RSS (``VmHWM``) of a process that runs ``--mem-steps`` steps on
  CPU, tpu fused and tpu strict, with the programs already in the persistent
  cache (the in-process runs put them there), so a compile's own memory is not
  counted. Target: fused peak at most 1.5x the CPU one.
- ``persistent_cache``: time to the first finished fused step of a process
  with an empty cache directory (cold) and of the next one (warm), seconds, as
  in ``bench_cache.py`` (which covers the ``digits`` step in strict mode only).
  Target: cold over warm at least 5x.
- ``hybrid_first_step`` (``--hybrid-rounds N``, default 0: not run): the
  first fused step's seconds (``step_only_s``), compiles, persistent-cache
  hits and ops run one by one, median of N rounds, in four kinds of process:
  an empty cache dir with hybrid mode off and on (``cold``), and a cache dir
  a strict run of one step filled (``strict_warm``: each op's program at
  hand, the fused program not), hybrid off and on
  (``torchtpu.set_eager_mode``'s ``hybrid``).

A benchmark, not a test: nothing here asserts. ``--quick`` runs a smaller
version of everything (about 1.5 minutes on 2 cores, 3.5 without --quick,
with the programs already in the persistent cache).
"""

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import torch
import torch.nn.functional as F
from torch import nn

import torchtpu
from torchtpu.examples import train_digits

from _report import emit

TARGET_FUSED_SPEEDUP = 2.0  # fused at least 2x faster than strict (mlp, gpt)
TARGET_PEAK_RSS_RATIO = 1.5  # fused GPT step peak RSS over CPU eager's
TARGET_CACHE_RATIO = 5.0  # cold over warm, time to the first finished step
BATCHES = 4  # distinct batches each configuration cycles through
SEED = 0

# (name, device, eager mode) of each configuration, measured in turn.
CONFIGS = (("cpu", "cpu", None), ("tpu_debug", "tpu", "debug"),
           ("tpu_strict", "tpu", "strict"), ("tpu_fused", "tpu", "fused"))

GPT_VOCAB, GPT_D_MODEL, GPT_HEADS, GPT_LAYERS, GPT_SEQ, GPT_BATCH = 512, 256, 4, 2, 128, 8


class GPT(nn.Module):
    """Decoder-only transformer; input ``[B, T]`` int64 token ids, output logits
    ``[B, T, vocab]`` float32.

    A GPT block is causal self-attention plus an MLP, with no cross-attention,
    so it is ``nn.TransformerEncoderLayer`` (pre-norm, GELU) under a causal mask;
    ``nn.TransformerDecoderLayer`` would add attention to an encoder's memory,
    which a GPT does not have.
    """

    def __init__(self, vocab=GPT_VOCAB, d_model=GPT_D_MODEL, heads=GPT_HEADS,
                 layers=GPT_LAYERS, seq=GPT_SEQ):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)
        block = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model,
                                           dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        # -inf above the diagonal: position t attends to positions <= t. A buffer,
        # so it moves with the model and is not rebuilt every step.
        self.register_buffer("causal_mask", nn.Transformer.generate_square_subsequent_mask(seq),
                             persistent=False)
        self.register_buffer("positions", torch.arange(seq), persistent=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(self.positions[: idx.shape[1]])
        x = self.blocks(x, mask=self.causal_mask, is_causal=True)
        return self.head(self.ln_f(x))


def _mlp_setup():
    g = torch.Generator().manual_seed(SEED + 1)
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    batches = [(torch.randn(256, 1024, generator=g), torch.randint(0, 10, (256,), generator=g))
               for _ in range(BATCHES)]
    return model, torch.optim.AdamW, batches, lambda m, b: F.cross_entropy(m(b[0]), b[1])


def _digits_setup():
    x_train, y_train, _, _ = train_digits.load_data(SEED)
    batches = [(x_train[i * 64:(i + 1) * 64], y_train[i * 64:(i + 1) * 64])
               for i in range(BATCHES)]
    return (train_digits.DigitsCNN(), lambda p: train_digits.make_optimizer("sgd", p), batches,
            lambda m, b: F.cross_entropy(m(b[0]), b[1]))


def _gpt_setup():
    g = torch.Generator().manual_seed(SEED + 1)
    batches = [torch.randint(0, GPT_VOCAB, (GPT_BATCH, GPT_SEQ + 1), generator=g)
               for _ in range(BATCHES)]
    batches = [(b[:, :-1].contiguous(), b[:, 1:].contiguous()) for b in batches]

    def loss_fn(m, b):
        return F.cross_entropy(m(b[0]).reshape(-1, GPT_VOCAB), b[1].reshape(-1))

    return GPT(), lambda p: torch.optim.AdamW(p, lr=3e-4), batches, loss_fn


# Each setup returns (CPU model, optimizer factory, CPU batches, loss(model, batch)).
WORKLOADS = {"mlp": _mlp_setup, "digits": _digits_setup, "gpt": _gpt_setup}


class Run:
    """One configuration of one workload: its model, optimizer and batches on
    ``device``, and the loss of every step it ran (device tensors)."""

    def __init__(self, workload, device, mode):
        self.device, self.mode = torch.device(device), mode
        torch.manual_seed(SEED)  # the same initial weights for every configuration
        model, make_opt, batches, self.loss_fn = WORKLOADS[workload]()
        self.model = model.to(device)
        self.opt = make_opt(self.model.parameters())
        self.batches = [tuple(t.to(device) for t in b) for b in batches]
        self.losses = []
        self.step_seconds = []
        self.issue_seconds = []  # of each timed step: until the sync was called

    def steps(self, n, timed):
        """Runs ``n`` training steps, each ending when its work has finished."""
        if self.mode is not None:
            torchtpu.set_eager_mode(self.mode)  # switching waits for pending work
        for _ in range(n):
            batch = self.batches[len(self.losses) % len(self.batches)]
            start = time.perf_counter()
            loss = self.loss_fn(self.model, batch)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            issued = time.perf_counter()
            if self.device.type == "tpu":
                torchtpu.sync()  # fused: the flush that ends this step's graph
            if timed:
                self.step_seconds.append(time.perf_counter() - start)
                self.issue_seconds.append(issued - start)
            self.losses.append(loss.detach())


class Counters:
    """Deltas of the runtime counters and fallback counts around a block."""

    def __enter__(self):
        self._m = torchtpu.metrics.metrics()
        self._f = torchtpu.metrics.fallback_counts()
        return self

    def __exit__(self, *exc):
        m, f = torchtpu.metrics.metrics(), torchtpu.metrics.fallback_counts()
        self.compiles = m["compiles"] - self._m["compiles"]
        self.programs = m["cache_misses"] - self._m["cache_misses"]
        self.executes = m["executes"] - self._m["executes"]
        self.fallbacks = {op: n - self._f.get(op, 0) for op, n in f.items()
                          if n != self._f.get(op, 0)}


def flops_per_step(name):
    """Forward + backward FLOPs of one step of ``name``, counted on CPU by
    ``torch.utils.flop_counter`` (matmuls, convolutions, attention; the
    optimizer's elementwise update is not counted)."""
    from torch.utils.flop_counter import FlopCounterMode

    run = Run(name, "cpu", None)
    with FlopCounterMode(display=False) as counter:
        run.loss_fn(run.model, run.batches[0]).backward()
    return counter.get_total_flops()


def _loss_diffs(losses):
    """Largest relative and absolute step-by-step difference between the loss
    sequences of pairs of configurations. The relative one is inflated where a
    loss nears zero (a memorised batch)."""
    out = {}
    for a, b in (("tpu_fused", "tpu_strict"), ("tpu_debug", "tpu_strict"),
                 ("tpu_strict", "cpu"), ("tpu_fused", "cpu")):
        pairs = list(zip(losses[a], losses[b]))
        name = f"{a.removeprefix('tpu_')}_vs_{b.removeprefix('tpu_')}"
        out[f"max_rel_diff_{name}"] = max(abs(x - y) / max(abs(y), 1e-30) for x, y in pairs)
        out[f"max_abs_diff_{name}"] = max(abs(x - y) for x, y in pairs)
    return out


def bench_workload(name, args):
    """Times ``name`` in every configuration; see the module doc for the fields."""
    runs, counts = {}, {}
    for config, device, mode in CONFIGS:
        runs[config] = Run(name, device, mode)
        with Counters() as c:
            runs[config].steps(args.warmup, timed=False)
        counts[config] = {"warmup_compiles": c.compiles, "warmup_programs": c.programs,
                          "fallbacks": dict(c.fallbacks)}
    per_round = math.ceil(args.steps / args.rounds)
    executes = dict.fromkeys(runs, 0)
    for _ in range(args.rounds):
        for config, _, _ in CONFIGS:
            with Counters() as c:
                runs[config].steps(per_round, timed=True)
            executes[config] += c.executes
            for op, n in c.fallbacks.items():
                counts[config]["fallbacks"][op] = counts[config]["fallbacks"].get(op, 0) + n

    # The same batches in the same order: step k of every configuration
    # starts from the same weights up to rounding.
    torchtpu.set_eager_mode("strict")
    losses = {config: [v.item() for v in run.losses] for config, run in runs.items()}

    fused = runs["tpu_fused"]
    compiles_along = []  # cumulative compiles after each step
    with Counters() as steady:
        base = torchtpu.metrics.metrics()["compiles"]
        for _ in range(args.compile_steps):
            fused.steps(1, timed=False)
            compiles_along.append(torchtpu.metrics.metrics()["compiles"] - base)
    torchtpu.set_eager_mode("strict")

    ms = {config: statistics.median(run.step_seconds) * 1e3 for config, run in runs.items()}
    speedup = ms["tpu_strict"] / ms["tpu_fused"]
    flops = flops_per_step(name)
    result = {
        "timed_steps_per_config": per_round * args.rounds,
        # How compute-bound a step is: its matmul/conv FLOPs over the median time.
        "gflop_per_step": flops / 1e9,
        "gflops_achieved": {c: flops / 1e9 / (t / 1e3) for c, t in ms.items()},
        "ms_per_step_median": ms,
        "ms_per_step_min": {c: min(r.step_seconds) * 1e3 for c, r in runs.items()},
        # Host time until the step's last op was issued (strict: dispatch, fused:
        # recording); the rest of a step is waiting in sync for the device.
        "ms_issue_median": {c: statistics.median(r.issue_seconds) * 1e3
                            for c, r in runs.items() if c != "cpu"},
        "programs_run_per_step": {c: executes[c] / len(runs[c].step_seconds)
                                  for c in runs if c != "cpu"},
        "ratio_fused_over_strict": ms["tpu_fused"] / ms["tpu_strict"],
        "speedup_fused_over_strict": speedup,
        "ratio_fused_over_cpu": ms["tpu_fused"] / ms["cpu"],
        "ratio_strict_over_cpu": ms["tpu_strict"] / ms["cpu"],
        "ratio_debug_over_strict": ms["tpu_debug"] / ms["tpu_strict"],
        "compiles": {
            "warmup": {c: {k: v for k, v in counts[c].items() if k != "fallbacks"}
                       for c in counts if c != "cpu"},
            "fused_steady_steps": args.compile_steps,
            "fused_steady_compiles": steady.compiles,
            "fused_steady_programs": steady.programs,
            "fused_steady_compiles_along": compiles_along,
            "flat": steady.compiles == 0 and steady.programs == 0,
        },
        "losses": {
            "steps": len(losses["cpu"]),
            "first_last_cpu": [losses["cpu"][0], losses["cpu"][-1]],
            **_loss_diffs(losses),
        },
        "fallbacks": {c: counts[c]["fallbacks"] for c in counts if c != "cpu"},
    }
    if name in ("mlp", "gpt"):
        result["target_speedup"] = TARGET_FUSED_SPEEDUP
        result["meets_target_speedup"] = speedup >= TARGET_FUSED_SPEEDUP
    del runs
    return result


# ---- separate processes: peak RSS and the persistent cache (gpt only) ----

def _peak_rss_bytes():
    """This process's peak resident set size, bytes.

    ``VmHWM`` from /proc, not ``ru_maxrss``: Linux carries the parent's high-water
    mark through fork+exec into the child's ``ru_maxrss``, so a child of this
    (large) benchmark process would report the parent's peak.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def child_main(device, mode, steps):
    """Runs ``steps`` GPT training steps in this fresh process; prints one JSON
    line: wall clock times (``time.time()`` seconds), peak RSS in bytes before
    the model and at the end, and the runtime counters."""
    warnings.filterwarnings("ignore", message=r"tpu: .* has no tpu lowering")
    if mode is not None:
        torchtpu.set_eager_mode(mode)
    # PyTorch's lazy imports on the first optimizer, and the plugin's start:
    # paid by every process, before the clock that the cache can shorten.
    torch.optim.AdamW([torch.zeros(1, requires_grad=True)])
    torch.zeros(1, device=device)
    t_ready = time.time()
    rss_ready = _peak_rss_bytes()
    run = Run("gpt", device, mode)
    run.steps(1, timed=False)
    loss = run.losses[0].item()
    t_first = time.time()
    run.steps(steps - 1, timed=False)
    if device == "tpu":
        torchtpu.sync()
    print(json.dumps({"t_ready": t_ready, "t_first_step": t_first, "first_loss": loss,
                      "rss_ready": rss_ready,
                      "rss_peak": _peak_rss_bytes(),
                      "metrics": torchtpu.metrics.metrics(),
                      "fallbacks": torchtpu.metrics.fallback_counts()}))


def run_child(device, mode, steps, cache_dir=None, hybrid=False):
    env = dict(os.environ)
    env.pop("TORCHTPU_EAGER_MODE", None)
    env["TORCHTPU_FUSED_HYBRID"] = "1" if hybrid else "0"
    if cache_dir is not None:
        env["TORCHTPU_CACHE_DIR"] = cache_dir
        env.pop("TORCHTPU_CACHE", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", device, mode or "",
           "--mem-steps", str(steps)]
    t_spawn = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"benchmark child {cmd[3:]} failed:\n{r.stderr}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    m = out["metrics"]
    return {
        "from_spawn_s": out["t_first_step"] - t_spawn,
        "step_only_s": out["t_first_step"] - out["t_ready"],
        "first_loss": out["first_loss"],
        "peak_rss_mib": out["rss_peak"] / 2**20,
        "rss_before_model_mib": out["rss_ready"] / 2**20,
        "compiles": m["compiles"],
        "compile_s": m["compile_seconds"],
        "persistent_hits": m["persistent_hits"],
        "fused_strict_ops": m["fused_strict_ops"],
        "fallbacks": out["fallbacks"],
    }


def hybrid_first_step(rounds):
    """First fused GPT step with and without hybrid mode (see module doc)."""
    runs = {k: [] for k in ("cold", "cold_hybrid", "strict_warm", "strict_warm_hybrid")}
    root = tempfile.mkdtemp(prefix="torchtpu-bench-hybrid-")
    try:
        for r in range(rounds):
            for hybrid in (False, True):
                d = os.path.join(root, f"cold{r}{hybrid}")
                runs["cold_hybrid" if hybrid else "cold"].append(
                    run_child("tpu", "fused", 3, d, hybrid))
            strict_dir = os.path.join(root, f"strict{r}")
            run_child("tpu", "strict", 1, strict_dir)
            for hybrid in (False, True):
                d = os.path.join(root, f"warm{r}{hybrid}")
                shutil.copytree(strict_dir, d)
                runs["strict_warm_hybrid" if hybrid else "strict_warm"].append(
                    run_child("tpu", "fused", 3, d, hybrid))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    fields = ("step_only_s", "compiles", "persistent_hits", "fused_strict_ops")
    return {"rounds": rounds,
            "median": {k: {f: statistics.median(x[f] for x in v) for f in fields}
                       for k, v in runs.items()},
            "same_first_loss": len({x["first_loss"] for v in runs.values() for x in v}) == 1}


def peak_rss(steps):
    """Peak RSS of a GPT training process per configuration (see module doc)."""
    runs = {"cpu": run_child("cpu", None, steps), "tpu_fused": run_child("tpu", "fused", steps),
            "tpu_strict": run_child("tpu", "strict", steps)}
    ratio = runs["tpu_fused"]["peak_rss_mib"] / runs["cpu"]["peak_rss_mib"]

    def growth(c):  # what the model, its steps and their programs added
        return runs[c]["peak_rss_mib"] - runs[c]["rss_before_model_mib"]

    return {
        "steps": steps,
        "runs": runs,
        "ratio_fused_over_cpu": ratio,
        "ratio_strict_over_cpu": runs["tpu_strict"]["peak_rss_mib"] / runs["cpu"]["peak_rss_mib"],
        "growth_after_start_mib": {c: growth(c) for c in runs},
        "target_ratio": TARGET_PEAK_RSS_RATIO,
        "meets_target": ratio <= TARGET_PEAK_RSS_RATIO,
    }


def persistent_cache(rounds):
    """Cold vs warm fused GPT process, in a temp cache dir (see module doc)."""
    cache_dir = tempfile.mkdtemp(prefix="torchtpu-bench-fused-cache-")
    runs = {"cold": [], "warm": []}
    try:
        for _ in range(rounds):
            shutil.rmtree(cache_dir, ignore_errors=True)
            runs["cold"].append(run_child("tpu", "fused", 1, cache_dir))
            runs["warm"].append(run_child("tpu", "fused", 1, cache_dir))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)

    def med(kind, field):
        return statistics.median(r[field] for r in runs[kind])

    ratios = {f: med("cold", f) / med("warm", f) for f in ("from_spawn_s", "step_only_s")}
    return {
        "rounds": rounds,
        "seconds_median": {k: {f: med(k, f) for f in ("from_spawn_s", "step_only_s")}
                           for k in runs},
        "ratio_cold_over_warm": ratios,
        "target_ratio": TARGET_CACHE_RATIO,
        "meets_target": {f: r >= TARGET_CACHE_RATIO for f, r in ratios.items()},
        # The cold process's peak includes XLA compiling the step's programs.
        "peak_rss_mib_median": {k: med(k, "peak_rss_mib") for k in runs},
        "same_first_loss": all(c["first_loss"] == w["first_loss"]
                               for c, w in zip(runs["cold"], runs["warm"])),
        "runs": runs,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="also write the JSON to this file")
    p.add_argument("--steps", type=int, default=20, help="timed steps per configuration")
    p.add_argument("--rounds", type=int, default=5, help="turns the configurations take")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per configuration")
    p.add_argument("--compile-steps", type=int, default=50,
                   help="fused steps after warm-up whose compiles are counted")
    p.add_argument("--cache-rounds", type=int, default=2, help="cold+warm process pairs")
    p.add_argument("--mem-steps", type=int, default=5, help="GPT steps per peak-RSS process")
    p.add_argument("--hybrid-rounds", type=int, default=0,
                   help="rounds of the hybrid first-step processes (0: none; runs "
                   "even with --only '')")
    p.add_argument("--only", default=",".join(WORKLOADS),
                   help="comma-separated workloads to run (mlp,digits,gpt)")
    p.add_argument("--quick", action="store_true",
                   help="--steps 6 --rounds 3 --compile-steps 10 --cache-rounds 1 --mem-steps 3")
    p.add_argument("--child", nargs=2, metavar=("DEVICE", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child_main(args.child[0], args.child[1] or None, args.mem_steps)
    if args.quick:
        args.steps, args.rounds, args.compile_steps = 6, 3, 10
        args.cache_rounds, args.mem_steps = 1, 3
    # One warning per op that falls back is useful in a run, noise in a report:
    # the fallback counts go into the JSON instead.
    warnings.filterwarnings("ignore", message=r"tpu: .* has no tpu lowering")

    t0, load_at_start = time.time(), os.getloadavg()[0]
    previous = torchtpu.get_eager_mode()
    workloads = [w for w in args.only.split(",") if w]
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        p.error(f"--only: unknown workloads {unknown}; choose from {sorted(WORKLOADS)}")
    report = {
        "command": " ".join([sys.executable.rsplit("/", 1)[-1]] + sys.argv),
        "torch": torch.__version__,
        "torchtpu": torchtpu.__version__,
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "child")},
        "workloads": {},
    }
    for name in workloads:
        report["workloads"][name] = bench_workload(name, args)
    torchtpu.set_eager_mode(previous)
    if "gpt" in workloads:
        report["gpt_peak_rss"] = peak_rss(args.mem_steps)
        report["gpt_persistent_cache"] = persistent_cache(args.cache_rounds)
    if args.hybrid_rounds > 0:
        report["gpt_hybrid_first_step"] = hybrid_first_step(args.hybrid_rounds)
    # Timings on a busy machine are noisy: say how busy it was.
    report["host"] = {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                      "loadavg_1m": [load_at_start, os.getloadavg()[0]],
                      "wall_s": time.time() - t0}
    return emit(report, args.out)


if __name__ == "__main__":
    main()

"""Eager-mode benchmarks, side by side in one process; prints JSON medians and ratios.

    python bench/bench_eager.py [--out bench_eager.json] [--loops 20] [--epochs 3]
        [--rounds 2] [--add-only] [--numel 1000] [--instructions] [--cases add,neg,relu,...]

(a) Per-op overhead in strict mode: ``c = a + b`` on two 1,000-element float32
    tensors (``--numel``: at 100 the plugin runs each program on the calling
    thread, at 1,000 and up on its thread pool, a thread wake-up per op; the
    JSON keeps its ``add_1000_float32`` key and says ``numel``), a loop of
    1,000 ops ending in one sync, tpu vs CPU PyTorch
    (tpu debug mode is reported too). Microseconds per op, median over loops.
    Fused mode's recording cost is the loop up to its last op (``tpu_fused``,
    the sync that runs the graph not counted; ``tpu_fused_with_flush`` counts
    it). Targets (issue 15): at most 3 us per op strict, 2 us recording.
    ``--instructions`` also counts the host instructions per op of the same
    loop (cpu, tpu strict, tpu fused recording) under valgrind's callgrind:
    a second run of this script whose loops are collected, N and 2N ops, the
    difference over N (warm-up, compiles and syncs not counted; only the
    calling thread, so PJRT's execution threads are not in it). Noise-free,
    unlike the times; ``--callgrind-dir`` keeps the profiles for
    ``callgrind_annotate --inclusive=yes``. ``--cases`` adds other calls to
    the count (cpu, tpu strict and tpu fused recording, same scheme): ``neg`` (``-a``),
    ``exp``, ``relu``, ``mul_scalar`` (``a * 0.5``), ``add_`` (``c.add_(b)``),
    ``mul_`` (``c.mul_(b)``, ``b`` a tensor of ones), ``add_out``
    (``torch.add(a, b, out=c)``): issue 15's dispatch cache covers each, in
    strict and fused mode.
(b) ``train_digits``: wall time per training step (forward, backward, optimizer
    step) for tpu strict, tpu debug and CPU. Milliseconds per step, median over
    the epochs after the first of each run (which pays for compilation on tpu).

The configurations take turns (loop by loop in (a), run by run in (b)) so that
the load of a shared machine weighs on all of them alike.

A benchmark, not a test: nothing here asserts.
"""

import argparse
import glob
import operator
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import torch

import torchtpu
from torchtpu.examples import train_digits

from _report import emit

NUMEL = 1000
OPS_PER_LOOP = 1000

TARGET_US_PER_OP_STRICT = 3.0  # issue 15
TARGET_US_PER_OP_FUSED_RECORDING = 2.0

# (name, device, eager mode) of each configuration, measured in turn.
CONFIGS = (("cpu", "cpu", None), ("tpu_strict", "tpu", "strict"), ("tpu_debug", "tpu", "debug"),
           ("tpu_fused", "tpu", "fused"))
# Ops per collected loop under callgrind (N, then 2N): fused graphs of 2N ops
# stay under the node cap, so no flush falls inside a loop.
CALLGRIND_OPS = {"cpu": 1000, "tpu_strict": 1000, "tpu_fused": 500}
# The same for --cases: an op with a Python scalar adds a parameter node per
# call (not shared, so a value that changes never changes the graph), so
# fused loops are shorter there, again to keep flushes out of them.
CASE_OPS = {"cpu": 1000, "tpu_strict": 1000, "tpu_fused": 250}


def _set_mode(mode):
    if mode is not None:
        torchtpu.set_eager_mode(mode)  # switching to debug waits for pending work


def _sync(device):
    if torch.device(device).type == "tpu":
        torchtpu.sync()


def add_us_per_op(loops, numel=NUMEL):
    """Median microseconds per ``c = a + b`` for each configuration.

    The configurations take turns, one 1,000-op loop each, so a change in the
    machine's load hits all of them alike.
    """
    tensors = {}
    for _, device, _ in CONFIGS:
        tensors[device] = (torch.randn(numel).to(device), torch.randn(numel).to(device))
    times = {name: [] for name, _, _ in CONFIGS}
    times["tpu_fused_with_flush"] = []
    for i in range(loops + 1):  # loop 0 compiles and warms up; not counted
        for name, device, mode in CONFIGS:
            _set_mode(mode)
            a, b = tensors[device]
            _sync(device)
            start = time.perf_counter()
            for _ in range(OPS_PER_LOOP):
                c = a + b
            issued = time.perf_counter()
            _sync(device)
            elapsed = time.perf_counter() - start
            del c
            if i > 0 and mode == "fused":
                # Recording only; the flush (fingerprint, execute, wait) apart.
                times[name].append((issued - start) / OPS_PER_LOOP * 1e6)
                times["tpu_fused_with_flush"].append(elapsed / OPS_PER_LOOP * 1e6)
            elif i > 0:
                times[name].append(elapsed / OPS_PER_LOOP * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def _add_loop(a, b, n):
    for _ in range(n):
        c = a + b
    return c


def _case_loop(case, a, b, c, n):
    """n calls of ``case`` (see the module doc's ``--cases``)."""
    if case == "neg":
        for _ in range(n):
            c = -a
    elif case == "exp":
        for _ in range(n):
            c = a.exp()
    elif case == "relu":
        for _ in range(n):
            c = a.relu()
    elif case == "mul_scalar":
        for _ in range(n):
            c = a * 0.5
    elif case == "add_":
        for _ in range(n):
            c.add_(b)
    elif case == "mul_":
        for _ in range(n):
            c.mul_(b)
    elif case == "add_out":
        for _ in range(n):
            torch.add(a, b, out=c)
    else:
        raise ValueError(f"unknown case {case!r}")
    return c


EXTRA_CASES = ("neg", "exp", "relu", "mul_scalar", "add_", "mul_", "add_out")
CASE_CONFIGS = (
    ("cpu", "cpu", None),
    ("tpu_strict", "tpu", "strict"),
    ("tpu_fused", "tpu", "fused"),
)


def _callgrind_child(cases=()):
    """Runs under callgrind (see instructions_per_op): per configuration, a
    warm-up, then loops of N and 2N ops, each called through operator.call,
    the one function whose calls are collected and dumped; then the same for
    each extra case in cpu, tpu strict and tpu fused."""
    for name, device, mode in CONFIGS:
        if name not in CALLGRIND_OPS:
            continue
        n = CALLGRIND_OPS[name]
        _set_mode(mode)
        a, b = torch.randn(NUMEL).to(device), torch.randn(NUMEL).to(device)
        for ops in (n, 2 * n):  # compiles (fused: both graph sizes)
            _add_loop(a, b, ops)
            _sync(device)
        for ops in (n, 2 * n):
            _sync(device)
            operator.call(_add_loop, a, b, ops)
            _sync(device)  # a fused graph's flush falls outside the loops
    torchtpu.set_eager_mode("strict")
    for case in cases:
        for name, device, mode in CASE_CONFIGS:
            n = CASE_OPS[name]
            _set_mode(mode)
            a = torch.randn(NUMEL).to(device)
            b = torch.ones(NUMEL).to(device)
            c = torch.randn(NUMEL).to(device)
            for ops in (n, 2 * n):
                _case_loop(case, a, b, c, ops)
                _sync(device)
            for ops in (n, 2 * n):
                _sync(device)
                operator.call(_case_loop, case, a, b, c, ops)
                _sync(device)
    torchtpu.set_eager_mode("strict")


def _callgrind_total(path):
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def instructions_per_op(keep_dir=None, cases=()):
    """Host instructions per ``c = a + b`` (calling thread only), counted by
    callgrind in a second run of this script: {config: instructions}, and
    under "cases" {case: {config: instructions}} for the extra ``cases``."""
    if shutil.which("valgrind") is None:
        return {"error": "valgrind not found"}
    out_dir = keep_dir or tempfile.mkdtemp(prefix="bench_eager_cg_")
    os.makedirs(out_dir, exist_ok=True)
    for old in glob.glob(os.path.join(out_dir, "callgrind.out*")):
        os.remove(old)
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
           "--toggle-collect=_operator_call", "--dump-after=_operator_call",
           f"--callgrind-out-file={os.path.join(out_dir, 'callgrind.out')}",
           sys.executable, os.path.abspath(__file__), "--_callgrind-child",
           "--cases", ",".join(cases)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # One dump per collected loop, numbered in call order (the final dump at
    # exit, with nothing collected since, comes last).
    dumps = sorted((int(m.group(1)), p) for p in glob.glob(os.path.join(out_dir, "callgrind.out.*"))
                   if (m := re.search(r"\.(\d+)$", p)))
    totals = [_callgrind_total(p) for _, p in dumps]
    result = {}
    for k, name in enumerate(CALLGRIND_OPS):
        n = CALLGRIND_OPS[name]
        result[name] = (totals[2 * k + 1] - totals[2 * k]) / n
    k = len(CALLGRIND_OPS)
    for case in cases:
        for name, _, _ in CASE_CONFIGS:
            n = CASE_OPS[name]
            result.setdefault("cases", {}).setdefault(case, {})[name] = \
                (totals[2 * k + 1] - totals[2 * k]) / n
            k += 1
    if keep_dir is None:
        shutil.rmtree(out_dir, ignore_errors=True)
    else:
        result["profiles"] = {name: dumps[2 * k + 1][1] for k, name in enumerate(CALLGRIND_OPS)}
    return result


def train_ms_per_step(rounds, epochs, batch_size, seed):
    """Median ms per step for each configuration, and a summary of its runs.

    The summary holds the last run's accuracy and losses, and the program-cache
    misses, XLA compiles and CPU fallbacks of all its runs together (tpu only).

    Each round trains every configuration from scratch for ``epochs`` epochs;
    the first epoch of a run is not counted (it compiles on tpu).
    """
    samples = {name: [] for name, _, _ in CONFIGS}
    runs = {}
    for _ in range(rounds):
        for name, device, mode in CONFIGS:
            torchtpu.metrics.reset()
            result = train_digits.train(device, epochs=epochs, seed=seed,
                                        batch_size=batch_size, mode=mode, progress=False,
                                        log=None)
            per_epoch = result.epoch_seconds[1:] or result.epoch_seconds
            samples[name] += [s / result.steps_per_epoch * 1e3 for s in per_epoch]
            run = runs.setdefault(name, {})
            run.update(final_accuracy=result.final_accuracy, losses=result.losses)
            if device == "tpu":
                counters = torchtpu.metrics.metrics()
                # Programs the run needed (in-memory misses) and how many of them
                # XLA compiled (the rest came from an on-disk cache, if any).
                for key in ("cache_misses", "compiles"):
                    run[key] = run.get(key, 0) + counters.get(key, 0)
                fallbacks = run.setdefault("fallback_counts", {})
                for op, n in torchtpu.metrics.fallback_counts().items():
                    fallbacks[op] = fallbacks.get(op, 0) + n
    steps = result.steps_per_epoch
    return {name: statistics.median(s) for name, s in samples.items()}, steps, runs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="also write the JSON to this file")
    p.add_argument("--loops", type=int, default=20, help="1,000-op loops per device for (a)")
    p.add_argument("--epochs", type=int, default=3, help="train_digits epochs per run for (b)")
    p.add_argument("--rounds", type=int, default=2, help="train_digits runs per configuration")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--add-only", action="store_true", help="only (a), no train_digits")
    p.add_argument("--numel", type=int, default=NUMEL,
                   help="elements per tensor in (a)'s timed loops (the instruction counts "
                        "use 1,000); XLA:CPU runs a program of under 1,000 flops on the "
                        "calling thread and larger ones on its thread pool")
    p.add_argument("--instructions", action="store_true",
                   help="also count instructions per op under callgrind")
    p.add_argument("--callgrind-dir", default=None,
                   help="keep the callgrind profiles here (2N-op loop of each config)")
    p.add_argument("--cases", default="",
                   help="with --instructions: extra calls to count, comma-separated, of "
                        + ",".join(EXTRA_CASES))
    p.add_argument("--_callgrind-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in EXTRA_CASES:
            p.error(f"unknown case {c!r} (known: {', '.join(EXTRA_CASES)})")
    if args._callgrind_child:
        return _callgrind_child(cases)
    # One warning per op that falls back is useful in a run, noise in a report:
    # the fallback counts go into the JSON instead.
    warnings.filterwarnings("ignore", message=r"tpu: .* has no tpu lowering")

    load_at_start = os.getloadavg()[0]
    previous = torchtpu.get_eager_mode()
    add = add_us_per_op(args.loops, args.numel)
    instructions = (instructions_per_op(args.callgrind_dir, cases) if args.instructions
                    else None)
    if not args.add_only:
        step_ms, steps, runs = train_ms_per_step(args.rounds, args.epochs, args.batch_size,
                                                 args.seed)
    torchtpu.set_eager_mode(previous)

    report = {
        "command": " ".join([sys.executable.rsplit("/", 1)[-1]] + sys.argv),
        "torch": torch.__version__,
        "torchtpu": torchtpu.__version__,
        # Timings on a busy machine are noisy: say how busy it was.
        "host": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                 "loadavg_1m": [load_at_start, os.getloadavg()[0]]},
        "add_1000_float32": {
            "numel": args.numel,
            "ops_per_loop": OPS_PER_LOOP,
            "loops": args.loops,
            "us_per_op_median": add,
            "ratio_tpu_strict_over_cpu": add["tpu_strict"] / add["cpu"],
            "ratio_tpu_fused_recording_over_cpu": add["tpu_fused"] / add["cpu"],
            "ratio_tpu_debug_over_tpu_strict": add["tpu_debug"] / add["tpu_strict"],
            "target_us_per_op_tpu_strict": TARGET_US_PER_OP_STRICT,
            "target_us_per_op_tpu_fused_recording": TARGET_US_PER_OP_FUSED_RECORDING,
            "meets_target": add["tpu_strict"] <= TARGET_US_PER_OP_STRICT,
            "meets_target_fused_recording":
                add["tpu_fused"] <= TARGET_US_PER_OP_FUSED_RECORDING,
            "instructions_per_op": instructions,
        },
    }
    if not args.add_only:
        report["train_digits"] = {
            "epochs": args.epochs,
            "rounds": args.rounds,
            "batch_size": args.batch_size,
            "steps_per_epoch": steps,
            "ms_per_step_median": step_ms,
            "ratio_tpu_strict_over_cpu": step_ms["tpu_strict"] / step_ms["cpu"],
            "ratio_tpu_debug_over_tpu_strict": step_ms["tpu_debug"] / step_ms["tpu_strict"],
            "runs": runs,
        }
    return emit(report, args.out)


if __name__ == "__main__":
    main()

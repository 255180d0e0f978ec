"""Where a fused training step's time goes, next to strict mode (issue 4).

    python bench/bench_fused_profile.py [--workload gpt] [--configs strict,fused]
        [--steps 4] [--rounds 5] [--warmup 2]

Runs the ``bench_fused.py`` workload (same model, batches and step) in each
configuration, in ONE process, round-robin, and prints one JSON line per
configuration with medians over the timed steps:

- ``ms_per_step``: wall time of a finished step (it ends with
  ``torchtpu.sync()``), and ``ms_issue``: until the last op was issued.
- ``cpu_ms_per_step``: CPU time of the whole process (every thread: the host
  thread and XLA's workers) per step, from ``time.process_time``. On a shared
  machine wall time says how much CPU a configuration was given; CPU time says
  how much work it did, and is the steadier of the two.
- ``minor_faults_per_step``: page faults (``ru_minflt``), each a first touch
  of a freshly mapped page: a program whose temporary buffers are mapped anew
  on every run shows thousands here.
- ``ratio_to_first``: ``ms_per_step`` over the first configuration's.

Configurations: ``strict``, ``fused``, ``strict_sync`` (tpu ``debug`` mode: a
wait after every op, so strict without its asynchronous overlap of host work
and programs) and ``cpu`` (PyTorch eager). Pin the process with
``taskset -c 0`` to compare the configurations on one core.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_fused import Run  # noqa: E402

MODES = {"strict": "strict", "fused": "fused", "strict_sync": "debug", "cpu": None}


def _minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="gpt", help="mlp, digits or gpt")
    p.add_argument("--configs", default="strict,fused",
                   help="comma-separated: " + ",".join(MODES))
    p.add_argument("--steps", type=int, default=4, help="timed steps per config per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per config (compiles)")
    args = p.parse_args(argv)
    runs = {}
    for name in args.configs.split(","):
        mode = MODES[name]
        runs[name] = Run(args.workload, "cpu" if mode is None else "tpu", mode)
        runs[name].steps(args.warmup, timed=False)
    cpu = {name: [] for name in runs}     # CPU seconds per step, one entry per round
    faults = {name: [] for name in runs}  # minor page faults per step, per round
    for _ in range(args.rounds):
        for name, r in runs.items():
            c0, f0 = time.process_time(), _minor_faults()
            r.steps(args.steps, timed=True)
            cpu[name].append((time.process_time() - c0) / args.steps)
            faults[name].append((_minor_faults() - f0) / args.steps)
    base = None
    for name, r in runs.items():
        wall = statistics.median(r.step_seconds) * 1e3
        base = base or wall
        print(json.dumps({
            "config": name,
            "ms_per_step": round(wall, 1),
            "ms_issue": round(statistics.median(r.issue_seconds) * 1e3, 1),
            "cpu_ms_per_step": round(statistics.median(cpu[name]) * 1e3, 1),
            "minor_faults_per_step": round(statistics.median(faults[name])),
            "ratio_to_first": round(wall / base, 3),
            "last_loss": float(r.losses[-1].cpu()),
        }))


if __name__ == "__main__":
    main()

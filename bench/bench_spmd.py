"""One training step over 4 devices of one process with torchtpu.spmd, next to
the same step on one device.

    TORCHTPU_CPU_DEVICES=4 python bench/bench_spmd.py [--out bench_spmd.json]

Workload: a 2-layer MLP (d -> 4d -> d, GELU, MSE) trained by a functional
step (``torch.func.grad_and_value`` and an SGD update returning the new
weights), run by ``spmd.jit`` as ONE program per step, for each layout:

- ``single``: a 1-device mesh (tpu:0), everything whole;
- ``dp``: 4-way data parallel (batch split, weights replicated);
- ``fsdp``: batch split and each weight's rows split over the same 4 devices
  (XLA gathers weights in-program, reduce-scatters gradients);
- ``dp_tp``: a 2 x 2 mesh, batch over "data", W1's columns and W2's rows
  over "model" (Megatron-style).

Rounds interleave the layouts; reported per layout: median step ms, ratio to
``single``, executes / compiles / host bytes per steady step (counters, not
noise), weight bytes held per device, and the largest difference of the
weights from the ``single`` run after the same steps. On the CPU plugin the 4
devices share the host's 2 cores: the ratio shows the cost of partitioning,
not a speedup the cores cannot give.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch.func import grad_and_value

import torchtpu
import torchtpu.spmd as spmd
from _report import emit


def loss_fn(w1, w2, x, y):
    return F.mse_loss(F.gelu(x @ w1) @ w2, y)


def step(w1, w2, x, y):
    (g1, g2), loss = grad_and_value(loss_fn, argnums=(0, 1))(w1, w2, x, y)
    return w1 - 0.05 * g1, w2 - 0.05 * g2, loss


LAYOUTS = {  # mesh devices, shape, names; specs of w1, w2, x/y
    "single": ([0], (1,), ("data",), (None, None), (None, None), (None, None)),
    "dp": ([0, 1, 2, 3], (4,), ("data",), (None, None), (None, None), ("data", None)),
    "fsdp": ([0, 1, 2, 3], (4,), ("data",), ("data", None), ("data", None), ("data", None)),
    "dp_tp": ([0, 1, 2, 3], (2, 2), ("data", "model"), (None, "model"), ("model", None),
              ("data", None)),
}


def setup(name, w1, w2, x, y):
    ids, shape, names, s1, s2, sx = LAYOUTS[name]
    mesh = spmd.Mesh(ids, shape, names)
    args = [spmd.mark_sharding(t, mesh, s) for t, s in ((w1, s1), (w2, s2), (x, sx), (y, sx))]
    return spmd.jit(step, out_specs=(s1, s2, None)), args


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--out")
    a = p.parse_args()
    if torch.tpu.device_count() < 4:
        raise SystemExit("run with TORCHTPU_CPU_DEVICES=4")
    torch.manual_seed(0)
    w1, w2 = torch.randn(a.d, 4 * a.d) / a.d ** 0.5, torch.randn(4 * a.d, a.d) / (4 * a.d) ** 0.5
    x, y = torch.randn(a.batch, a.d), torch.randn(a.batch, a.d)
    runs = {name: setup(name, w1, w2, x, y) for name in LAYOUTS}
    state = {name: args for name, (_, args) in runs.items()}
    for name, (f, _) in runs.items():  # compile
        state[name] = list(f(*state[name])[:2]) + state[name][2:]
    times = {name: [] for name in LAYOUTS}
    counters = {}
    for _ in range(a.rounds):
        for name, (f, _) in runs.items():
            torchtpu.sync()
            torchtpu.metrics.reset()
            start = time.perf_counter()
            for _ in range(a.steps):
                w1n, w2n, loss = f(*state[name])
                state[name] = [w1n, w2n] + state[name][2:]
            loss.cpu()
            times[name].append((time.perf_counter() - start) / a.steps * 1e3)
            m = torchtpu.metrics.metrics()
            counters[name] = {k: m[k] / a.steps for k in ("executes", "compiles", "bytes_to_host")}
    single = statistics.median(times["single"])
    ref = [t.full_tensor().cpu() for t in state["single"][:2]]
    report = {"d": a.d, "batch": a.batch, "steps_per_round": a.steps, "layouts": {}}
    for name in LAYOUTS:
        med = statistics.median(times[name])
        w = state[name][:2]
        report["layouts"][name] = {
            "step_ms": round(med, 3), "ratio_to_single": round(med / single, 3),
            **{f"{k}_per_step": v for k, v in counters[name].items()},
            "weight_bytes_per_device": sum(t.shards[0].numel() * 4 for t in w),
            "max_weight_diff_to_single": max((t.full_tensor().cpu() - r).abs().max().item()
                                             for t, r in zip(w, ref)),
        }
    emit(report, a.out)


if __name__ == "__main__":
    main()

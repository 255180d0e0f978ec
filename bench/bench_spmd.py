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

``host_path``: the same data-parallel step as 4 processes (one device each)
of torch.distributed with torchtpu's c10d backend ``tpu``, the gradients
averaged by ``all_reduce`` through host memory and gloo: rank 0's median step
ms and host bytes per step (started after the one-process rounds; ``--no-host-path``
skips it).

``llama``: torchtpu.spmd.recipes.TrainStep (a transformers Llama, tiny
config, AdamW) per recipe on the 2 x 2 mesh and on a 1-device mesh.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
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


def host_path_rank(a):
    """One rank of the 4-process data-parallel step (``--rank``)."""
    import torch.distributed as dist
    dist.init_process_group("tpu", init_method=f"tcp://127.0.0.1:{a.port}", rank=a.rank,
                            world_size=4)
    torch.manual_seed(0)
    w1, w2 = torch.randn(a.d, 4 * a.d) / a.d ** 0.5, torch.randn(4 * a.d, a.d) / (4 * a.d) ** 0.5
    x, y = torch.randn(a.batch, a.d), torch.randn(a.batch, a.d)
    w1, w2 = w1.to("tpu"), w2.to("tpu")
    x, y = (t.chunk(4)[a.rank].to("tpu") for t in (x, y))

    def one():
        nonlocal w1, w2
        (g1, g2), loss = grad_and_value(loss_fn, argnums=(0, 1))(w1, w2, x, y)
        for g in (g1, g2):
            dist.all_reduce(g, op=dist.ReduceOp.AVG)
        w1, w2 = w1 - 0.05 * g1, w2 - 0.05 * g2
        return loss

    one().cpu()
    times = []
    for _ in range(a.rounds):
        dist.barrier()
        torchtpu.metrics.reset()
        start = time.perf_counter()
        for _ in range(a.steps):
            loss = one()
        loss.cpu()
        times.append((time.perf_counter() - start) / a.steps * 1e3)
    m = torchtpu.metrics.metrics()
    if a.rank == 0:
        with open(a.rank_out, "w") as f:
            json.dump({"step_ms": round(statistics.median(times), 3),
                       "bytes_to_host_per_step": m["bytes_to_host"] / a.steps,
                       "executes_per_step": m["executes"] / a.steps}, f)
    dist.destroy_process_group()


def host_path(a, single_ms):
    """Runs the 4 ranks of ``host_path_rank``; their rank 0's report."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = f"/tmp/bench_spmd_host_{os.getpid()}.json"
    env = dict(os.environ, TORCHTPU_CPU_DEVICES="1")
    args = [sys.executable, __file__, "--d", str(a.d), "--batch", str(a.batch), "--rounds",
            str(a.rounds), "--steps", str(a.steps), "--port", str(port), "--rank-out", out]
    procs = [subprocess.Popen(args + ["--rank", str(r)], env=env) for r in range(4)]
    try:
        codes = [p.wait(timeout=600) for p in procs]
    finally:
        for p in procs:
            p.kill()
    if any(codes):
        raise SystemExit(f"host-path ranks failed: {codes}")
    with open(out) as f:
        report = json.load(f)
    os.unlink(out)
    report["ratio_to_single"] = round(report["step_ms"] / single_ms, 3)
    return report


def llama(a):
    """recipes.TrainStep per recipe: median step ms and per-step counters."""
    import transformers
    cfg = transformers.LlamaConfig(
        vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    out = {}
    ids = torch.randint(0, 512, (8, 64), generator=torch.Generator().manual_seed(0))
    for recipe, devices, batch in [("single", [0], (None, None)), ("dp", None, ("data", None)),
                                   ("fsdp", None, (("data", "model"), None)),
                                   ("tp", None, (None, None)), ("2d", None, ("data", None))]:
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(cfg)
        mesh = spmd.Mesh(devices or [0, 1, 2, 3], (len(devices or [0] * 4),) if devices
                         else (2, 2), ("data",) if devices else ("data", "model"))
        specs = spmd.recipes.param_specs(model, mesh, "dp" if devices else recipe)
        step = spmd.recipes.TrainStep(model, mesh, specs, batch_spec=batch)
        tids = spmd.mark_sharding(ids, mesh, batch)
        step(tids).cpu()
        times = []
        for _ in range(a.rounds):
            torchtpu.metrics.reset()
            start = time.perf_counter()
            for _ in range(a.steps):
                loss = step(tids)
            m = torchtpu.metrics.metrics()
            loss.cpu()
            times.append((time.perf_counter() - start) / a.steps * 1e3)
        out[recipe] = {"step_ms": round(statistics.median(times), 3),
                       "param_bytes_per_device": step.param_bytes_per_device()[0],
                       **{f"{k}_per_step": m[k] / a.steps
                          for k in ("executes", "compiles", "bytes_to_host")},
                       "loss": round(float(loss.cpu()), 5)}
    for r in out.values():
        r["ratio_to_single"] = round(r["step_ms"] / out["single"]["step_ms"], 3)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--no-host-path", action="store_true")
    p.add_argument("--no-llama", action="store_true")
    p.add_argument("--out")
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--rank-out", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.rank is not None:
        return host_path_rank(a)
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
    if not a.no_host_path:
        report["layouts"]["host_path"] = host_path(a, single)
    if not a.no_llama:
        report["llama"] = llama(a)
    emit(report, a.out)


if __name__ == "__main__":
    main()

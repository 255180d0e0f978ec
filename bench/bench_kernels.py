"""User kernel benchmark (issue 13): an RMSNorm written in JAX
(``@torchtpu.jax_kernel``) against the same RMSNorm as a PyTorch composite, on
tpu, forward and backward, side by side in one process; prints JSON.

    python bench/bench_kernels.py [--shape 8,128,512] [--iters 20] [--rounds 5] [--out f.json]

Configurations, each timed as a finished step (``torchtpu.sync()`` at the end):
``fused`` (fused eager mode: the step is one program either way) and
``compile`` (``torch.compile(backend="tpu")`` of the step, replayed). Rounds
interleave the configurations so a shared machine's load weighs on all alike.
Two PyTorch composites: ``torch`` is transformers' LlamaRMSNorm as written
(``pow(2)``), ``torch_mul`` the same with ``x * x`` as the JAX kernel has it
(measured here: torchtpu's ``pow(x, 2)`` lowering is several times slower than
``x * x`` on XLA:CPU, which is most of the difference to ``torch``).
Reported: ms per step (median over rounds), the ratios jax / torch and
jax / torch_mul per mode (below 1: the JAX kernel is faster), programs executed per step, and
compiles after warm-up (should be 0). A benchmark, not a test: nothing here asserts.
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import torch

import torchtpu
from _report import emit

EPS = 1e-6


@torchtpu.jax_kernel
def jax_rms_norm(x, w, eps):
    x32 = x.astype(jnp.float32)
    v = jnp.mean(x32 * x32, axis=-1, keepdims=True)
    return w * (x32 * jax.lax.rsqrt(v + eps)).astype(x.dtype)


def torch_rms_norm(x, w, eps):
    """transformers' LlamaRMSNorm, as written there (pow(2))."""
    x32 = x.float()
    v = x32.pow(2).mean(-1, keepdim=True)
    return w * (x32 * torch.rsqrt(v + eps)).to(x.dtype)


def torch_mul_rms_norm(x, w, eps):
    """The same with x * x, as the JAX kernel writes it."""
    x32 = x.float()
    v = (x32 * x32).mean(-1, keepdim=True)
    return w * (x32 * torch.rsqrt(v + eps)).to(x.dtype)


def make_step(norm):
    def step(x, w):
        y = norm(x, w, EPS)
        (y * y).mean().backward()
        return y
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="8,128,512")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    shape = tuple(int(s) for s in a.shape.split(","))
    torchtpu.set_eager_mode("fused")
    x = torch.randn(shape).to("tpu").requires_grad_()
    w = torch.randn(shape[-1]).to("tpu").requires_grad_()
    configs = {}
    impls = (("jax", jax_rms_norm), ("torch", torch_rms_norm), ("torch_mul", torch_mul_rms_norm))
    for impl, norm in impls:
        configs[f"fused_{impl}"] = make_step(norm)
        configs[f"compile_{impl}"] = torch.compile(make_step(norm), backend="tpu")

    def run(fn, n):
        for _ in range(n):
            x.grad = w.grad = None
            fn(x, w)
            torchtpu.sync()

    for fn in configs.values():
        run(fn, a.warmup)
    torchtpu.metrics.reset()
    times = {k: [] for k in configs}
    counts = {k: {"executes": 0, "compiles": 0} for k in configs}
    for _ in range(a.rounds):
        for k, fn in configs.items():
            before = torchtpu.metrics.metrics()
            t0 = time.perf_counter()
            run(fn, a.iters)
            times[k].append((time.perf_counter() - t0) * 1e3 / a.iters)
            after = torchtpu.metrics.metrics()
            for c in counts[k]:
                counts[k][c] += after[c] - before[c]
    ms = {k: statistics.median(v) for k, v in times.items()}
    steps = a.rounds * a.iters
    report = {
        "shape": list(shape),
        "ms_per_step_median": ms,
        "ratio_jax_over_torch": {
            m: ms[f"{m}_jax"] / ms[f"{m}_torch"] for m in ("fused", "compile")
        },
        "ratio_jax_over_torch_mul": {
            m: ms[f"{m}_jax"] / ms[f"{m}_torch_mul"] for m in ("fused", "compile")
        },
        "executes_per_step": {k: c["executes"] / steps for k, c in counts.items()},
        "compiles_after_warmup": {k: c["compiles"] for k, c in counts.items()},
        "fallbacks": torchtpu.metrics.total_fallbacks(),
    }
    emit(report, a.out)


if __name__ == "__main__":
    main()

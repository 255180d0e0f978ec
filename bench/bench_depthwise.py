"""Depthwise convolutions at efficientnet_b0's shapes: tpu (taps form and XLA's
feature-grouped convolution) next to CPU PyTorch, forward and forward+backward;
prints JSON.

    python bench/bench_depthwise.py [--reps 3] [--batch 8] [--out dw.json] [--quick]

Each shape (channels, spatial size, kernel, stride; padding k // 2, batch 8
by default) runs ``F.conv2d(x, w, groups=C)`` and, for ``fwd_bwd``, its
backward for the input and the weight with a fixed output gradient. Per
(shape, pass): ``cpu_ms``, ``taps_ms`` (the CPU plugin's default lowering),
``xla_ms`` (``TORCHTPU_CPU_DEPTHWISE_TAPS=0``, switched within this process:
the lowering reads it each time), the best of ``--reps`` runs after one
warm-up (compile) run, wall clock with results awaited. ``ratios``: tpu over
CPU and XLA over taps, per shape and over the sums. On a shared machine wall
times are noisy: compare the ratios of one run. A benchmark, not a test.
"""

import argparse
import os
import time

import torch
import torch.nn.functional as F

import torchtpu  # noqa: F401
from _report import emit

# (channels, height = width, kernel, stride): efficientnet_b0's depthwise convs.
SHAPES = [(32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 1), (144, 56, 5, 2), (240, 28, 5, 1),
          (240, 28, 3, 2), (480, 14, 3, 1), (480, 14, 5, 1), (672, 14, 5, 1), (672, 14, 5, 2),
          (1152, 7, 5, 1), (1152, 7, 3, 1)]
QUICK = [(96, 112, 3, 2), (240, 28, 5, 1), (672, 14, 5, 1), (1152, 7, 3, 1)]


def run(x, w, g, k, stride, backward):
    """One depthwise conv (and its backward): returns what must be awaited."""
    if not backward:
        return F.conv2d(x, w, None, stride, k // 2, 1, x.shape[1])
    xx, ww = x.detach().requires_grad_(), w.detach().requires_grad_()
    F.conv2d(xx, ww, None, stride, k // 2, 1, x.shape[1]).backward(g)
    return xx.grad, ww.grad


def best_ms(device, reps, *args):
    def once():
        r = run(*args)
        if device == "tpu":
            torch.tpu.synchronize()  # r is alive here, so its programs are awaited
        return r
    once()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        once()
        best = min(best, time.perf_counter() - t)
    return round(best * 1e3, 3)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--quick", action="store_true", help="4 of the 12 shapes")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    torch.manual_seed(0)
    rows, sums = [], {}
    for c, h, k, stride in QUICK if a.quick else SHAPES:
        x, w = torch.randn(a.batch, c, h, h), torch.randn(c, 1, k, k)
        ho = (h + 2 * (k // 2) - k) // stride + 1
        g = torch.randn(a.batch, c, ho, ho)
        xt, wt, gt = x.to("tpu"), w.to("tpu"), g.to("tpu")
        for backward in (False, True):
            row = dict(shape=f"{c}x{h}x{h} k{k} s{stride}", pass_="fwd_bwd" if backward else "fwd")
            row["cpu_ms"] = best_ms("cpu", a.reps, x, w, g, k, stride, backward)
            row["taps_ms"] = best_ms("tpu", a.reps, xt, wt, gt, k, stride, backward)
            os.environ["TORCHTPU_CPU_DEPTHWISE_TAPS"] = "0"
            try:
                row["xla_ms"] = best_ms("tpu", a.reps, xt, wt, gt, k, stride, backward)
            finally:
                del os.environ["TORCHTPU_CPU_DEPTHWISE_TAPS"]
            row["taps_over_cpu"] = round(row["taps_ms"] / row["cpu_ms"], 2)
            row["xla_over_cpu"] = round(row["xla_ms"] / row["cpu_ms"], 2)
            rows.append(row)
            s = sums.setdefault(row["pass_"], dict(cpu_ms=0.0, taps_ms=0.0, xla_ms=0.0))
            for key in s:
                s[key] += row[key]
            print(row, flush=True)
    totals = {name: dict(**{k: round(v, 1) for k, v in s.items()},
                         taps_over_cpu=round(s["taps_ms"] / s["cpu_ms"], 2),
                         xla_over_cpu=round(s["xla_ms"] / s["cpu_ms"], 2),
                         xla_over_taps=round(s["xla_ms"] / s["taps_ms"], 2))
              for name, s in sums.items()}
    emit(dict(benchmark="depthwise", batch=a.batch, reps=a.reps, rows=rows, totals=totals), a.out)


if __name__ == "__main__":
    main()

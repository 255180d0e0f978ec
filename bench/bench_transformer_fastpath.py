"""nn.TransformerEncoder eval with a padding mask: tpu (strict, fused) vs CPU
PyTorch, side by side in one process; prints JSON.

    python bench/bench_transformer_fastpath.py [--loops 10] [--batch 8] [--seq 32]

A 2-layer encoder (d_model 64, 4 heads, feed-forward 128, batch_first) with
random sequence lengths, on PyTorch's nested-tensor path
(``enable_nested_tensor=True``, the default) and on its dense fast path
(``False``). For each configuration: milliseconds per forward (median over
``--loops``; the first call, which compiles, is not counted), programs
executed per forward and host bytes read (torchtpu.metrics, from one counted
call; noise-free, unlike the times), CPU fallbacks (must be 0) and the largest
difference from CPU's result. Configurations take turns loop by loop so the
load of a shared machine weighs on all alike. A benchmark: nothing asserts.
"""

import argparse
import copy
import json
import statistics
import time

import torch
from torch import nn

import torchtpu


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loops", type=int, default=10)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=32)
    args = p.parse_args()
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    x = torch.randn(args.batch, args.seq, 64)
    lengths = torch.randint(1, args.seq + 1, (args.batch,))
    lengths[0] = args.seq
    mask = torch.arange(args.seq)[None] >= lengths[:, None]
    xt, mt = x.to("tpu"), mask.to("tpu")
    configs = {}
    for nested in (True, False):
        cpu = nn.TransformerEncoder(copy.deepcopy(layer), 2, enable_nested_tensor=nested).eval()
        configs[f"cpu_nested={nested}"] = (None, cpu, x, mask)
        for mode in ("strict", "fused"):
            configs[f"tpu_{mode}_nested={nested}"] = (mode, copy.deepcopy(cpu).to("tpu"), xt, mt)
    report, times = {}, {name: [] for name in configs}
    with torch.no_grad():
        for name, (mode, model, inp, m) in configs.items():
            if mode is None:
                continue
            torchtpu.set_eager_mode(mode)
            model(inp, src_key_padding_mask=m).cpu()  # compiles
            torchtpu.metrics.reset()
            out = model(inp, src_key_padding_mask=m).cpu()
            counts = torchtpu.metrics.metrics()
            ref = configs[name.replace(f"tpu_{mode}", "cpu")][1](x, src_key_padding_mask=mask)
            report[name] = {"programs_per_forward": counts["executes"],
                            "bytes_to_host": counts["bytes_to_host"],
                            "fallbacks": torchtpu.metrics.total_fallbacks(),
                            "max_abs_diff_vs_cpu": (out - ref).abs().max().item()}
        for _ in range(args.loops):
            for name, (mode, model, inp, m) in configs.items():
                if mode is not None:
                    torchtpu.set_eager_mode(mode)
                t0 = time.perf_counter()
                out = model(inp, src_key_padding_mask=m)
                if mode is not None:
                    out.cpu()
                times[name].append((time.perf_counter() - t0) * 1e3)
    torchtpu.set_eager_mode("strict")
    for name, ts in times.items():
        report.setdefault(name, {})["ms_per_forward"] = round(statistics.median(ts), 3)
    for name in list(report):
        if name.startswith("tpu_"):
            cpu_ms = report["cpu_" + name.split("_", 2)[2]]["ms_per_forward"]
            report[name]["ratio_vs_cpu"] = round(report[name]["ms_per_forward"] / cpu_ms, 3)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

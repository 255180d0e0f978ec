"""Mixed precision benchmark: the GPT training step of bench_fused.py in float32 and
under torch.autocast bfloat16, on CPU PyTorch and on tpu (strict, fused, and
torch.compile(backend="tpu")); and the host bytes a GradScaler step reads.

    python bench/bench_amp.py [--out bench_amp.json] [--steps 5] [--warmup 2]
        [--rounds 2]

Each configuration has its own copy of the GPT (same CPU-seeded weights) and the
same 4 batches on its device; a step is forward, next-token cross-entropy,
backward and a fused AdamW update, ended by ``torchtpu.sync()`` on tpu. After
``--warmup`` untimed steps (they compile), ``--rounds`` rounds run every
configuration's share of ``--steps`` timed steps in turn, so a shared machine's
load weighs on all alike. Prints JSON: ms per step (median), the bf16/fp32 ratio
per device and mode, and, for a tpu GradScaler step (scale, backward, step,
update) with a fused and with a plain AdamW, the bytes copied to the host
(``torchtpu.metrics``; the plain optimizer's step reads found_inf, 4 bytes, as
on CUDA; the GPT's nn.Embedding adds 1 byte at each sync: its deferred index
range check, see csrc/aten/deferred_check.h).
"""

import argparse
import contextlib
import copy
import json
import os
import statistics
import sys
import time

import torch

import torchtpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_fused import GPT_VOCAB, SEED, _gpt_setup  # noqa: E402

# (name, device, eager mode or "compile", autocast)
CONFIGS = [(f"{dev}_{mode or 'eager'}_{'bf16' if amp else 'fp32'}", dev, mode, amp)
           for dev, mode in (("cpu", None), ("tpu", "strict"), ("tpu", "fused"),
                             ("tpu", "compile"))
           for amp in (False, True)]


class Config:
    def __init__(self, name, device, mode, amp, model, batches, loss_fn):
        self.name, self.device, self.mode, self.amp = name, device, mode, amp
        self.model = copy.deepcopy(model).to(device)
        self.forward = (torch.compile(self.model, backend="tpu") if mode == "compile"
                        else self.model)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, fused=True)
        self.batches = [tuple(t.to(device) for t in b) for b in batches]
        self.loss_fn = loss_fn
        self.i = 0
        self.times = []

    def step(self):
        previous = torchtpu.get_eager_mode()
        if self.device == "tpu":
            torchtpu.set_eager_mode("fused" if self.mode == "fused" else "strict")
        try:
            b = self.batches[self.i % len(self.batches)]
            self.i += 1
            start = time.perf_counter()
            ctx = (torch.autocast(self.device, dtype=torch.bfloat16) if self.amp
                   else contextlib.nullcontext())
            with ctx:
                loss = self.loss_fn(self.forward, b)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            if self.device == "tpu":
                torchtpu.sync()
            return time.perf_counter() - start
        finally:
            torchtpu.set_eager_mode(previous)


def scaler_host_bytes(model, batches, loss_fn, fused):
    """Bytes copied to the host by one GradScaler training step (after warm-up)."""
    model = copy.deepcopy(model).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=fused)
    scaler = torch.amp.GradScaler("tpu")
    b = tuple(t.to("tpu") for t in batches[0])
    out = None
    for _ in range(2):
        torchtpu.sync()
        torchtpu.metrics.reset()
        with torch.autocast("tpu"):
            loss = loss_fn(model, b)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        torchtpu.sync()
        out = torchtpu.metrics.metrics()["bytes_to_host"]
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)

    torch.manual_seed(SEED)
    model, _, batches, loss_fn = _gpt_setup()
    torchtpu.metrics.reset()
    configs = [Config(n, d, m, a, model, batches, loss_fn) for n, d, m, a in CONFIGS]
    for c in configs:
        for _ in range(args.warmup):
            c.step()
    per_round = max(1, args.steps // args.rounds)
    for _ in range(args.rounds):
        for c in configs:
            c.times += [c.step() for _ in range(per_round)]
    ms = {c.name: 1e3 * statistics.median(c.times) for c in configs}
    fallbacks = torchtpu.metrics.fallback_counts()
    ratios = {k.replace("_bf16", ""): ms[k] / ms[k.replace("_bf16", "_fp32")]
              for k in ms if k.endswith("_bf16")}
    result = {
        "workload": f"gpt (bench_fused config, vocab {GPT_VOCAB}), fused AdamW",
        "steps": per_round * args.rounds,
        "ms_per_step": {k: round(v, 2) for k, v in ms.items()},
        "bf16_over_fp32": {k: round(v, 3) for k, v in ratios.items()},
        "scaler_step_bytes_to_host": {
            "fused_adamw": scaler_host_bytes(model, batches, loss_fn, True),
            "adamw": scaler_host_bytes(model, batches, loss_fn, False)},
        "fallbacks": fallbacks,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

"""The compile path of strict mode: program sharing across ops, and the quick
per-op compile settings (see csrc/runtime/README.md, "Compile settings")."""

import os
import subprocess
import sys
import textwrap

import torch

import torchtpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_ops_that_lower_identically_share_one_program():
    # Programs are cached by structure, not by op name: a second op whose
    # lowering is the same graph reuses the first one's executable.
    x_cpu = torch.randn(19, 7)
    x = x_cpu.to("tpu")
    pairs = [
        (lambda t: t.t().contiguous(), lambda t: t.permute(1, 0).contiguous()),
        (lambda t: t.clone(), lambda t: torch.empty_like(t).copy_(t)),
        (torch.abs, torch.absolute),
    ]
    torchtpu.metrics.reset()
    for first, second in pairs:
        a = first(x)
        torch.tpu.synchronize()
        compiles = torchtpu.metrics.metrics()["compiles"]
        b = second(x)
        torch.tpu.synchronize()
        assert torchtpu.metrics.metrics()["compiles"] == compiles
        assert torch.equal(a.cpu(), first(x_cpu)) and torch.equal(b.cpu(), second(x_cpu))
    assert torchtpu.metrics.total_fallbacks() == 0


OPS = """
import sys, torch, torchtpu
import torch.nn.functional as F
torch.manual_seed(0)
x, y = torch.randn(33, 33), torch.randn(33, 33)
ops = [lambda a, b: F.softmax(a, -1), lambda a, b: F.layer_norm(a, a.shape[-1:]),
       lambda a, b: F.gelu(a), lambda a, b: torch.exp(a) * b, lambda a, b: a @ b,
       lambda a, b: torch.cumsum(a, 0), lambda a, b: torch.tanh(a).sum(1),
       lambda a, b: torch.rsqrt(a.abs() + 1)]
xt, yt = x.to("tpu"), y.to("tpu")
torchtpu.metrics.reset()
outs = [f(xt, yt).cpu() for f in ops]
for f, o in zip(ops, outs):
    torch.testing.assert_close(o, f(x, y), rtol=1e-5, atol=1e-5)
assert torchtpu.metrics.total_fallbacks() == 0
torch.save(outs, sys.argv[1])
print("ok")
"""


def run_ops(path, quick):
    env = dict(os.environ, TORCHTPU_QUICK_COMPILE=quick, TORCHTPU_CACHE="0")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(OPS), path], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0 and "ok" in r.stdout, (r.stdout, r.stderr[-2000:])
    return torch.load(path)


def test_quick_compile_settings_match_cpu_and_full_optimization(tmp_path):
    # Strict mode compiles small per-op programs with the quick settings
    # (xla_backend_optimization_level=1) unless TORCHTPU_QUICK_COMPILE=0: both
    # match CPU PyTorch, and each other to float32 round-off.
    quick = run_ops(str(tmp_path / "quick.pt"), "1")
    full = run_ops(str(tmp_path / "full.pt"), "0")
    for q, f in zip(quick, full):
        torch.testing.assert_close(q, f, rtol=2e-6, atol=2e-6)

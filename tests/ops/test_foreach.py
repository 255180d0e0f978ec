"""Multi-tensor ops (``torch._foreach_*``) on tpu: CPU's values, and in strict
mode one program per call (csrc/aten/foreach.cc), with the values of debug
mode's one program per tensor (bit for bit for elementwise ops). The
optimizers' default foreach steps compile once per op, not once per op and
parameter shape."""

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchtpu
from _util import TEST_MODE, assert_close_cpu, no_fallback

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md


def tensors(seed, shapes=((3,), (2, 5), (4, 1, 3), ())):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(s, generator=g) + 0.5 for s in shapes]


CALLS = {
    "sqrt": lambda a, b, c: torch._foreach_sqrt(a),
    "exp_": lambda a, b, c: torch._foreach_exp_(a),
    "neg": lambda a, b, c: torch._foreach_neg(a),
    "add_scalar_": lambda a, b, c: torch._foreach_add_(a, 2.5),
    "add_list_alpha": lambda a, b, c: torch._foreach_add(a, b, alpha=-0.5),
    "mul_scalarlist_": lambda a, b, c: torch._foreach_mul_(a, [0.5, 2.0, -1.0, 3.0]),
    "div_tensor": lambda a, b, c: torch._foreach_div(a, c[3]),
    "sub_list_": lambda a, b, c: torch._foreach_sub_(a, b),
    "addcdiv_scalarlist_": lambda a, b, c: torch._foreach_addcdiv_(a, b, c, [-0.1, 0.2, 0.3, 1.0]),
    "addcmul_": lambda a, b, c: torch._foreach_addcmul_(a, b, c, value=0.7),
    "lerp_": lambda a, b, c: torch._foreach_lerp_(a, b, 0.25),
    "maximum": lambda a, b, c: torch._foreach_maximum(a, b),
    "clamp_min_": lambda a, b, c: torch._foreach_clamp_min_(a, 0.9),
    "pow_scalar": lambda a, b, c: torch._foreach_pow(a, 2.0),
    "norm": lambda a, b, c: torch._foreach_norm(a),
    "copy_": lambda a, b, c: torch._foreach_copy_(a, b),
    "zero_": lambda a, b, c: torch._foreach_zero_(a),
}


def run(call, device):
    a, b, c = (tensors(s) for s in (0, 1, 2))
    a, b, c = ([t.to(device) for t in lst] for lst in (a, b, c))
    out = CALLS[call](a, b, c)
    return a if out is None else out


@pytest.mark.parametrize("call", sorted(CALLS))
def test_foreach_matches_cpu_and_debug_mode_in_one_program(call):
    want = run(call, "cpu")
    with no_fallback():
        torchtpu.sync()
        before = torchtpu.metrics.metrics()["executes"]
        got = run(call, "tpu")
        got = [t.cpu() for t in got]
        executes = torchtpu.metrics.metrics()["executes"] - before
    assert_close_cpu([g.to("tpu") for g in got], want)
    if TEST_MODE == "strict":
        # One program for the call (the three uploads of each input list
        # are copies, not executes; the reads are transfers).
        assert executes == 1, executes
        torchtpu.set_eager_mode("debug")
        try:
            per_tensor = [t.cpu() for t in run(call, "tpu")]
        finally:
            torchtpu.set_eager_mode("strict")
        for g, d in zip(got, per_tensor, strict=True):
            assert torch.equal(g, d), (g, d)


def test_a_mismatch_inside_the_list_raises_after_the_earlier_tensors_were_updated():
    # CPU's loop updates the tensors before the one that fails; so does tpu.
    def call(device):
        a = [torch.ones(3, device=device), torch.ones(2, device=device)]
        b = [torch.full((3,), 2.0, device=device), torch.ones(5, device=device)]
        with pytest.raises(RuntimeError) as e:
            torch._foreach_add_(a, b)
        return a, str(e.value).splitlines()[0]

    (want, cpu_msg), (got, tpu_msg) = call("cpu"), call("tpu")
    assert cpu_msg.split("(")[0] in tpu_msg
    assert_close_cpu(got, want)
    for device in ("cpu", "tpu"):  # CPU's error
        with pytest.raises(RuntimeError, match="must have the same number of tensors"):
            torch._foreach_add_([torch.ones(1, device=device)] * 2, [torch.ones(1, device=device)])
    # The device goes on.
    assert torch.equal((got[0] + 1).cpu(), torch.full((3,), 4.0))


def test_many_list_shapes_from_one_line_do_not_warn_in_strict_mode():
    if TEST_MODE != "strict":
        pytest.skip("strict mode's regions")
    with warnings.catch_warnings():
        warnings.simplefilter("error", torchtpu.RecompileWarning)
        for n in range(1, 14):  # past recompile_warn_threshold's 8
            ts = [torch.ones(n, device="tpu"), torch.ones(n, 2, device="tpu")]
            torch._foreach_mul_(ts, 2.0)
            assert torch.equal(ts[1].cpu(), torch.full((n, 2), 2.0))


def test_fused_mode_records_the_call_into_its_pending_graph():
    torchtpu.set_eager_mode("fused")
    try:
        ts = [torch.ones(3, device="tpu"), torch.ones(2, device="tpu")]
        torchtpu.sync()
        before = torchtpu.metrics.metrics()["executes"]
        torch._foreach_mul_(ts, 3.0)
        torch._foreach_add_(ts, 1.0)
        assert torchtpu.metrics.metrics()["executes"] == before  # nothing ran yet
        assert torch.equal(ts[0].cpu(), torch.full((3,), 4.0))
    finally:
        torchtpu.set_eager_mode(TEST_MODE)


OPTIMIZERS = [
    (torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1}),
    (torch.optim.Adam, {"lr": 1e-2, "amsgrad": True}),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    (torch.optim.RMSprop, {"lr": 1e-2, "momentum": 0.5}),
    (torch.optim.Adagrad, {"lr": 0.1}),
]


def train(net, opt_cls, kwargs, device, steps=3, clip=True):
    net = copy.deepcopy(net).to(device)
    opt = opt_cls(net.parameters(), foreach=True, **kwargs)
    g = torch.Generator().manual_seed(1)
    programs = []
    for _ in range(steps):
        x, y = torch.randn(6, 5, generator=g), torch.randn(6, 2, generator=g)
        loss = F.mse_loss(net(x.to(device)), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)  # foreach too
        before = torchtpu.metrics.metrics()["cache_misses"] if device == "tpu" else 0
        opt.step()
        if device == "tpu":
            programs.append(torchtpu.metrics.metrics()["cache_misses"] - before)
    return [p.detach().cpu() for p in net.parameters()], programs


@pytest.mark.parametrize("opt_cls,kwargs", OPTIMIZERS, ids=lambda v: getattr(v, "__name__", ""))
def test_foreach_optimizer_steps_match_cpu_and_compile_only_at_the_first_steps(opt_cls, kwargs):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 7), nn.Tanh(), nn.Linear(7, 2))
    want, _ = train(net, opt_cls, kwargs, "cpu")
    with no_fallback():
        got, programs = train(net, opt_cls, kwargs, "tpu")
    assert_close_cpu([g.to("tpu") for g in got], want, rtol=1e-5, atol=1e-6)
    if TEST_MODE == "strict":
        # The third step reuses every program (the first creates the state).
        # (Fused mode's step is one graph with forward and backward, counted
        # by its own rules: tests/modes/test_fused.py.)
        assert programs[2] == 0, programs
        # Elementwise updates are bit for bit debug mode's (one program per
        # tensor). Not clip_grad_norm_'s norms: XLA may order a reduction
        # differently inside a program of several (last bits, as fused mode).
        got, _ = train(net, opt_cls, kwargs, "tpu", clip=False)
        torchtpu.set_eager_mode("debug")
        try:
            per_tensor, _ = train(net, opt_cls, kwargs, "tpu", clip=False)
        finally:
            torchtpu.set_eager_mode("strict")
        for g, d in zip(got, per_tensor, strict=True):
            assert torch.equal(g, d)

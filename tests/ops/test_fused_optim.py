"""torch.optim Adam/AdamW/SGD(fused=True) on tpu: _fused_adam(w)_ and _fused_sgd_
lowered, equal to CPU's fused kernels; with GradScaler a step reads nothing on
the host and an inf step changes nothing."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchtpu
from _util import no_fallback

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

CONFIGS = [
    (torch.optim.Adam, {"lr": 1e-2}),
    (torch.optim.Adam, {"lr": 1e-2, "weight_decay": 0.1, "amsgrad": True}),
    (torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1}),
    (torch.optim.AdamW, {"lr": torch.tensor(1e-2), "maximize": True, "amsgrad": True}),
    (torch.optim.SGD, {"lr": 0.1}),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.3, "maximize": True}),
]


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2))


def run(device, net, opt_cls, kwargs, batches):
    net = net.to(device)
    kwargs = dict(kwargs)
    if isinstance(kwargs["lr"], torch.Tensor):
        kwargs["lr"] = kwargs["lr"].clone()
    opt = opt_cls(net.parameters(), fused=True, **kwargs)
    for x, y in batches:
        loss = F.mse_loss(net(x.to(device)), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return net, opt


@pytest.mark.parametrize("opt_cls,kwargs", CONFIGS,
                         ids=[f"{c.__name__}-{'-'.join(k)}" for c, k in CONFIGS])
def test_fused_step_matches_cpu(opt_cls, kwargs):
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 5, generator=g), torch.randn(4, 2, generator=g)) for _ in range(3)]
    cpu_net, cpu_opt = run("cpu", model(), opt_cls, kwargs, batches)
    with no_fallback():
        tpu_net, tpu_opt = run("tpu", model(), opt_cls, kwargs, batches)
    for p, q in zip(tpu_net.parameters(), cpu_net.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
    for (_p, s), q in zip(tpu_opt.state.items(), cpu_opt.state.values()):
        for k, v in s.items():
            torch.testing.assert_close(v.cpu(), q[k], rtol=1e-5, atol=1e-6, msg=k)


def test_tensor_lists_of_different_lengths_raise():
    p = [torch.zeros(3, device="tpu")]
    with pytest.raises(RuntimeError, match="equal lengths"):
        torch._fused_sgd_(p, [], [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0,
                          nesterov=False, maximize=False, is_first_step=True)


def scaled_steps(device, opt_cls, batches):
    net = model().to(device)
    opt = opt_cls(net.parameters(), lr=1e-2, fused=True)
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 8, growth_interval=2)
    host_bytes = []
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        if device == "tpu":
            torchtpu.sync()
            torchtpu.metrics.reset()
        loss = F.mse_loss(net(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if device == "tpu":
            torchtpu.sync()
            host_bytes.append(torchtpu.metrics.metrics()["bytes_to_host"])
    return net, scaler._scale.cpu(), host_bytes


@pytest.mark.parametrize("opt_cls", [torch.optim.AdamW, torch.optim.SGD])
def test_scaler_with_fused_optimizer_reads_nothing_and_skips_inf(opt_cls):
    g = torch.Generator().manual_seed(2)
    batches = [(torch.randn(4, 5, generator=g), torch.randn(4, 2, generator=g)) for _ in range(5)]
    batches[2][0][1, 1] = float("inf")
    cpu_net, cpu_scale, _ = scaled_steps("cpu", opt_cls, batches)
    with no_fallback():
        tpu_net, tpu_scale, host_bytes = scaled_steps("tpu", opt_cls, batches)
    assert host_bytes == [0] * len(batches)
    torch.testing.assert_close(tpu_scale, cpu_scale)
    for p, q in zip(tpu_net.parameters(), cpu_net.parameters()):
        assert torch.isfinite(p).all()
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)


def test_inf_step_changes_nothing():
    net = model().to("tpu")
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, fused=True)
    scaler = torch.amp.GradScaler("tpu")
    x = torch.randn(3, 5)
    x[0, 0] = float("nan")
    before = copy.deepcopy([p.detach().cpu() for p in net.parameters()])
    with no_fallback():
        scaler.scale(net(x.to("tpu")).sum()).backward()
        scaler.step(opt)
        scaler.update()
    for p, b in zip(net.parameters(), before):
        torch.testing.assert_close(p.detach().cpu(), b)
    for s in opt.state.values():
        assert not s["exp_avg"].cpu().any() and not s["exp_avg_sq"].cpu().any()

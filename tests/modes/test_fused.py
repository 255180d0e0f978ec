"""Fused eager mode: ops recorded into one pending graph per device, compiled as
one program keyed by structure; results identical to strict mode."""

import os
import subprocess
import sys
import time

import pytest
import torch

import torchtpu
from _util import no_fallback, unlowered

pytestmark = pytest.mark.alone  # passes: tests/README.md


@pytest.fixture
def fused():
    torchtpu.set_eager_mode("fused")
    yield
    torchtpu.set_eager_mode("strict")


def train_steps(steps, lrs, seed=0, sync_each_step=False):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(16, 3)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lrs[step]
        x = torch.randn(32, 8, device="tpu")
        y = torch.randint(0, 3, (32,), device="tpu")
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        if sync_each_step:
            torchtpu.sync()  # one fused graph per step
    return [v.item() for v in losses], [p.detach().cpu() for p in model.parameters()]


def test_fused_matches_strict():
    lrs = [1e-2 * (0.9**i) for i in range(4)]
    strict_losses, strict_params = train_steps(4, lrs)
    torchtpu.set_eager_mode("fused")
    try:
        fused_losses, fused_params = train_steps(4, lrs)
    finally:
        torchtpu.set_eager_mode("strict")
    assert fused_losses == pytest.approx(strict_losses, rel=1e-6)
    for a, b in zip(fused_params, strict_params):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_optimizer_step_ends_the_step_graph_without_a_read(fused):
    # A loop that reads nothing per step: each optimizer.step() flushes (one
    # program per step, compiled once), the values equal a loop that syncs.
    lrs = [1e-2] * 6
    synced_losses, synced_params = train_steps(6, lrs, sync_each_step=True)
    torchtpu.metrics.reset()
    losses, params = train_steps(6, lrs)
    m = torchtpu.metrics.metrics()
    # 6 step graphs, the last losses' read (one more flush at most: the
    # leftover of the last step's graph after its optimizer.step is empty)
    assert 6 <= m["fused_flushes"] <= 7, m["fused_flushes"]
    assert losses == synced_losses
    for a, b in zip(params, synced_params):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    torchtpu.config.fused_flush_at_optimizer_step = False
    try:
        torchtpu.metrics.reset()
        off_losses, _ = train_steps(6, lrs)
        assert torchtpu.metrics.metrics()["fused_flushes"] < 6
    finally:
        torchtpu.config.fused_flush_at_optimizer_step = True
    assert off_losses == pytest.approx(synced_losses, rel=1e-6)


def test_a_read_before_optimizer_step_keeps_one_program_per_step(fused):
    # loss.item() before step() (logging, GradScaler's inf check) already
    # ends a graph: the hook then does not cut the update into a program of
    # its own (it joins the next step's graph, as without the hook).
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 3).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(16, 8, device="tpu")

    def step():
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        value = loss.item()
        opt.step()
        return value

    for _ in range(3):
        step()
    before = torchtpu.metrics.metrics()["fused_flushes"]
    for _ in range(5):
        step()
    assert torchtpu.metrics.metrics()["fused_flushes"] - before == 5


def test_cpu_only_optimizer_step_never_starts_the_runtime():
    # torchtpu loads into every torch process: a CPU-only optimizer step must
    # not need the plugin (here: one that does not exist).
    code = ("import torch, torchtpu; m = torch.nn.Linear(2, 2); "
            "o = torch.optim.SGD(m.parameters(), lr=0.1); m(torch.ones(1, 2)).sum().backward(); "
            "o.step(); print(torchtpu._C._is_initialized())")
    env = dict(os.environ, TORCHTPU_PLUGIN="/nonexistent/plugin.so", TORCHTPU_EAGER_MODE="fused")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_training_loop_stops_compiling(fused):
    lrs = [1e-2 / (i + 1) for i in range(12)]  # a new learning rate every step
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(16, 3)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    compiles = []
    with no_fallback():
        for step in range(12):
            for g in opt.param_groups:
                g["lr"] = lrs[step]
            x = torch.randn(32, 8, device="tpu")  # new batch contents and RNG draws
            y = torch.randint(0, 3, (32,), device="tpu")
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            torchtpu.sync()
            compiles.append(torchtpu.metrics.metrics()["compiles"])
    # The first steps compile their graphs; after that the count is flat.
    assert compiles[-1] == compiles[4], compiles


def test_a_read_flushes_and_views_alias(fused):
    x = torch.zeros(4, 6, device="tpu")
    torchtpu.metrics.reset()
    x[1].fill_(5)
    y = x.t() * 2
    assert torchtpu.metrics.metrics()["executes"] == 0  # nothing ran yet
    assert y[0, 1].item() == 10.0
    assert torchtpu.metrics.metrics()["executes"] == 1  # one fused program
    torch.testing.assert_close(x.cpu()[1], torch.full((6,), 5.0))


def test_fallback_between_fused_graphs(fused):
    a = torch.tensor([1.0, 2.0], device="tpu") * 3
    z = unlowered(a)  # no lowering: runs on CPU between two graphs
    out = (z + 1).cpu()
    expected = unlowered(torch.tensor([3.0, 6.0])) + 1
    torch.testing.assert_close(out, expected)


def test_in_place_keeps_data_ptr_in_fused_mode(fused):
    x = torch.ones(10, device="tpu")
    p = x.data_ptr()
    x.add_(1)
    x.mul_(3)
    assert x.data_ptr() == p
    assert x.cpu().tolist() == [6.0] * 10


# ---------------------------------------------------------------- buffer donation


def test_donated_parameters_stay_right_over_many_steps():
    steps = 12
    lrs = [1e-2 / (i + 1) for i in range(steps)]
    strict_losses, strict_params = train_steps(steps, lrs)
    torchtpu.set_eager_mode("fused")
    try:
        torchtpu.metrics.reset()
        fused_losses, fused_params = train_steps(steps, lrs, sync_each_step=True)
        donations = torchtpu.metrics.metrics()["donations"]
    finally:
        torchtpu.set_eager_mode("strict")
    # Every step but the first overwrites 4 parameters and their 8 AdamW
    # moments in place; each old buffer is donated (the first step has no
    # moments to donate yet).
    assert donations >= 12 * (steps - 1), donations
    assert fused_losses == pytest.approx(strict_losses, rel=1e-5)
    for a, b in zip(fused_params, strict_params):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_flush_of_a_donating_graph_does_not_wait_for_its_program(fused):
    # A flush enqueues its program and returns: the buffers it donates are
    # kept until the program has run (destroying one waits inside the plugin
    # until then), so the next step records while this one executes.
    a_cpu = torch.randn(512, 512)
    a = a_cpu.to("tpu")
    acc = torch.zeros(512, 512, device="tpu")
    acc_cpu = torch.zeros(512, 512)

    def step(a, acc, n=24):
        y = a
        for _ in range(n):
            y = y @ a / 512
        acc.add_(y)  # in place: the flush donates acc's old buffer

    for _ in range(2):  # compile, and make acc's buffer the program's own
        step(a, acc)
        step(a_cpu, acc_cpu)
        torchtpu.sync()
    donations = torchtpu.metrics.metrics()["donations"]
    start = time.perf_counter()
    step(a, acc)
    torchtpu.sync()
    step_s = time.perf_counter() - start
    step(a_cpu, acc_cpu)
    start = time.perf_counter()
    step(a, acc)
    torch.tpu.Event().record()  # flushes without waiting
    flush_s = time.perf_counter() - start
    torchtpu.sync()
    step(a_cpu, acc_cpu)
    assert torchtpu.metrics.metrics()["donations"] >= donations + 2
    assert flush_s < 0.5 * step_s, (flush_s, step_s)
    torch.testing.assert_close(acc.cpu(), acc_cpu, rtol=1e-4, atol=1e-4)


def test_buffer_shared_by_two_storages_is_not_donated(fused):
    a = torch.arange(1000.0, device="tpu")
    torchtpu.sync()
    # A storage copy by the allocator (the copy-on-write path) shares the buffer.
    b = torchtpu._C._allocator_clone(a)
    assert torchtpu._C._storage_buffer_id(a) == torchtpu._C._storage_buffer_id(b) != 0
    torchtpu.metrics.reset()
    a.mul_(2)
    torchtpu.sync()
    assert torchtpu.metrics.metrics()["donations"] == 0
    torch.testing.assert_close(b.cpu(), torch.arange(1000.0))
    torch.testing.assert_close(a.cpu(), torch.arange(1000.0) * 2)
    del b  # now the slot of `a` is the only owner: the next update donates
    a.mul_(2)
    torchtpu.sync()
    assert torchtpu.metrics.metrics()["donations"] == 1
    torch.testing.assert_close(a.cpu(), torch.arange(1000.0) * 4)


def test_clone_stays_readable_while_the_source_is_updated(fused):
    a = torch.arange(6.0, device="tpu")
    torchtpu.sync()
    b = a.clone()
    for _ in range(5):
        a.add_(1)
        torchtpu.sync()
    assert b.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert a.cpu().tolist() == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]


def test_saved_tensor_sees_the_in_place_update_like_cpu(fused):
    def grad_after_data_update(device):
        w = torch.arange(1.0, 5.0, device=device, requires_grad=True)
        if device == "tpu":
            torchtpu.sync()  # w's values live in a buffer the next graph reads
        y = (w * w).sum()  # saves w: the same storage as the leaf
        w.data.mul_(2)  # in place, bypassing the version counter
        y.backward()  # reads the saved w: the updated values, on CPU too
        return w.detach(), w.grad

    torchtpu.metrics.reset()
    w, grad = (t.cpu() for t in grad_after_data_update("tpu"))
    # The old buffer of w went to the program; the saved tensor read the slot's
    # new value, never the donated buffer.
    assert torchtpu.metrics.metrics()["donations"] >= 1
    w_cpu, grad_cpu = grad_after_data_update("cpu")
    torch.testing.assert_close(w, w_cpu)
    torch.testing.assert_close(grad, grad_cpu)


def test_index_range_check_is_deferred_to_the_next_read(fused):
    w = torch.randn(10, 4, device="tpu")
    bad = torch.tensor([1, 12], device="tpu")
    executes = torchtpu.metrics.metrics()["executes"]
    y = torch.nn.functional.embedding(bad, w) * 2  # no sync at the op
    assert torchtpu.metrics.metrics()["executes"] == executes
    with pytest.raises(IndexError, match="index out of range in self"):
        y.cpu()
    g = torch.gather(w, 0, torch.full((1, 4), 10, device="tpu"))
    with pytest.raises(
        RuntimeError, match="index 10 is out of bounds for dimension 0 with size 10"
    ):
        torchtpu.sync()
    del g
    good = torch.tensor([1, 2], device="tpu")
    torch.testing.assert_close(torch.nn.functional.embedding(good, w).cpu(), w.cpu()[[1, 2]])


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_ops_from_several_threads(mode):
    import threading

    torchtpu.set_eager_mode(mode)
    inputs = [torch.randn(32, 32) / 8 for _ in range(4)]

    def work(x):
        for i in range(60):
            x = (x @ x.t()).tanh() + i * 0.001 + torch.ones((1 + i % 3, 1), device=x.device).sum()
            if i % 20 == 0:
                x.sum().item()  # reads flush the shared pending graph mid-way
        return x

    results = [None] * len(inputs)

    def run(k):
        results[k] = work(inputs[k].to("tpu")).cpu()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, x in zip(results, inputs):
        torch.testing.assert_close(got, work(x), rtol=1e-4, atol=1e-5)

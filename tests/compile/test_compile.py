"""torch.compile(backend="tpu"): Dynamo + AOTAutograd graphs run as fused tpu
programs; results match tpu eager and CPU, with eager's mutation, buffer, RNG and
fallback semantics."""

import copy
import importlib.metadata

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchtpu
from _util import UNLOWERED_OP, no_fallback, unlowered
from _util import fresh_dynamo  # noqa: F401  (autouse: a fresh Dynamo per test)
from torchtpu.examples import train_digits



def compiled(fn, **kwargs):
    return torch.compile(fn, backend="tpu", **kwargs)


def test_backend_is_discovered_through_the_entry_point():
    eps = importlib.metadata.entry_points(group="torch_dynamo_backends")
    assert "tpu" in eps.names
    assert "tpu" in torch._dynamo.list_backends()
    from torchtpu._dynamo import tpu_backend
    assert torch._dynamo.lookup_backend("tpu") is tpu_backend


def test_graph_call_is_one_program_and_mode_is_restored():
    def f(a, b):
        return ((a + b).relu() * 3).sin().sum(0)

    cf = compiled(f)
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    with no_fallback():
        cf(a.to("tpu"), b.to("tpu"))  # Dynamo + XLA compile
        torchtpu.sync()
        before = torchtpu.metrics.metrics()
        out = cf(a.to("tpu"), b.to("tpu"))
        torchtpu.sync()
        after = torchtpu.metrics.metrics()
    assert after["executes"] - before["executes"] == 1
    assert after["compiles"] == before["compiles"]
    assert torchtpu.get_eager_mode() == "strict"
    torch.testing.assert_close(out.cpu(), f(a, b))

    for mode in ("debug", "fused"):
        torchtpu.set_eager_mode(mode)
        out = cf(a.to("tpu"), b.to("tpu"))
        assert torchtpu.get_eager_mode() == mode
        torch.testing.assert_close(out.cpu(), f(a, b))


def mlp():
    return nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 5))


def adamw_steps(model, forward, xs, ys):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-2)
    losses = []
    for x, y in zip(xs, ys):
        loss = F.cross_entropy(forward(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [v.item() for v in losses], [p.detach().cpu() for p in model.parameters()]


def test_mlp_adamw_training_matches_eager_and_cpu():
    torch.manual_seed(0)
    cpu_model = mlp()
    xs = [torch.randn(16, 12) for _ in range(3)]
    ys = [torch.randint(0, 5, (16,)) for _ in range(3)]
    cpu_losses, cpu_params = adamw_steps(cpu_model, cpu_model, xs, ys)

    torch.manual_seed(0)
    eager_model = mlp().to("tpu")
    txs, tys = [x.to("tpu") for x in xs], [y.to("tpu") for y in ys]
    eager_losses, eager_params = adamw_steps(eager_model, eager_model, txs, tys)

    torch.manual_seed(0)
    model = mlp().to("tpu")
    comp_losses, comp_params = adamw_steps(model, compiled(model), txs, tys)

    for ref_losses, ref_params in ((eager_losses, eager_params), (cpu_losses, cpu_params)):
        assert comp_losses == pytest.approx(ref_losses, rel=1e-5)
        for a, b in zip(comp_params, ref_params):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_digits_cnn_forward_backward_matches_eager_and_cpu():
    torch.manual_seed(0)
    cpu_model = train_digits.DigitsCNN()
    eager_model = copy.deepcopy(cpu_model).to("tpu")
    comp_model = copy.deepcopy(cpu_model).to("tpu")
    x, y = torch.rand(16, 1, 8, 8), torch.randint(0, 10, (16,))

    def grads(model, forward, x, y):
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        return loss.detach().cpu(), [p.grad.cpu() for p in model.parameters()]

    cpu_loss, cpu_grads = grads(cpu_model, cpu_model, x, y)
    eager_loss, eager_grads = grads(eager_model, eager_model, x.to("tpu"), y.to("tpu"))
    with no_fallback():
        comp_loss, comp_grads = grads(comp_model, compiled(comp_model), x.to("tpu"),
                                      y.to("tpu"))
    for ref_loss, ref_grads in ((eager_loss, eager_grads), (cpu_loss, cpu_grads)):
        torch.testing.assert_close(comp_loss, ref_loss, rtol=1e-5, atol=1e-6)
        for a, b in zip(comp_grads, ref_grads):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_batch_norm_running_stats_are_updated_as_in_eager():
    torch.manual_seed(0)
    ref = nn.BatchNorm1d(6)
    eager = copy.deepcopy(ref).to("tpu")
    model = copy.deepcopy(ref).to("tpu")
    cm = compiled(model)
    for _ in range(3):
        x = torch.randn(10, 6) * 3 + 1
        torch.testing.assert_close(cm(x.to("tpu")).cpu(), ref(x), rtol=1e-5, atol=1e-5)
        eager(x.to("tpu"))
    for name, buf in ref.named_buffers():
        torch.testing.assert_close(dict(model.named_buffers())[name].cpu(), buf,
                                   rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(dict(model.named_buffers())[name].cpu(),
                                   dict(eager.named_buffers())[name].cpu())
    assert model.num_batches_tracked.item() == 3


def test_input_mutation_is_applied():
    def f(x, y):
        x.mul_(2)
        y[1:].add_(1)
        return x + y

    x, y = torch.randn(5), torch.randn(5)
    tx, ty = x.to("tpu"), y.to("tpu")
    out = compiled(f)(tx, ty)
    expected = f(x, y)
    torch.testing.assert_close(out.cpu(), expected)
    torch.testing.assert_close(tx.cpu(), x)
    torch.testing.assert_close(ty.cpu(), y)


def test_dropout_differs_per_call_and_repeats_under_manual_seed():
    drop = nn.Dropout(0.5)
    cm = compiled(drop)
    x = torch.ones(64, device="tpu", requires_grad=True)
    a, b = cm(x), cm(x)
    assert not torch.equal(a.cpu(), b.cpu())
    torch.manual_seed(7)
    c = cm(x)
    torch.manual_seed(7)
    d = cm(x)
    assert torch.equal(c.cpu(), d.cpu())
    torch.manual_seed(7)
    assert torch.equal(drop(x).cpu(), c.cpu())  # the same draws as tpu eager
    # The backward uses the forward's mask.
    c.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), c.detach().cpu())


def test_new_input_shape_compiles_a_new_program_and_matches_eager():
    def f(x):
        return torch.tanh(x @ x.t()).cumprod(0).amax(1) * 0.75 - 0.125

    cf = compiled(f, dynamic=False)
    out = cf(torch.randn(3, 4).to("tpu"))
    torchtpu.sync()
    torchtpu.metrics.reset()
    x = torch.randn(5, 4)
    out = cf(x.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x.to("tpu")).cpu())
    torch.testing.assert_close(out.cpu(), f(x), rtol=1e-5, atol=1e-5)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2
    assert torchtpu.metrics.metrics()["cache_misses"] >= 1  # a new XLA program
    # The first shape is still served by its own graph and program.
    torchtpu.metrics.reset()
    cf(torch.randn(3, 4).to("tpu"))
    torchtpu.sync()
    assert torchtpu.metrics.metrics()["cache_misses"] == 0


def test_mark_dynamic_runs_each_concrete_shape():
    # Dynamo traces one graph with a symbolic batch size; each concrete size
    # still gets its own fused program, so results are exact, never padded.
    def f(x):
        return (x.softmax(-1) * x.shape[0]).sum(0)

    cf = compiled(f)
    for n in (3, 7, 5):
        x = torch.randn(n, 6)
        tx = x.to("tpu")
        torch._dynamo.mark_dynamic(tx, 0)
        torch.testing.assert_close(cf(tx).cpu(), f(x), rtol=1e-5, atol=1e-5)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] <= 2


def test_unlowered_op_runs_through_the_fallback(monkeypatch):
    def f(x, y):
        return unlowered(x * 2) + y

    x, y = torch.tensor([1.5, 2.0, 3.0]), torch.tensor([1.0, 2.0, 0.5])
    cf = compiled(f)
    torchtpu.metrics.reset()
    out = cf(x.to("tpu"), y.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x, y))
    assert torchtpu.metrics.fallback_counts().get(UNLOWERED_OP, 0) > 0
    monkeypatch.setenv("TORCHTPU_FALLBACK", "error")
    with pytest.raises(RuntimeError, match="airy_ai"):
        cf(x.to("tpu"), y.to("tpu"))
    assert torchtpu.get_eager_mode() == "strict"


def test_train_digits_compile_matches_eager():
    eager = train_digits.train("tpu", epochs=1, progress=False, log=None)
    comp = train_digits.train("tpu", epochs=1, progress=False, log=None, compile=True)
    assert comp.losses == pytest.approx(eager.losses, rel=1e-5)
    assert comp.final_accuracy == pytest.approx(eager.final_accuracy, abs=1 / 360)

"""Compiled graphs are captured once and replayed as one PJRT execute per call
(csrc/aten/compiled_call.h): values, layouts, aliasing and RNG behave as in eager."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchtpu
from _util import no_fallback, unlowered
from _util import fresh_dynamo  # noqa: F401  (autouse: a fresh Dynamo per test)
from torchtpu import _C



def compiled(fn):
    return torch.compile(fn, backend="tpu")


def counts():
    torchtpu.sync()
    m = torchtpu.metrics.metrics()
    return m["executes"], m["compiles"]


def test_replayed_call_is_one_execute_with_fresh_values(graphs):
    def f(a, b):
        return ((a + b).relu() * 3).sin().sum(0), (a * b).exp()

    cf = compiled(f)
    with no_fallback():
        cf(torch.randn(4, 5, device="tpu"), torch.randn(4, 5, device="tpu"))
        for _ in range(3):
            a, b = torch.randn(4, 5), torch.randn(4, 5)
            ta, tb = a.to("tpu"), b.to("tpu")
            executes, compiles = counts()
            out = cf(ta, tb)
            assert counts() == (executes + 1, compiles)
            for got, want in zip(out, f(a, b)):
                torch.testing.assert_close(got.cpu(), want)
    assert len(graphs) == 1 and len(graphs[0].all_captures()) == 1


def test_training_step_graphs_are_replayed(graphs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    reference = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    reference.load_state_dict(model.state_dict())
    model.to("tpu")
    cm = compiled(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    x, y = torch.randn(6, 8), torch.randn(6, 3)
    with no_fallback():
        for _step in range(4):
            loss = F.mse_loss(cm(x.to("tpu")), y.to("tpu"))
            loss.backward()
            opt.step()
            opt.zero_grad()
            ref_loss = F.mse_loss(reference(x), y)
            ref_loss.backward()
            ref_opt.step()
            ref_opt.zero_grad()
            torch.testing.assert_close(loss.cpu(), ref_loss.detach(), rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.cpu(), q.detach(), rtol=1e-5, atol=1e-6)
    assert len(graphs) == 2  # forward, backward
    assert all(len(g.all_captures()) == 1 and g.capture_failures == 0 for g in graphs)


def test_dropout_replay_draws_as_eager_does():
    x = torch.ones(2000, device="tpu")
    cf = compiled(lambda t: F.dropout(t, 0.5, training=True))
    torch.manual_seed(3)
    compiled_draws = [cf(x).cpu() for _ in range(3)]  # capture, then two replays
    torch.manual_seed(3)
    eager_draws = [F.dropout(x, 0.5, training=True).cpu() for _ in range(3)]
    for got, want in zip(compiled_draws, eager_draws):
        assert torch.equal(got, want)
    assert not torch.equal(compiled_draws[1], compiled_draws[2])


def test_new_input_layout_is_captured_separately(graphs):
    cf = compiled(lambda a: a * 2 + 1)
    base = torch.randn(5, 5)
    t = base.to("tpu")
    torch.testing.assert_close(cf(t).cpu(), base * 2 + 1)
    torch.testing.assert_close(cf(t.t()).cpu(), base.t() * 2 + 1)  # strides differ
    torch.testing.assert_close(cf(t.t()).cpu(), base.t() * 2 + 1)
    torch.testing.assert_close(cf(t).cpu(), base * 2 + 1)
    assert sum(len(g.all_captures()) for g in graphs) >= 2


def test_outputs_aliasing_inputs_and_each_other():
    def f(a):
        y = a * 2
        return y, y.t(), a.view(-1)

    cf = compiled(f)
    a = torch.randn(3, 4)
    for _ in range(3):
        ta = a.to("tpu")
        y, yt, flat = cf(ta)
        torch.testing.assert_close(yt.cpu(), (a * 2).t())
        assert yt.data_ptr() == y.data_ptr()  # one storage, as in eager
        assert flat.data_ptr() == ta.data_ptr()
        ta.add_(1)  # the view still sees its base
        torch.testing.assert_close(flat.cpu(), (a + 1).view(-1))


def test_sliced_batches_replay_one_program(graphs):
    data = torch.randn(8, 3)
    xs = data.to("tpu")
    cf = compiled(lambda t: t.square().sum(1))
    for i in range(4):
        torch.testing.assert_close(
            cf(xs[2 * i : 2 * i + 2]).cpu(), data[2 * i : 2 * i + 2].square().sum(1)
        )
    assert sum(len(g.all_captures()) for g in graphs) == 1


def test_raw_execute_binding_runs_the_captured_program(graphs):
    cf = compiled(lambda a, b: a + b)
    a, b = torch.randn(100, device="tpu"), torch.randn(100, device="tpu")
    cf(a, b)
    capture = graphs[0].all_captures()[0]
    # A benchmark hook (bench/): it times executes of the captured program,
    # whose results it drops, so only its time and its argument checks show.
    ns = _C._compiled_raw_execute_ns(capture, [a, b], 10)
    assert 0 < ns < 10e9 and math.isfinite(ns)
    for args, n in (([a], 10), ([a, b, a], 10), ([a, b], 0)):
        with pytest.raises(RuntimeError, match="raw_execute_ns: bad arguments"):
            _C._compiled_raw_execute_ns(capture, args, n)


def test_index_range_check_runs_at_every_replay(graphs):
    w = torch.randn(10, 4)
    tw = w.to("tpu")
    cf = compiled(lambda i, t: F.embedding(i, t) * 2)
    good = torch.tensor([1, 2])
    for _ in range(2):
        torch.testing.assert_close(cf(good.to("tpu"), tw).cpu(), w[[1, 2]] * 2)
    assert graphs[0].capture_failures == 0 and len(graphs[0].all_captures()) == 1
    out = cf(torch.tensor([1, 12], device="tpu"), tw)  # replayed: no sync at the call
    with pytest.raises(IndexError, match="index out of range in self"):
        out.cpu()
    torch.testing.assert_close(cf(good.to("tpu"), tw).cpu(), w[[1, 2]] * 2)


def test_graph_is_split_around_an_unlowered_op(graphs):
    def f(x, y):
        a = (x * 2).sin()
        return (unlowered(a) + y).cos(), a

    cf = compiled(f)
    x, y = torch.randn(5), torch.randn(5)
    with pytest.warns(UserWarning, match=r"graph split around aten\.special_airy_ai"):
        first = cf(x.to("tpu"), y.to("tpu"))
    for got, want in zip(first, f(x, y)):
        torch.testing.assert_close(got.cpu(), want)
    for _ in range(2):
        x, y = torch.randn(5), torch.randn(5)
        tx, ty = x.to("tpu"), y.to("tpu")
        executes, compiles = counts()
        out = cf(tx, ty)
        assert counts() == (executes + 2, compiles)  # the parts before and after it
        for got, want in zip(out, f(x, y)):
            torch.testing.assert_close(got.cpu(), want)
    parts = [g for g in graphs if g.split is None]
    assert len(parts) == 2 and all(len(g.all_captures()) == 1 for g in parts)

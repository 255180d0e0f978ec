"""Checks of torchtpu.spmd over 4 tpu devices in one process. tests/distributed/test_spmd.py
runs this file in a subprocess with TORCHTPU_CPU_DEVICES=4 (the test session's
runtime has one device) and reports each check as one test. Prints one JSON
line: {check name: None or traceback}."""

import io

import pytest
import torch
import torch.nn.functional as F

import torchtpu
import torchtpu.spmd as spmd
from _util import run_checks_main

def mesh2d():
    return spmd.Mesh([0, 1, 2, 3], (2, 2), ("data", "model"))


def close(got, want, atol=1e-5):
    got = got.cpu() if isinstance(got, torch.Tensor) else got
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    torch.testing.assert_close(got, want, atol=atol, rtol=1e-5)


def check_shards_hold_their_slices_and_gather_to_the_full_value():
    mesh = mesh2d()
    x = torch.arange(8 * 6, dtype=torch.float32).reshape(8, 6)
    for spec, local in [(("data", "model"), (4, 3)), (("data", None), (4, 6)),
                        ((("data", "model"), None), (2, 6)), ((None, None), (8, 6))]:
        s = spmd.mark_sharding(x, mesh, spec)
        assert [t.shape for t in s.shards] == [torch.Size(local)] * 4, (spec, s.shards)
        assert [t.device.index for t in s.shards] == [0, 1, 2, 3]
        assert torch.equal(s.full_tensor().cpu(), x) and torch.equal(s.cpu(), x)
    s = spmd.mark_sharding(x.to("tpu:2"), mesh, ("model", "data"))
    # device (data=1, model=0) is position 2: rows 0-3 (model 0), cols 3-5 (data 1)
    assert torch.equal(s.shards[2].cpu(), x[:4, 3:])
    # A bare axis name is a 1-D tensor's spec, None a replicated tensor's.
    v = torch.arange(8.0)
    assert spmd.mark_sharding(v, mesh, "data").spec == ("data",)
    assert spmd.mark_sharding(x, mesh, None).spec == (None, None)
    for dtype in (torch.bfloat16, torch.int64, torch.bool):
        y = (torch.arange(16).reshape(4, 4) % 3).to(dtype)
        assert torch.equal(spmd.mark_sharding(y, mesh, (None, "data")).cpu(), y)


def check_jit_mlp_equals_cpu_one_program_per_layout():
    mesh = mesh2d()
    torch.manual_seed(0)
    X, W1, W2 = torch.randn(8, 16), torch.randn(16, 32), torch.randn(32, 4)
    x = spmd.mark_sharding(X, mesh, ("data", None))
    w1 = spmd.mark_sharding(W1, mesh, (None, "model"))
    w2 = spmd.mark_sharding(W2, mesh, ("model", None))

    def mlp(x, w1, w2):
        return F.gelu(x @ w1) @ w2 * 0.5 + 1

    f = spmd.jit(mlp)
    want = mlp(X, W1, W2)
    y = f(x, w1, w2)
    assert isinstance(y, spmd.ShardedTensor) and y.spec == (None, None)
    close(y, want)
    torchtpu.metrics.reset()
    for _ in range(3):
        close(f(x, w1, w2), want)
    m = torchtpu.metrics.metrics()
    assert m["compiles"] == 0 and torchtpu.metrics.total_fallbacks() == 0, m
    # New values, same layout: the same program.
    x2 = spmd.mark_sharding(X * 2, mesh, ("data", None))
    close(f(x2, w1, w2), mlp(X * 2, W1, W2))
    assert torchtpu.metrics.metrics()["compiles"] == 0


def check_functional_training_step_on_a_2d_mesh_equals_cpu():
    """torch.func gradients and an SGD update returning the weights: data x
    model parallel, one execute per step, no host bytes, CPU's weights."""
    from torch.func import grad_and_value

    def loss_fn(w1, w2, x, y):
        return F.mse_loss(F.gelu(x @ w1) @ w2, y)

    def step(w1, w2, x, y):
        (g1, g2), loss = grad_and_value(loss_fn, argnums=(0, 1))(w1, w2, x, y)
        return w1 - 0.1 * g1, w2 - 0.1 * g2, loss

    mesh = mesh2d()
    torch.manual_seed(0)
    X, Y, W1, W2 = torch.randn(16, 8), torch.randn(16, 4), torch.randn(8, 32), torch.randn(32, 4)
    f = spmd.jit(step, out_specs=((None, "model"), ("model", None), None))
    w1 = spmd.mark_sharding(W1, mesh, (None, "model"))
    w2 = spmd.mark_sharding(W2, mesh, ("model", None))
    x, y = (spmd.mark_sharding(t, mesh, ("data", None)) for t in (X, Y))
    c1, c2 = W1, W2
    for i in range(5):
        if i == 2:
            torchtpu.sync()
            torchtpu.metrics.reset()
        w1, w2, loss = f(w1, w2, x, y)
        c1, c2, closs = step(c1, c2, X, Y)
    m = torchtpu.metrics.metrics()
    assert m["executes"] == 3 and m["compiles"] == 0 and m["bytes_to_host"] == 0, m
    assert m["spmd_executes"] == 3 and m["spmd_programs"] == 0, m
    assert w1.spec == (None, "model") and [t.shape for t in w1.shards] == [(8, 16)] * 4
    close(w1, c1)
    close(w2, c2)
    close(loss, closs)


def check_out_specs_shard_the_results():
    mesh = mesh2d()
    X, W = torch.randn(8, 16), torch.randn(16, 32)
    x = spmd.mark_sharding(X, mesh, ("data", None))
    w = spmd.mark_sharding(W, mesh, (None, "model"))
    f = spmd.jit(lambda x, w: (torch.relu(x @ w), (x * x).sum(), x.sum(1)),
                 out_specs=(("data", "model"), None, ("data",)))
    for _ in range(2):
        a, loss, rows = f(x, w)
        assert a.spec == ("data", "model") and [t.shape for t in a.shards] == [(4, 16)] * 4
        close(a, torch.relu(X @ W))
        assert loss.shape == () and loss.spec == ()
        close(loss, (X * X).sum(), atol=1e-4)
        assert rows.spec == ("data",)
        close(rows, X.sum(1))
        close(a.shards[3], torch.relu(X @ W)[4:, 16:])


def check_one_dim_mesh_and_plain_inputs_replicated():
    mesh = spmd.Mesh([1, 3])
    X = torch.randn(6, 4)
    x = spmd.mark_sharding(X, mesh, ("x", None))
    b = torch.randn(4)  # a CPU tensor: replicated on the mesh
    out = spmd.jit(lambda x, b: torch.softmax(x + b, dim=1), out_specs=("x", None))(x, b)
    assert [t.device.index for t in out.shards] == [1, 3]
    close(out, torch.softmax(X + b, dim=1))


def check_views_of_inputs_among_the_outputs():
    mesh = spmd.Mesh([0, 1])
    X = torch.randn(4, 6)
    x = spmd.mark_sharding(X, mesh, ("x", None))
    for _ in range(2):
        y, v, t = spmd.jit(lambda t: (t * 2, t.view(6, 4), t.t()))(x)
        close(y, X * 2)
        close(v, X.view(6, 4))
        close(t, X.t())
    with pytest.raises(RuntimeError, match="views of the inputs"):
        spmd.jit(lambda t: t.t())(x)


def check_full_value_for_print_save_and_other_ops():
    mesh = mesh2d()
    X = torch.randn(4, 6)
    x = spmd.mark_sharding(X, mesh, ("data", "model"))
    assert "ShardedTensor(" in repr(x) and "model" in repr(x)
    buf = io.BytesIO()
    torch.save({"w": x}, buf)
    buf.seek(0)
    loaded = torch.load(buf)["w"]
    assert type(loaded) is torch.Tensor and torch.equal(loaded.cpu(), X)
    close(x.t(), X.t())
    x.add_(1)  # an in-place op writes the new value back as shards
    close(x, X + 1)
    close(x.shards[1], (X + 1)[:2, 3:])
    assert torch.equal(spmd.clear_sharding(x).cpu(), X + 1)


def check_ops_outside_jit_run_as_one_program_each():
    mesh = mesh2d()
    X, B = torch.randn(8, 6), torch.randn(6)
    x = spmd.mark_sharding(X, mesh, ("data", "model"))
    b = spmd.mark_sharding(B, mesh, ("model",))
    y = torch.tanh(x * 2 + b)  # three ops, each a program over the mesh
    assert isinstance(y, spmd.ShardedTensor) and y.spec == ("data", "model")
    close(y, torch.tanh(X * 2 + B))
    s = y.sum(0)  # a new shape: replicated
    assert s.spec == (None,)
    close(s, torch.tanh(X * 2 + B).sum(0), atol=1e-4)
    torchtpu.sync()
    torchtpu.metrics.reset()
    z = torch.tanh(x * 2 + b)  # the same ops and layouts: no compile, one execute per op
    m = torchtpu.metrics.metrics()
    assert m["compiles"] == 0 and m["executes"] == 3, m
    close(z, torch.tanh(X * 2 + B))
    W = torch.randn(6, 5)
    mm = x @ W.to("tpu:0")  # a plain tpu tensor joins, replicated
    assert mm.spec == (None, None)
    close(mm, X @ W)


def check_writes_through_views_reach_the_base_and_back():
    mesh = spmd.Mesh([0, 1], (2,), ("a",))
    want = torch.arange(8.0).reshape(2, 4)
    s = spmd.mark_sharding(want, mesh, (None, "a"))
    want = want.clone()
    s[0] = 100.0
    want[0] = 100.0
    s[:, 1].zero_()
    want[:, 1].zero_()
    close(s, want)
    row = s[1]
    s.add_(1)
    want.add_(1)
    close(row, want[1])  # the base's write shows through the view
    left, _ = s.split(2, dim=1)
    left.mul_(2)
    want.split(2, dim=1)[0].mul_(2)
    close(s, want)
    close(s.shards[1], want[:, 2:])
    assert s.max().item() == want.max().item()
    close(torch.softmax(s, 1), torch.softmax(want, 1))
    assert f"{s.sum():.2f}" == f"{want.sum():.2f}"
    close(spmd.jit(lambda t: t.max())(s), want.max())


def check_max_min_reductions_over_a_sharded_dim_propagate_nan():
    """A max/min reduction over a sharded dim partitions (a plain reducer and
    a NaN count, torchtpu/spmd/reductions.py) and keeps PyTorch's NaN."""
    mesh = mesh2d()
    torch.manual_seed(6)
    X = torch.randn(8, 16)
    X[3, 5] = float("nan")
    X[6, 2] = float("inf")
    X[1, 9] = -float("inf")
    fns = [lambda x: torch.softmax(x, 1), lambda x: x.amax(1), lambda x: x.amin(1),
           lambda x: torch.logsumexp(x, 1), lambda x: x.max(), lambda x: x.amax(0),
           lambda x: x.max(1).values, lambda x: x.argmax(1)]
    for spec in [(None, "model"), ("data", "model"), (("data", "model"), None)]:
        x = spmd.mark_sharding(X, mesh, spec)
        for fn in fns:
            torch.testing.assert_close(spmd.jit(fn)(x).cpu(), fn(X), equal_nan=True)


def check_compiled_function_inside_jit_is_one_program():
    """torch.compile(backend="tpu") under spmd.jit: Dynamo's one graph joins
    the capture; each call is one execute over the mesh."""
    from torch._dynamo.utils import counters

    mesh = mesh2d()
    torch.manual_seed(5)
    X, W1, W2 = torch.randn(8, 16), torch.randn(16, 32), torch.randn(32, 4)

    @torch.compile(backend="tpu")
    def mlp(x, w1, w2):
        return F.gelu(x @ w1) @ w2

    counters.clear()
    f = spmd.jit(mlp, out_specs=("data", None))
    args = (spmd.mark_sharding(X, mesh, ("data", None)),
            spmd.mark_sharding(W1, mesh, (None, "model")),
            spmd.mark_sharding(W2, mesh, ("model", None)))
    f(*args)
    torchtpu.metrics.reset()
    y = f(*args)
    m = torchtpu.metrics.metrics()
    assert m["executes"] == 1 and m["spmd_executes"] == 1 and m["compiles"] == 0, m
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"], counters
    close(y, F.gelu(X @ W1) @ W2, atol=1e-4)


def check_memory_allocated_counts_each_devices_shards():
    mesh = mesh2d()
    torchtpu.sync()
    before = [torch.tpu.memory_allocated(d) for d in range(4)]
    x = spmd.mark_sharding(torch.randn(64, 32), mesh, (("data", "model"), None))
    torchtpu.sync()
    grown = [torch.tpu.memory_allocated(d) - b for d, b in zip(range(4), before)]
    assert grown == [64 * 32 * 4 // 4] * 4, grown
    del x


def check_index_range_checks_run_after_the_program():
    """An embedding's index range check is computed in the program and
    reported at the next host read, as on one device."""
    mesh = mesh2d()
    torch.manual_seed(4)
    W = torch.randn(10, 8)
    f = spmd.jit(lambda ids, w: F.embedding(ids, w).sum(1), out_specs=("data", None))
    w = spmd.mark_sharding(W, mesh, (None, None))
    ids = torch.randint(0, 10, (4, 3))
    close(f(spmd.mark_sharding(ids, mesh, ("data", None)), w), F.embedding(ids, W).sum(1))
    bad = ids.clone()
    bad[3, 1] = 10
    y = f(spmd.mark_sharding(bad, mesh, ("data", None)), w)
    with pytest.raises(IndexError, match="out of range"):
        y.cpu()
    close(f(spmd.mark_sharding(ids, mesh, ("data", None)), w), F.embedding(ids, W).sum(1))


def check_errors_are_clear():
    mesh = mesh2d()
    with pytest.raises(ValueError, match="not divisible"):
        spmd.mark_sharding(torch.randn(5, 4), mesh, ("data", None))
    with pytest.raises(ValueError, match="2 entries"):
        spmd.mark_sharding(torch.randn(4), mesh, ("data", None))
    with pytest.raises(ValueError, match="shards two dims"):
        spmd.mark_sharding(torch.randn(4, 4), mesh, ("data", "data"))
    with pytest.raises(ValueError, match="no axis"):
        spmd.mark_sharding(torch.randn(4, 4), mesh, ("rows", None))
    with pytest.raises(ValueError, match="tpu:4 is not one of this process's 4"):
        spmd.Mesh([0, 4])
    with pytest.raises(ValueError, match="repeat"):
        spmd.Mesh([1, 1])
    with pytest.raises(ValueError, match="holds 4 devices"):
        spmd.Mesh([0, 1, 2], (2, 2))
    a = spmd.mark_sharding(torch.randn(4, 4), spmd.Mesh([0, 1]), ("x", None))
    b = spmd.mark_sharding(torch.randn(4, 4), spmd.Mesh([2, 3]), ("x", None))
    with pytest.raises(ValueError, match="2 meshes"):
        spmd.jit(torch.add)(a, b)
    with pytest.raises(ValueError, match="different meshes"):
        a + b
    with pytest.raises(ValueError, match="a list of specs where one spec was expected"):
        spmd.jit(lambda t: t * 2, out_specs=(("x", None), ("x", None)))(a)
    with pytest.raises(ValueError, match="does not divide"):
        spmd.jit(lambda t: t * 2, out_specs=(None, ("data", "model")))(
            spmd.mark_sharding(torch.randn(4, 3), mesh2d(), ("data", None)))
    with pytest.raises(NotImplementedError, match="random"):
        spmd.jit(lambda t: F.dropout(t, 0.5))(a)
    with pytest.raises(RuntimeError, match="could not be captured"):
        spmd.jit(lambda t: t * t.sum().item())(a)
    # Nothing was lost: the runtime still runs programs over the mesh.
    close(spmd.jit(lambda t: t + 1)(a), a.cpu() + 1)


if __name__ == "__main__":
    run_checks_main(globals(), devices=4)

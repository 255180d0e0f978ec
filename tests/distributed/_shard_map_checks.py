"""Checks of torchtpu.spmd.shard_map over 4 tpu devices in one process: PyTorch's
functional collectives over mesh groups compiled into the program. Run by
tests/distributed/test_spmd.py in a subprocess with TORCHTPU_CPU_DEVICES=4;
prints one JSON line: {check name: None or traceback}."""

import pytest
import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F

import torchtpu
import torchtpu.spmd as spmd
from _spmd_checks import close, mesh2d
from _util import INF, NAN, run_checks_main


def blocks(x, rows, cols):
    """x's [rows x cols] grid of blocks, row-major: block (r, c) is the one mesh
    position r * cols + c holds under spec ("data", "model")."""
    return [b for r in x.chunk(rows, 0) for b in r.chunk(cols, 1)]


def grid(bs, rows, cols):
    return torch.cat([torch.cat(bs[r * cols:(r + 1) * cols], 1) for r in range(rows)], 0)


def steady(f, *args, calls=3):
    """f's result after a first call, with the metrics of ``calls`` more calls."""
    f(*args)
    torchtpu.sync()
    torchtpu.metrics.reset()
    for _ in range(calls):
        out = f(*args)
    torchtpu.sync()
    return out, torchtpu.metrics.metrics()


def check_all_reduce_over_each_axis_equals_the_block_sums():
    mesh = mesh2d()
    torch.manual_seed(0)
    X = torch.randn(8, 6)
    X[5, 4] = float("nan")  # in the block of position 3: max/min keep it
    b = blocks(X, 2, 2)
    for axis, op, want in [
        ("data", "sum", [b[0] + b[2], b[1] + b[3], b[0] + b[2], b[1] + b[3]]),
        ("model", "avg", [(b[0] + b[1]) / 2, (b[0] + b[1]) / 2, (b[2] + b[3]) / 2,
                          (b[2] + b[3]) / 2]),
        (("data", "model"), "max", [torch.stack(b).amax(0)] * 4),
        ("data", "min", [torch.minimum(b[0], b[2]), torch.minimum(b[1], b[3])] * 2),
        ("model", "product", [b[0] * b[1], b[0] * b[1], b[2] * b[3], b[2] * b[3]]),
    ]:
        f = spmd.shard_map(lambda x, axis=axis, op=op: funcol.all_reduce(x * 1, op,
                                                                         mesh.group(axis)),
                           mesh, in_specs=(("data", "model"),), out_specs=("data", "model"))
        y, m = steady(f, X)
        assert isinstance(y, spmd.ShardedTensor) and y.spec == ("data", "model")
        torch.testing.assert_close(y.cpu(), grid(want, 2, 2), equal_nan=True)
        assert m["executes"] == 3 and m["compiles"] == 0 and m["bytes_to_host"] == 0, (axis, m)


def check_all_gather_reduce_scatter_and_all_to_all():
    mesh = mesh2d()
    torch.manual_seed(1)
    X = torch.randn(8, 4)
    rows = X.chunk(4, 0)  # the block of mesh position p under spec (("data", "model"), None)

    def gather(x):  # every device: the whole of X (gathered over both axes, dim 0)
        return funcol.all_gather_tensor(x, 0, mesh.group(("data", "model")))

    y = spmd.shard_map(gather, mesh, ((("data", "model"), None),), (None, None))(X)
    close(y, X)
    assert all(torch.equal(s.cpu(), X) for s in y.shards)

    def gather_cols(x):  # gathered over "model" along dim 1
        return funcol.all_gather_tensor(x, 1, mesh.group("model"))

    y = spmd.shard_map(gather_cols, mesh, ((None, "model"),), (None, None))(X)
    close(y, X)

    def scatter(x):  # sum over "data" of [8, 4] copies, each device keeping 4 rows
        return funcol.reduce_scatter_tensor(x * 1, "sum", 0, mesh.group("data"))

    y = spmd.shard_map(scatter, mesh, ((None, None),), ("data", None))(X)
    close(y, 2 * X)

    # max/min keep NaN (the CPU plugin's combine drops it; an all-NaN one
    # came back -inf), as torch.maximum over the blocks does.
    m1 = spmd.Mesh([0, 1, 2, 3])
    w = torch.tensor([NAN, 1, 2, 3, 0, NAN, 9, 1, 5, 5, 5, 5, 1, 1, 1, -INF])
    for op, red in (("max", torch.amax), ("min", torch.amin)):
        f = spmd.shard_map(lambda b, op=op: funcol.reduce_scatter_tensor(b, op, 0, m1.group("x")),
                           m1, ("x",), "x")
        torch.testing.assert_close(f(w).cpu(), red(w.view(4, 4), 0), equal_nan=True)
        torch.testing.assert_close(f(torch.full((16,), NAN)).cpu(), torch.full((4,), NAN),
                                   equal_nan=True)

    def exchange(x):  # all_to_all over "data": block j of device i goes to device j
        return funcol.all_to_all_single(x, None, None, mesh.group("data"))

    y = spmd.shard_map(exchange, mesh, ((("data", "model"), None),),
                       (("data", "model"), None))(X)
    # positions 0 and 2 ("data" 0 and 1, "model" 0) swap second/first halves
    want = []
    for p in range(4):
        peer = [p % 2, 2 + p % 2]
        want.append(torch.cat([rows[q].chunk(2, 0)[peer.index(p)] for q in peer]))
    close(y, torch.cat(want))


def check_ppermute_sends_around_a_ring():
    mesh = spmd.Mesh([0, 1, 2, 3])
    X = torch.arange(8.0).reshape(4, 2)
    f = spmd.shard_map(lambda x: spmd.ppermute(x, "x", [(i, (i + 1) % 4) for i in range(4)]),
                       mesh, (("x", None),), ("x", None))
    close(f(X), X.roll(1, 0))
    g = spmd.shard_map(lambda x: spmd.ppermute(x, "x", [(0, 1)]), mesh, (("x", None),),
                       ("x", None))
    close(g(X), torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]]))


def check_compiled_graph_with_collectives_is_one_program():
    """torch.compile(backend="tpu") inside shard_map: Dynamo's graph holds the
    functional collectives, they join the one program."""
    mesh = mesh2d()
    torch.manual_seed(2)
    X, W = torch.randn(8, 16), torch.randn(16, 8)

    @torch.compile(backend="tpu")
    def row_parallel(x, w):  # x: [4, 8] columns split over "model", w: [8, 8] rows
        partial = x @ w
        y = funcol.all_reduce(partial, "sum", mesh.group("model"))
        g = funcol.all_gather_tensor(F.relu(y), 0, mesh.group("data"))
        return funcol.reduce_scatter_tensor(g, "avg", 0, mesh.group("data"))

    from torch._dynamo.utils import counters

    counters.clear()
    f = spmd.shard_map(row_parallel, mesh, (("data", "model"), ("model", None)),
                       ("data", None))
    y, m = steady(f, X, W)
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"], counters
    close(y, F.relu(X @ W), atol=1e-4)
    assert m["executes"] == 3 and m["compiles"] == 0 and m["bytes_to_host"] == 0, m


def check_data_parallel_training_step_equals_cpu():
    """torch.func gradients per device, averaged by an in-program all_reduce:
    5 SGD steps equal full-batch steps on CPU."""
    from torch.func import grad_and_value

    mesh = spmd.Mesh([0, 1, 2, 3], axis_names=("data",))
    group = mesh.group("data")

    def loss_fn(w1, w2, x, y):
        return F.mse_loss(torch.tanh(x @ w1) @ w2, y)

    def step(w1, w2, x, y):
        (g1, g2), loss = grad_and_value(loss_fn, argnums=(0, 1))(w1, w2, x, y)
        g1, g2, loss = (funcol.all_reduce(t, "avg", group) for t in (g1, g2, loss))
        return w1 - 0.1 * g1, w2 - 0.1 * g2, loss

    torch.manual_seed(3)
    X, Y, W1, W2 = torch.randn(16, 8), torch.randn(16, 4), torch.randn(8, 32), torch.randn(32, 4)
    f = spmd.shard_map(step, mesh, ((None, None), (None, None), ("data", None), ("data", None)),
                       ((None, None), (None, None), ()))
    w1, w2 = W1, W2
    c1, c2 = W1, W2
    for _ in range(5):
        w1, w2, loss = f(w1, w2, X, Y)
        c1, c2, closs = _cpu_step(loss_fn, c1, c2, X, Y)
    close(w1, c1)
    close(w2, c2)
    close(loss, closs)
    assert all(torch.equal(s.cpu(), w1.shards[0].cpu()) for s in w1.shards)


def _cpu_step(loss_fn, w1, w2, x, y):
    from torch.func import grad_and_value
    (g1, g2), loss = grad_and_value(loss_fn, argnums=(0, 1))(w1, w2, x, y)
    return w1 - 0.1 * g1, w2 - 0.1 * g2, loss


def check_each_devices_index_range_is_checked():
    mesh = spmd.Mesh([0, 1, 2, 3])
    W = torch.randn(10, 4)
    f = spmd.shard_map(lambda ids, w: F.embedding(ids, w), mesh, (("x",), (None, None)),
                       ("x", None))
    ids = torch.arange(8) % 10
    close(f(ids, W), W[ids])
    bad = ids.clone()
    bad[6] = -11  # only device 3's block is out of range
    y = f(bad, W)
    with pytest.raises(IndexError, match="out of range"):
        y.cpu()


def check_errors_are_clear_and_nothing_is_lost():
    mesh = mesh2d()
    x = torch.randn(4, 4, device="tpu")
    with pytest.raises(RuntimeError, match="only inside torchtpu.spmd.shard_map"):
        funcol.all_reduce(x, "sum", mesh.group("data"))
    with pytest.raises(RuntimeError, match="only inside"):
        spmd.ppermute(x, "data", [(0, 1)])
    other = spmd.Mesh([0, 1])
    with pytest.raises(ValueError, match="inside a shard_map over"):
        spmd.shard_map(lambda t: funcol.all_reduce(t, "sum", other.group("x")), mesh,
                       (("data", None),), ("data", None))(x.cpu())
    scatter = torch.ops._c10d_functional.reduce_scatter_tensor
    with pytest.raises(ValueError, match="not divisible by the group size"):
        spmd.shard_map(lambda t: scatter(t, "sum", 2, mesh.group("data")),
                       mesh, (("data", "model"),), ("data", "model"))(torch.randn(2, 4))
    with pytest.raises(ValueError, match="group size 4 given for"):
        spmd.shard_map(lambda t: scatter(t, "sum", 4, mesh.group("data")),
                       mesh, ((None, None),), (None, None))(torch.randn(4, 4))
    with pytest.raises(ValueError, match="distinct indices"):
        spmd.shard_map(lambda t: spmd.ppermute(t, "data", [(0, 1), (1, 1)]), mesh,
                       (("data", None),), ("data", None))(x.cpu())
    with pytest.raises(TypeError, match="'avg' needs a floating"):
        spmd.shard_map(lambda t: funcol.all_reduce(t, "avg", mesh.group("data")), mesh,
                       (("data", None),), ("data", None))(torch.ones(4, 4, dtype=torch.int32))
    with pytest.raises(ValueError, match="no axis"):
        mesh.group("rows")
    with pytest.raises(ValueError, match="1 in_specs for 2 tensors"):
        spmd.shard_map(torch.add, mesh, ((None, None),), (None, None))(x, x)
    with pytest.raises(ValueError, match="does not divide|not divisible"):
        spmd.shard_map(lambda t: t, mesh, (("data", None),), ("data", None))(torch.randn(3, 4))
    # A function that writes its input is refused and leaves the input as it was.
    xs = spmd.mark_sharding(torch.arange(16.0).reshape(8, 2), spmd.Mesh([0, 1, 2, 3]),
                            ("x", None))
    with pytest.raises(RuntimeError, match="a write to an input"):
        spmd.shard_map(lambda a: a.add_(1), xs.mesh, (("x", None),), ("x", None))(xs)
    close(xs, torch.arange(16.0).reshape(8, 2))
    # Nothing was lost: the runtime still runs programs over the mesh.
    f = spmd.shard_map(lambda t: funcol.all_reduce(t, "sum", mesh.group("data")), mesh,
                       (("data", None),), (None, None))
    X = torch.arange(8.0).reshape(2, 4)
    close(f(X), X[:1] + X[1:])


if __name__ == "__main__":
    run_checks_main(globals(), devices=4)

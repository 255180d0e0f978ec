"""One rank of tests/distributed/test_distributed.py: runs a group of checks in one process
(each process start imports torch, ~3 s) and prints one line per check:
``CHECK <name> ok`` or ``CHECK <name> FAIL <message>``.

Usage: python _dist_worker.py <group> <rank> <world> <port>
"""

import datetime
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

import torchtpu  # noqa: F401

TIMEOUT = datetime.timedelta(seconds=60)


def report(name, fn):
    try:
        fn()
        print(f"CHECK {name} ok", flush=True)
    except Exception as e:  # reported to the parent, which fails that check
        msg = f"{type(e).__name__}: {e}".replace("\n", " | ")[:2000]
        print(f"CHECK {name} FAIL {msg}", flush=True)
        traceback.print_exc()


def close(actual, expected, atol=0, rtol=0):
    assert actual.device.type == "tpu", f"result on {actual.device}"
    torch.testing.assert_close(actual.cpu(), expected, atol=atol, rtol=rtol)


def data(rank, shape, dtype, salt=0):
    g = torch.Generator().manual_seed(100 * rank + salt)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=dtype)


# ---- collectives: the same call on tpu (group "tpu") and CPU (group "gloo") ----

OPS = {
    "sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX, "product": dist.ReduceOp.PRODUCT,
}


def check_all_reduce(rank, tpu_pg, cpu_pg, dtype, op):
    x = data(rank, (5, 7), dtype)
    if op == "product":
        x = x.abs().clamp(max=3) if not dtype.is_floating_point else x.clamp(-2, 2)
    ref = x.clone()
    if op == "avg":  # gloo has no AVG: the reference is the sum over the world
        dist.all_reduce(ref, dist.ReduceOp.SUM, group=cpu_pg)
        ref = ref / 2 if dtype.is_floating_point else torch.div(ref, 2, rounding_mode="trunc")
        ref = ref.to(dtype)
    else:
        dist.all_reduce(ref, OPS[op], group=cpu_pg)
    t = x.to("tpu")
    ptr = t.data_ptr()
    dist.all_reduce(t, OPS[op], group=tpu_pg)
    assert t.data_ptr() == ptr, "all_reduce must work in place"
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-6
    close(t, ref, atol=tol, rtol=tol)


def staging_adopted(rank, world, tpu_pg, cpu_pg):
    # Results above the staging pool's 64 KB floor come back as the host
    # buffer itself (the device buffer adopts it): a second all_reduce of
    # the same size must not reuse the first one's memory, an in-place op
    # (which may donate the buffer) and a later all_reduce must see the
    # right values, and views fall back to a copy.
    for dtype, shape in ((torch.float32, (200, 201)), (torch.int64, (300, 70)),
                         (torch.bfloat16, (300, 131))):
        xs = [data(rank, shape, dtype, salt=i) for i in range(2)]
        refs = [x.clone() for x in xs]
        for r in refs:
            dist.all_reduce(r, group=cpu_pg)
        ts = [x.to("tpu") for x in xs]
        ptrs = [t.data_ptr() for t in ts]
        for t in ts:
            dist.all_reduce(t, group=tpu_pg)
        for t, ptr, ref in zip(ts, ptrs, refs):
            assert t.data_ptr() == ptr, "all_reduce must work in place"
            close(t, ref)
        ts[0].mul_(3)
        dist.all_reduce(ts[0], group=tpu_pg)
        ref = refs[0] * 3
        dist.all_reduce(ref, group=cpu_pg)
        close(ts[0], ref)
        close(ts[1], refs[1])
        big = xs[1].to("tpu").t()  # non-contiguous, and a view of a bigger storage
        view = torch.zeros(2 * shape[0], shape[1], dtype=dtype, device="tpu")[1::2]
        view.copy_(xs[0].to("tpu"))
        dist.all_reduce(big, group=tpu_pg)
        dist.all_reduce(view, group=tpu_pg)
        close(big, refs[1].t())
        close(view, refs[0])


def staging_same_bits_every_dtype(rank, world, tpu_pg, cpu_pg):
    # The device-to-host staging copy (a memcpy from the buffer's own
    # memory on the CPU plugin, PJRT_Buffer_ToHostBuffer elsewhere) sends
    # exactly the bits the tensor holds: all_gather of every dtype gloo
    # carries equals the CPU group's bit for bit, for a whole buffer above
    # and below the staging pool's 64 KB floor, for a value still being
    # computed when the call starts (the product of a fresh matmul chain)
    # and for a strided view.
    a = torch.randn(160, 160, device="tpu") / 8
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16,
                  torch.int8, torch.uint8, torch.int32, torch.int64,
                  torch.bool):
        for n in (37, 70_000):
            if dtype == torch.bool:
                x = data(rank, (n,), torch.int64) > 0
            elif dtype == torch.uint8:
                x = data(rank, (n,), torch.int64).abs().to(dtype)
            else:
                x = data(rank, (n,), dtype)
            ref = [torch.empty_like(x) for _ in range(world)]
            dist.all_gather(ref, x, group=cpu_pg)
            outs = [torch.empty(n, dtype=dtype, device="tpu") for _ in range(world)]
            dist.all_gather(outs, x.to("tpu"), group=tpu_pg)
            for o, r in zip(outs, ref):
                assert torch.equal(o.cpu(), r), (dtype, n)
        # Still being computed at the call, then a view of a bigger storage.
        prod = (a @ a @ a @ a).to(dtype) if dtype != torch.bool else (a @ a @ a) > 0
        view = prod[::3, 1::2]
        for src in (prod, view):
            ref = [torch.empty_like(src.cpu()) for _ in range(world)]
            outs = [torch.empty(src.shape, dtype=dtype, device="tpu") for _ in range(world)]
            dist.all_gather(outs, src, group=tpu_pg)
            dist.all_gather(ref, src.cpu(), group=cpu_pg)
            for o, r in zip(outs, ref):
                assert torch.equal(o.cpu(), r), (dtype, tuple(src.shape))


def broadcast(rank, world, tpu_pg, cpu_pg):
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        x = data(rank, (3, 4), dtype)
        ref = x.clone()
        dist.broadcast(ref, src=1, group=cpu_pg)
        t = x.to("tpu")
        dist.broadcast(t, src=1, group=tpu_pg)
        close(t, ref)


def all_gather_even(rank, world, tpu_pg, cpu_pg):
    x = data(rank, (4, 3), torch.float32)
    ref = [torch.empty(4, 3) for _ in range(world)]
    dist.all_gather(ref, x, group=cpu_pg)
    out = [torch.empty(4, 3, device="tpu") for _ in range(world)]
    dist.all_gather(out, x.to("tpu"), group=tpu_pg)
    for o, r in zip(out, ref):
        close(o, r)


def all_gather_uneven(rank, world, tpu_pg, cpu_pg):
    sizes = [3, 5]
    x = data(rank, (sizes[rank], 2), torch.float32)
    out = [torch.empty(s, 2, device="tpu") for s in sizes]
    dist.all_gather(out, x.to("tpu"), group=tpu_pg)
    for r, o in enumerate(out):
        close(o, data(r, (sizes[r], 2), torch.float32))


def all_gather_into_tensor(rank, world, tpu_pg, cpu_pg):
    x = data(rank, (3, 2), torch.float32)
    ref = torch.empty(6, 2)
    dist.all_gather_into_tensor(ref, x, group=cpu_pg)
    out = torch.empty(6, 2, device="tpu")
    dist.all_gather_into_tensor(out, x.to("tpu"), group=tpu_pg)
    close(out, ref)


def reduce_scatter(rank, world, tpu_pg, cpu_pg):
    ins = [data(rank, (4,), torch.float32, salt=i) for i in range(world)]
    ref = torch.empty(4)
    dist.reduce_scatter(ref, ins, group=cpu_pg)
    out = torch.empty(4, device="tpu")
    dist.reduce_scatter(out, [i.to("tpu") for i in ins], group=tpu_pg)
    close(out, ref, atol=1e-6, rtol=1e-6)


def reduce_scatter_tensor(rank, world, tpu_pg, cpu_pg):
    for op in ("sum", "avg"):
        x = data(rank, (world * 3, 2), torch.float32)
        ref = torch.empty(3, 2)
        dist.reduce_scatter_tensor(ref, x, group=cpu_pg)
        if op == "avg":
            ref = ref / world
        out = torch.empty(3, 2, device="tpu")
        dist.reduce_scatter_tensor(out, x.to("tpu"), OPS[op], group=tpu_pg)
        close(out, ref, atol=1e-6, rtol=1e-6)
    # MAX: gloo's own reduce_scatter_tensor sums whatever the op (CPU
    # tensors too), so the reference is an all_reduce MAX and our chunk.
    x = data(rank, (world * 3, 2), torch.float32, salt=5)
    ref = x.clone()
    dist.all_reduce(ref, dist.ReduceOp.MAX, group=cpu_pg)
    out = torch.empty(3, 2, device="tpu")
    dist.reduce_scatter_tensor(out, x.to("tpu"), dist.ReduceOp.MAX, group=tpu_pg)
    close(out, ref.chunk(world)[rank], atol=0, rtol=0)


def all_to_all_single(rank, world, tpu_pg, cpu_pg):
    # uneven splits: rank r sends r+1 rows to rank 0 and 2 rows to rank 1
    in_splits = [rank + 1, 2]
    out_splits = [[1, 2][rank], 2] if rank == 0 else [2, 2]
    x = data(rank, (sum(in_splits), 3), torch.float32)
    ref = torch.empty(sum(out_splits), 3)
    dist.all_to_all_single(ref, x, out_splits, in_splits, group=cpu_pg)
    out = torch.empty(sum(out_splits), 3, device="tpu")
    dist.all_to_all_single(out, x.to("tpu"), out_splits, in_splits, group=tpu_pg)
    close(out, ref)


def scatter_gather_reduce(rank, world, tpu_pg, cpu_pg):
    src = [data(0, (2, 2), torch.float32, salt=i) for i in range(world)]
    ref = torch.empty(2, 2)
    dist.scatter(ref, src if rank == 0 else None, src=0, group=cpu_pg)
    out = torch.empty(2, 2, device="tpu")
    dist.scatter(out, [s.to("tpu") for s in src] if rank == 0 else None, src=0,
                 group=tpu_pg)
    close(out, ref)
    x = data(rank, (3,), torch.float32)
    gref = [torch.empty(3) for _ in range(world)] if rank == 1 else None
    dist.gather(x, gref, dst=1, group=cpu_pg)
    gout = [torch.empty(3, device="tpu") for _ in range(world)] if rank == 1 else None
    dist.gather(x.to("tpu"), gout, dst=1, group=tpu_pg)
    if rank == 1:
        for o, r in zip(gout, gref):
            close(o, r)
    rref = x.clone()
    dist.reduce(rref, dst=0, op=dist.ReduceOp.MAX, group=cpu_pg)
    rt = x.to("tpu")
    dist.reduce(rt, dst=0, op=dist.ReduceOp.MAX, group=tpu_pg)
    if rank == 0:
        close(rt, rref)


def send_recv_barrier(rank, world, tpu_pg, cpu_pg):
    x = data(0, (6,), torch.float32)
    if rank == 0:
        dist.send(x.to("tpu"), dst=1, group=tpu_pg)
        buf = torch.empty(6, device="tpu")
        dist.recv(buf, src=1, group=tpu_pg)
        close(buf, x * 2)
    else:
        buf = torch.empty(6, device="tpu")
        dist.recv(buf, src=0, group=tpu_pg)
        dist.send(buf * 2, dst=0, group=tpu_pg)
    ops = [dist.P2POp(dist.isend, torch.full((2,), float(rank), device="tpu"),
                      1 - rank, group=tpu_pg)]
    got = torch.empty(2, device="tpu")
    ops.append(dist.P2POp(dist.irecv, got, 1 - rank, group=tpu_pg))
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    close(got, torch.full((2,), float(1 - rank)))
    dist.barrier(group=tpu_pg)


def non_contiguous(rank, world, tpu_pg, cpu_pg):
    base = data(rank, (4, 6), torch.float32)
    ref = base.t().clone()
    dist.all_reduce(ref, group=cpu_pg)
    tb = base.to("tpu")
    view = tb.t()
    assert not view.is_contiguous()
    dist.all_reduce(view, group=tpu_pg)
    close(view, ref, atol=1e-6, rtol=1e-6)
    close(tb, ref.t(), atol=1e-6, rtol=1e-6)  # written through the view


def async_ops(rank, world, tpu_pg, cpu_pg):
    xs = [data(rank, (8,), torch.float32, salt=i) for i in range(3)]
    refs = [x.clone() for x in xs]
    for r in refs:
        dist.all_reduce(r, group=cpu_pg)
    ts = [x.to("tpu") for x in xs]
    works = [dist.all_reduce(t, group=tpu_pg, async_op=True) for t in ts]
    fut = works[0].get_future()
    for w in works:
        assert w.wait(timeout=TIMEOUT)
    assert w.is_completed()
    fut.wait()
    for t, r in zip(ts, refs):
        close(t, r, atol=1e-6, rtol=1e-6)


def async_issue_does_not_wait_for_peer(rank, world, tpu_pg, cpu_pg):
    # With the signature check on, its round trip runs on the group's
    # issuing thread: an async all_reduce returns before the peer joins.
    t = torch.full((64, 64), float(rank + 1), device="tpu")
    torchtpu.sync()
    dist.barrier(group=cpu_pg)
    if rank == 1:
        time.sleep(1.5)
    start = time.monotonic()
    work = dist.all_reduce(t, group=tpu_pg, async_op=True)
    fut = work.get_future()
    issued = time.monotonic() - start
    if rank == 0:
        assert issued < 0.75, f"all_reduce + get_future took {issued:.2f} s"
        assert not fut.done(), "completed before the peer joined"
    assert work.wait(timeout=TIMEOUT)
    close(fut.value()[0], torch.full((64, 64), 3.0))


def async_mixed_in_order(rank, world, tpu_pg, cpu_pg):
    # Many collectives of different kinds in flight at once, none waited
    # until the end: they reach gloo in call order on both ranks.
    a = [torch.full((5 + i,), float(rank + i), device="tpu") for i in range(4)]
    b = torch.full((3,), float(10 * (rank + 1)), device="tpu")
    g_in = torch.full((4,), float(rank), device="tpu")
    g_out = torch.empty(8, device="tpu")
    works = [dist.all_reduce(x, group=tpu_pg, async_op=True) for x in a[:2]]
    works.append(dist.broadcast(b, 1, group=tpu_pg, async_op=True))
    works.append(dist.all_gather_into_tensor(g_out, g_in, group=tpu_pg, async_op=True))
    works.append(dist.barrier(group=tpu_pg, async_op=True))
    works += [dist.all_reduce(x, dist.ReduceOp.MAX, group=tpu_pg, async_op=True)
              for x in a[2:]]
    futs = [w.get_future() for w in works]
    for f in futs:
        f.wait()
    for i in range(2):
        close(a[i], torch.full((5 + i,), float(2 * i + 1)))
    for i in range(2, 4):
        close(a[i], torch.full((5 + i,), float(1 + i)))
    close(b, torch.full((3,), 20.0))
    close(g_out, torch.tensor([0.0] * 4 + [1.0] * 4))


def async_issue_does_not_wait_for_producer(rank, world, tpu_pg, cpu_pg):
    # The staging copy runs on the group's issuing thread: an async
    # all_reduce of a tensor whose producing ops are still running returns
    # before they finish (the caller did wait for them before).
    x = torch.full((1024, 1024), 1.0 / 1024, device="tpu")
    torchtpu.sync()
    dist.barrier(group=cpu_pg)
    y = x
    for _ in range(6):  # ~0.1-0.5 s of device work on this machine
        y = y @ x
    done = torch.tpu.Event()
    done.record()
    work = dist.all_reduce(y, group=tpu_pg, async_op=True)
    fut = work.get_future()
    pending = not done.query()
    assert work.wait(timeout=TIMEOUT)
    assert pending, "all_reduce waited for the ops producing its input"
    close(fut.value()[0], torch.full((1024, 1024), 2.0 / 1024), rtol=1e-4)


def async_input_read_at_call(rank, world, tpu_pg, cpu_pg):
    # What is sent is the input's value at the call: later writes to it
    # (before wait) do not reach the peers.
    g_in = torch.full((4,), float(rank), device="tpu")
    g_out = torch.empty(8, device="tpu")
    work = dist.all_gather_into_tensor(g_out, g_in, group=tpu_pg, async_op=True)
    g_in.add_(100)
    assert work.wait(timeout=TIMEOUT)
    close(g_out, torch.tensor([0.0] * 4 + [1.0] * 4))


def read_output_while_in_flight(rank, world, tpu_pg, cpu_pg):
    # Touching an output before wait() is a race (as on CUDA), but it must
    # stay memory-safe while the write-back swaps its device buffer from
    # gloo's thread: each read sees the old or the new value, never a
    # crash. 64K floats take the adopting write-back.
    seen_old = seen_new = 0
    for i in range(40):
        t = torch.full((256, 256), float(rank + 1 + i), device="tpu")
        old, new = float(rank + 1 + i), float(3 + 2 * i)
        work = dist.all_reduce(t, group=tpu_pg, async_op=True)
        reads = 0
        while not work.is_completed() or reads == 0:
            v = t.cpu()
            s = (t * 2).sum().item()
            assert v.eq(old).all() or v.eq(new).all(), f"mixed values {v.unique()}"
            assert s in (2 * old * v.numel(), 2 * new * v.numel()), s
            seen_old += int(v[0, 0].item() == old)
            reads += 1
        assert work.wait(timeout=TIMEOUT)
        seen_new += 1
        close(t, torch.full((256, 256), new))
    assert seen_new == 40


def cpu_tensor_rejected(rank, world, tpu_pg, cpu_pg):
    # A CPU tensor alone: the group has no CPU backend, torch's ProcessGroup
    # refuses it (as for a CUDA tensor on a gloo-less NCCL group).
    try:
        dist.all_reduce(torch.ones(2), group=tpu_pg)
    except RuntimeError as e:
        assert "cpu" in str(e), str(e)
    else:
        raise AssertionError("a CPU tensor on the tpu-only group did not raise")
    # A CPU output beside a tpu input reaches the tpu backend: ValueError.
    try:
        dist.all_gather([torch.empty(2), torch.empty(2)], torch.ones(2, device="tpu"),
                        group=tpu_pg)
    except ValueError as e:
        assert "tpu" in str(e) and "cpu" in str(e), str(e)
    else:
        raise AssertionError("a CPU output tensor did not raise")


def group_name_kept(rank, world, tpu_pg, cpu_pg):
    from torch.distributed.distributed_c10d import _get_process_group_name
    name = _get_process_group_name(tpu_pg)
    backend = tpu_pg._get_backend(torch.device("tpu"))
    assert backend.name() == "tpu", backend.name()
    assert tpu_pg.group_name == name


# check_collectives' checks after all_reduce: (reported name, function of
# rank, world and the tpu and gloo groups), run in this order.
COLLECTIVE_CHECKS = [
    ("staging_adopted", staging_adopted),
    ("staging_same_bits_every_dtype", staging_same_bits_every_dtype),
    ("broadcast", broadcast),
    ("all_gather", all_gather_even),
    ("all_gather_uneven", all_gather_uneven),
    ("all_gather_into_tensor", all_gather_into_tensor),
    ("reduce_scatter", reduce_scatter),
    ("reduce_scatter_tensor", reduce_scatter_tensor),
    ("all_to_all_single_uneven", all_to_all_single),
    ("scatter_gather_reduce", scatter_gather_reduce),
    ("send_recv_barrier", send_recv_barrier),
    ("non_contiguous", non_contiguous),
    ("async_wait_future", async_ops),
    ("async_issue_does_not_wait_for_peer", async_issue_does_not_wait_for_peer),
    ("async_mixed_in_order", async_mixed_in_order),
    ("async_issue_does_not_wait_for_producer", async_issue_does_not_wait_for_producer),
    ("async_input_read_at_call", async_input_read_at_call),
    ("read_output_while_in_flight", read_output_while_in_flight),
    ("cpu_tensor_rejected", cpu_tensor_rejected),
    ("group_name_kept", group_name_kept),
]


def check_collectives(rank, world, tpu_pg, cpu_pg):
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        for op in OPS:
            report(f"all_reduce_{op}_{str(dtype)[6:]}",
                   lambda: check_all_reduce(rank, tpu_pg, cpu_pg, dtype, op))
    for name, check in COLLECTIVE_CHECKS:
        report(name, lambda: check(rank, world, tpu_pg, cpu_pg))


# ---- DDP: 2 ranks with half a batch each == one process with the full batch ----

def _mlp(unused=False):
    torch.manual_seed(0)
    layers = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    if not unused:
        return layers

    class WithUnused(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = layers
            self.spare = torch.nn.Linear(6, 3)  # never used: find_unused_parameters

        def forward(self, x):
            return self.body(x)
    return WithUnused()


def _batches(steps, n=8):
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(n, 6, generator=g), torch.randn(n, 3, generator=g)) for _ in range(steps)]


def _reference(batches, unused=False, accumulate=1):
    model = _mlp(unused).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(batches):
        loss = torch.nn.functional.mse_loss(model(x.to("tpu")), y.to("tpu"))
        (loss / accumulate).backward()
        if (i + 1) % accumulate == 0:
            opt.step()
            opt.zero_grad()
    return [p.detach().cpu() for p in model.parameters()]


def _ddp_run(rank, world, pg, batches, unused=False, accumulate=1, bucket_cap_mb=None):
    from torch.nn.parallel import DistributedDataParallel as DDP

    kw = {} if bucket_cap_mb is None else {"bucket_cap_mb": bucket_cap_mb}
    model = DDP(_mlp(unused).to("tpu"), process_group=pg, find_unused_parameters=unused, **kw)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    half = batches[0][0].shape[0] // world
    for i, (x, y) in enumerate(batches):
        xs, ys = x[rank * half:(rank + 1) * half], y[rank * half:(rank + 1) * half]
        last = (i + 1) % accumulate == 0
        ctx = model.no_sync() if not last else _nullcontext()
        with ctx:
            loss = torch.nn.functional.mse_loss(model(xs.to("tpu")), ys.to("tpu"))
            (loss / accumulate).backward()
        if last:
            opt.step()
            opt.zero_grad()
    return [p.detach().cpu() for p in model.module.parameters()]


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def check_ddp(rank, world, pg):
    batches = _batches(5)

    def plain():
        got = _ddp_run(rank, world, pg, batches)
        for g, r in zip(got, _reference(batches)):
            torch.testing.assert_close(g, r, atol=1e-6, rtol=1e-6)
    report("ddp_sgd_5_steps", plain)

    def no_sync():
        b = _batches(6)
        got = _ddp_run(rank, world, pg, b, accumulate=2)
        for g, r in zip(got, _reference(b, accumulate=2)):
            torch.testing.assert_close(g, r, atol=1e-6, rtol=1e-6)
    report("ddp_no_sync_accumulation", no_sync)

    def unused():
        got = _ddp_run(rank, world, pg, batches, unused=True)
        for g, r in zip(got, _reference(batches, unused=True)):
            torch.testing.assert_close(g, r, atol=1e-6, rtol=1e-6)
    report("ddp_find_unused_parameters", unused)


def check_peer_exit(rank, group):
    """Rank 1 leaves while rank 0 waits in a collective: rank 0 must raise at
    once (its group's timeout is 60 s), and so must its next call."""
    if rank == 1:
        # Leave without a word, a second after rank 0 started waiting.
        print("CHECK peer_exit_raises ok", flush=True)
        time.sleep(1)
        os._exit(0)

    def peer_exit():
        t = torch.ones(3, device="tpu")
        for call in range(2):
            start = time.monotonic()
            try:
                dist.all_reduce(t, group=group)
                dist.all_reduce(t, group=group)
            except RuntimeError as e:
                elapsed = time.monotonic() - start
                assert elapsed < 15, f"call {call} took {elapsed:.1f} s to raise"
                print(f"peer exit: call {call} raised after {elapsed:.1f} s: {str(e)[:200]}",
                      flush=True)
            else:
                raise AssertionError("all_reduce with an exited peer did not raise")
    report("peer_exit_raises", peer_exit)
    os._exit(0)  # the group is broken; skip destroy's goodbye with the peer


# PJRT_Error_Code values (pjrt_c_api.h; absl's status codes).
DEADLINE_EXCEEDED, NOT_FOUND = 4, 5


def check_pjrt_kv(rank, world):
    """The key-value callbacks a PJRT plugin gets at client creation, backed by
    the default group's c10d store and called through their C function
    pointers (csrc/distributed/kv_store.h), across the two processes."""
    store = dist.distributed_c10d._get_default_store()
    call = torchtpu._C._pjrt_kv_call

    def topology(r):  # bytes, NULs and 0xff included
        return bytes([0, 255, r, 0]) + f"topology of node {r}".encode()

    def across():
        if rank == 0:
            time.sleep(0.5)  # rank 1's get must wait for this put
        assert call(store, "put", f"node/{rank}", topology(rank)) == (0, b"")
        peer = 1 - rank
        start = time.monotonic()
        code, got = call(store, "get", f"node/{peer}", timeout_ms=30000)
        assert (code, got) == (0, topology(peer))
        if rank == 1:
            assert time.monotonic() - start > 0.3, "get returned before the peer's put"
        assert call(store, "try_get", f"node/{peer}")[0] == 0
        # The keys live apart from c10d's own.
        assert store.get(f"ttpu_pjrt_kv/node/{peer}") == got
        dist.barrier()

    def missing():
        code, msg = call(store, "try_get", "never set")
        assert code == NOT_FOUND and b"not found" in msg, (code, msg)
        start = time.monotonic()
        code, msg = call(store, "get", "never set", timeout_ms=300)
        took = time.monotonic() - start
        assert code == DEADLINE_EXCEEDED and b"300 ms" in msg, (code, msg)
        assert 0.25 < took < 10, f"a 300 ms get returned after {took:.2f} s"
        try:
            call(store, "delete", "k")
        except ValueError as e:
            assert "put, get or try_get" in str(e)
        else:
            raise AssertionError("an unknown op was accepted")
        dist.barrier()

    report("pjrt_kv_callbacks_across_processes", across)
    report("pjrt_kv_missing_keys", missing)


# ---- groups ----

def group_main(rank, world):
    # No backend: gloo for CPU tensors, tpu for tpu tensors.
    dist.init_process_group(timeout=TIMEOUT)
    default = dist.group.WORLD

    def default_backends():
        assert default._get_backend(torch.device("tpu")).name() == "tpu"
        assert default._get_backend(torch.device("cpu")).name() == "gloo"
        t = torch.ones(2, device="tpu")
        dist.all_reduce(t)
        close(t, torch.full((2,), 2.0))
        c = torch.ones(2)
        dist.all_reduce(c)
        assert c.tolist() == [2.0, 2.0]
        objs = [None] * world
        dist.all_gather_object(objs, {"rank": rank})
        assert objs == [{"rank": 0}, {"rank": 1}]
    report("default_backend_map", default_backends)

    def repeated():
        t = torch.full((4,), 2.0, device="tpu")
        for _ in range(3):
            out = t.clone()
            dist.all_reduce(out)
            close(out, torch.full((4,), 4.0))
    report("repeated_all_reduce", repeated)

    tpu_pg = dist.new_group(backend="tpu", timeout=TIMEOUT)
    cpu_pg = dist.new_group(backend="gloo", timeout=TIMEOUT)
    mixed = dist.new_group(backend="cpu:gloo,tpu:tpu", timeout=TIMEOUT)

    def mixed_string():
        t = torch.full((3,), float(rank + 1), device="tpu")
        dist.all_reduce(t, group=mixed)
        close(t, torch.full((3,), 3.0))
        assert mixed._get_backend(torch.device("cpu")).name() == "gloo"
    report("backend_string_cpu_gloo_tpu_tpu", mixed_string)

    check_pjrt_kv(rank, world)
    check_collectives(rank, world, tpu_pg, cpu_pg)
    check_ddp(rank, world, tpu_pg)
    check_futures(rank, world)
    dist.barrier()
    check_peer_exit(rank, tpu_pg)  # last: it ends both processes


def group_failure(rank, world):
    # Short timeout: the checks prove that errors arrive within it.
    short = datetime.timedelta(seconds=15)
    dist.init_process_group("cpu:gloo,tpu:tpu", timeout=short)

    def mismatched_shapes():
        # Gloo itself aborts the process on a size mismatch (on CPU tensors
        # too); torch's debug wrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL, set by
        # the launcher for this group) checks shapes across ranks first and
        # raises instead. It wraps the tpu backend as it wraps gloo.
        assert os.environ.get("TORCH_DISTRIBUTED_DEBUG") == "DETAIL"
        t = torch.ones(rank + 2, device="tpu")
        start = time.monotonic()
        try:
            dist.all_gather_into_tensor(torch.empty(2 * (rank + 2), device="tpu"), t)
        except RuntimeError as e:
            assert time.monotonic() - start < 40
            assert "mismatch" in str(e).lower(), str(e)
        else:
            raise AssertionError("mismatched shapes did not raise")
    report("mismatched_shapes_raise", mismatched_shapes)

    dist.barrier()
    dist.destroy_process_group()


def group_mismatch(rank, world):
    """Mismatched calls across ranks without TORCH_DISTRIBUTED_DEBUG: the tpu
    backend's own signature check raises the same RuntimeError on every rank
    (gloo alone aborts the process), and the group stays usable after it."""
    short = datetime.timedelta(seconds=20)
    dist.init_process_group("cpu:gloo,tpu:tpu", timeout=short)
    assert os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF") == "OFF"

    def raises_on_every_rank(call, *words):
        start = time.monotonic()
        try:
            call()
            torch.tpu.synchronize()
        except RuntimeError as e:
            assert time.monotonic() - start < 15, f"took {time.monotonic() - start:.1f} s"
            text = str(e)
            for w in words:
                assert w in text, text
        else:
            raise AssertionError("the mismatched call did not raise")
        # The group is still usable: a well-formed collective follows.
        t = torch.full((3,), float(rank + 1), device="tpu")
        dist.all_reduce(t)
        close(t, torch.full((3,), 3.0))

    def numel():
        t = torch.ones(4 + 2 * rank, device="tpu")
        raises_on_every_rank(lambda: dist.all_reduce(t), "all_reduce", "rank 0 called "
                             "all_reduce with float32 of 4 elements", "6 elements")
    report("mismatch_all_reduce_numel", numel)

    def dtype():
        t = torch.ones(4, device="tpu", dtype=torch.float32 if rank == 0 else torch.int64)
        raises_on_every_rank(lambda: dist.all_reduce(t), "float32", "int64")
    report("mismatch_all_reduce_dtype", dtype)

    def broadcast():
        t = torch.ones(4 + rank, device="tpu")
        raises_on_every_rank(lambda: dist.broadcast(t, 0), "broadcast")
    report("mismatch_broadcast", broadcast)

    def different_ops():
        t = torch.ones(4, device="tpu")
        op = (lambda: dist.all_reduce(t)) if rank == 0 else (lambda: dist.broadcast(t, 0))
        raises_on_every_rank(op, "rank 0 called all_reduce", "rank 1 called broadcast")
    report("mismatch_different_collectives", different_ops)

    def local_error_on_one_rank():
        # Rank 1's output has the wrong size: rank 1 raises its own ValueError,
        # rank 0 learns of it instead of waiting for the timeout.
        t = torch.ones(3, device="tpu")
        out = torch.empty(6 if rank == 0 else 5, device="tpu")
        if rank == 1:
            try:
                dist.all_gather_into_tensor(out, t)
            except ValueError as e:
                assert "all_gather_into_tensor output has 5 elements" in str(e), str(e)
            else:
                raise AssertionError("a wrong output size did not raise")
            t2 = torch.full((3,), 2.0, device="tpu")
            dist.all_reduce(t2)
            close(t2, torch.full((3,), 3.0))
        else:
            raises_on_every_rank(lambda: dist.all_gather_into_tensor(out, t),
                                 "failed its own argument checks")
    report("mismatch_local_error_reaches_peer", local_error_on_one_rank)

    def deferred_device_error_on_one_rank():
        # Rank 1's input comes from an op whose device-side check failed
        # (index_select out of range, checked when the value is first read):
        # that surfaces while the call stages its input, before the signature
        # exchange, so rank 1 raises its own IndexError and rank 0 learns of it
        # (before, rank 1 raised after the exchange and rank 0 went on into a
        # collective rank 1 never joined).
        x = torch.zeros(4, device="tpu")
        idx = torch.tensor([1 if rank == 0 else 7], device="tpu")
        y = torch.index_select(x, 0, idx)
        if rank == 1:
            try:
                dist.all_reduce(y)
            except IndexError as e:
                assert "index" in str(e).lower(), str(e)
            else:
                raise AssertionError("the failed device check did not raise")
            t2 = torch.full((3,), 2.0, device="tpu")
            dist.all_reduce(t2)
            close(t2, torch.full((3,), 3.0))
        else:
            raises_on_every_rank(lambda: dist.all_reduce(y), "failed its own argument checks")
    report("mismatch_deferred_device_error_reaches_peer", deferred_device_error_on_one_rank)

    def reduce_scatter_tensor():
        out = torch.empty(2 + rank, device="tpu")
        inp = torch.ones(2 * (2 + rank), device="tpu")
        raises_on_every_rank(lambda: dist.reduce_scatter_tensor(out, inp), "reduce_scatter")
    report("mismatch_reduce_scatter_tensor", reduce_scatter_tensor)

    def behind_queued_async_calls():
        # Signature exchanges go out at the call on a group of their own, ahead
        # of the data collectives still queued: a mismatch behind five
        # asynchronous all_reduces (their futures taken, as DDP's buckets do)
        # still raises on every rank, the five still sum right, and the group
        # goes on working (the details are gathered in the data order).
        ts = [torch.full((1 << 16,), float(rank + i), device="tpu") for i in range(5)]
        works = [dist.all_reduce(t, async_op=True) for t in ts]
        futures = [w.get_future() for w in works]
        bad = torch.ones(4 + rank, device="tpu")
        raises_on_every_rank(lambda: dist.all_reduce(bad), "all_reduce", "4 elements",
                             "5 elements")
        for f in futures:
            f.wait()
        for i, t in enumerate(ts):
            close(t, torch.full((1 << 16,), float(2 * i + 1)))
    report("mismatch_behind_queued_async_calls", behind_queued_async_calls)

    def uneven_all_gather_still_works():
        t = torch.full((rank + 1,), float(rank), device="tpu")
        outs = [torch.empty(r + 1, device="tpu") for r in range(world)]
        dist.all_gather(outs, t)
        close(outs[1], torch.full((2,), 1.0))
    report("mismatch_uneven_all_gather_still_works", uneven_all_gather_still_works)

    def user_send_recv_between_checked_calls():
        # A user message (on any tag: 0x7a5e1917 was the signature exchange's
        # own once) arrives intact between collectives and their signature
        # exchanges, in both forms.
        t0 = torch.full((3,), float(rank + 1), device="tpu")
        dist.all_reduce(t0)
        close(t0, torch.full((3,), 3.0))
        if rank == 0:
            dist.send(torch.arange(5.0, device="tpu"), 1, tag=0x7a5e1917)
        else:
            got = torch.zeros(5, device="tpu")
            dist.recv(got, 0, tag=0x7a5e1917)
            close(got, torch.arange(5.0))
        t2 = torch.full((3,), float(rank + 1), device="tpu")
        dist.all_reduce(t2)
        close(t2, torch.full((3,), 3.0))
    report("user_send_recv_between_checked_calls", user_send_recv_between_checked_calls)

    dist.barrier()
    dist.destroy_process_group()


def group_fsdp(rank, world):
    """FSDP2 and DTensor: need torch.tpu's stream/event API and storage resize."""
    dist.init_process_group(timeout=TIMEOUT)
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    def dtensor():
        mesh = DeviceMesh("tpu", [0, 1])
        x = torch.arange(24.0).reshape(6, 4)
        d = distribute_tensor(x.to("tpu"), mesh, [Shard(0)])
        local = d.to_local()
        assert local.device.type == "tpu" and local.shape == (3, 4), local
        close(local, x[3 * rank:3 * rank + 3])
        close(d.full_tensor(), x)
        close(d.redistribute(mesh, [Replicate()]).to_local(), x)
        r = distribute_tensor(x.to("tpu"), mesh, [Replicate()])
        close((r * 2).to_local(), x * 2)
        p = torch.distributed.tensor.DTensor.from_local(
            torch.full((2,), float(rank + 1), device="tpu"), mesh, [Partial()])
        close(p.redistribute(mesh, [Replicate()]).to_local(), torch.full((2,), 3.0))
        y = (d + 1).sum()
        close(y.full_tensor(), (x + 1).sum())
    report("dtensor", dtensor)

    def functional_collectives():
        import torch.distributed._functional_collectives as funcol

        mesh = DeviceMesh("tpu", [0, 1])
        t = torch.full((3,), float(rank + 1), device="tpu")
        close(funcol.wait_tensor(funcol.all_reduce(t, "sum", mesh)), torch.full((3,), 3.0))
        g = funcol.wait_tensor(funcol.all_gather_tensor(t, 0, mesh))
        close(g, torch.tensor([1.0] * 3 + [2.0] * 3))
        r = funcol.wait_tensor(funcol.reduce_scatter_tensor(
            torch.arange(4.0, device="tpu"), "sum", 0, mesh))
        close(r, torch.arange(4.0)[2 * rank:2 * rank + 2] * 2)
    report("functional_collectives", functional_collectives)

    def fsdp():
        from torch.distributed.fsdp import fully_shard

        batches = _batches(5)

        def model():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(),
                                       torch.nn.Linear(16, 3)).to("tpu")

        ref = model()
        opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
        for x, y in batches:
            torch.nn.functional.mse_loss(ref(x.to("tpu")), y.to("tpu")).backward()
            opt.step()
            opt.zero_grad()
        m = model()
        for layer in m:
            if list(layer.parameters()):
                fully_shard(layer)
        fully_shard(m)
        p0 = next(m.parameters())
        assert p0.to_local().device.type == "tpu", p0.to_local().device
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        half = batches[0][0].shape[0] // world
        for x, y in batches:
            xs, ys = x[rank * half:(rank + 1) * half], y[rank * half:(rank + 1) * half]
            torch.nn.functional.mse_loss(m(xs.to("tpu")), ys.to("tpu")).backward()
            opt.step()
            opt.zero_grad()
        for got, want in zip(m.parameters(), ref.parameters()):
            torch.testing.assert_close(got.full_tensor().cpu(), want.detach().cpu(),
                                       atol=1e-5, rtol=1e-5)
        state["model"], state["ref"] = m, ref
    state = {}
    report("fsdp2_adamw_5_steps", fsdp)

    def fsdp_state_dict():
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions, get_model_state_dict, set_model_state_dict)
        from torch.distributed.fsdp import fully_shard

        full = get_model_state_dict(state["model"],
                                    options=StateDictOptions(full_state_dict=True))
        want = state["ref"].state_dict()
        assert set(full) == set(want), (sorted(full), sorted(want))
        for k, v in full.items():
            torch.testing.assert_close(v.cpu(), want[k].cpu(), atol=1e-5, rtol=1e-5)
        torch.manual_seed(1)  # different initial weights
        fresh = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 3)).to("tpu")
        for layer in fresh:
            if list(layer.parameters()):
                fully_shard(layer)
        fully_shard(fresh)
        set_model_state_dict(fresh, full, options=StateDictOptions(full_state_dict=True))
        for got, w in zip(fresh.parameters(), state["ref"].parameters()):
            assert got.to_local().device.type == "tpu"
            torch.testing.assert_close(got.full_tensor().cpu(), w.detach().cpu(),
                                       atol=1e-5, rtol=1e-5)
    report("fsdp2_state_dict_save_load", fsdp_state_dict)
    dist.barrier()
    dist.destroy_process_group()


def check_futures(rank, world):
    """Work futures complete by themselves (no wait()), with the values or the
    error; an all_reduce returns before the peer has joined it (the signature
    exchange runs on the group's issuing thread). Leaves a broken group
    behind: run it last before check_peer_exit."""
    delay = 1.5  # rank 1 joins each collective this late

    def future_completes():
        # 64K floats: above the staging pool's floor, so the copy-back adopts
        # the host buffer (the common path), and a small one beside it.
        xs = [data(rank, (256, 256), torch.float32), data(rank, (5,), torch.float32, salt=1)]
        refs = [x.clone() for x in xs]
        for r in refs:
            dist.all_reduce(r)
        ts = [x.to("tpu") for x in xs]
        torchtpu.sync()
        dist.barrier()
        if rank == 1:
            time.sleep(delay)
        start = time.monotonic()
        works = [dist.all_reduce(t, async_op=True) for t in ts]
        futs = [w.get_future() for w in works]
        issued = time.monotonic() - start
        seen = []
        chained = futs[0].then(lambda f: seen.append(f.value()[0].cpu()))
        if rank == 0:
            # The peer has not joined yet: get_future() must not have waited.
            assert issued < delay / 2, f"all_reduce + get_future took {issued:.2f} s"
            assert not futs[0].done(), "the future completed before the peer joined"
        deadline = time.monotonic() + 30
        while not all(f.done() for f in futs + [chained]):  # polled, never waited
            assert time.monotonic() < deadline, "the futures never completed"
            time.sleep(0.01)
        for f, t, r in zip(futs, ts, refs):
            value = f.value()
            assert isinstance(value, list) and len(value) == 1 and value[0] is not None
            close(value[0], r, atol=1e-5, rtol=1e-5)
            close(t, r, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(seen[0], refs[0], atol=1e-5, rtol=1e-5)
        for w in works:
            assert w.is_completed() and w.is_success()
            assert w.wait(timeout=TIMEOUT)
    report("future_completes_without_wait", future_completes)

    def ddp_many_buckets():
        # One bucket per parameter: each bucket's future completes while the
        # backward goes on; the result must equal the single-process run.
        batches = _batches(4)
        got = _ddp_run(rank, world, dist.group.WORLD, batches, bucket_cap_mb=1e-4)
        for g, r in zip(got, _reference(batches)):
            torch.testing.assert_close(g, r, atol=1e-6, rtol=1e-6)
    report("ddp_many_buckets", ddp_many_buckets)

    short = datetime.timedelta(seconds=3)
    late = dist.new_group(backend="tpu", timeout=short)
    dist.barrier()

    def future_gets_error():
        # Rank 1 never joins: gloo's timeout fails the collective, and the
        # error reaches the future (polled, no wait()) and then wait().
        if rank == 1:
            return
        start = time.monotonic()
        work = dist.all_reduce(torch.ones(4, device="tpu"), group=late, async_op=True)
        fut = work.get_future()
        deadline = time.monotonic() + 30
        while not fut.done():
            assert time.monotonic() < deadline, "the future never completed"
            time.sleep(0.02)
        elapsed = time.monotonic() - start
        assert elapsed < 20, f"error after {elapsed:.1f} s (timeout 3 s)"
        for call in (fut.wait, fut.value, lambda: work.wait(timeout=TIMEOUT)):
            try:
                call()
            except RuntimeError as e:
                assert "tim" in str(e).lower() or "closed" in str(e).lower(), str(e)
            else:
                raise AssertionError(f"{call} did not raise")
        assert not work.is_success()
    report("future_gets_error", future_gets_error)


def main():
    group, rank, world, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                      WORLD_SIZE=str(world))
    {"main": group_main, "failure": group_failure, "fsdp": group_fsdp,
     "mismatch": group_mismatch}[group](rank, world)


if __name__ == "__main__":
    main()

"""Input mutations kept in a compiled graph (issue 34): a static KV cache's
``index_copy_`` under ``torch.compile(backend="tpu")`` is written by the captured
program itself, in place (its buffer donated), with no copy program per call;
values, aliasing and the unwritten inputs behave as on CPU."""

import torch
from torch import nn

import torchtpu
from _util import fresh_dynamo  # noqa: F401  (autouse: a fresh Dynamo per test)
from _util import no_fallback


def counts():
    torchtpu.sync()
    m = torchtpu.metrics.metrics()
    return m["executes"], m["compiles"], m["donations"], m["donated_bytes"]


def decode_step(cache_k, cache_v, pos, k, v, q):
    """One static-cache attention step: the new key/value written at ``pos``."""
    with torch.no_grad():
        cache_k.index_copy_(2, pos, k)
        cache_v.index_copy_(2, pos, v)
    scores = (q @ cache_k.transpose(-1, -2)).softmax(-1)
    return scores @ cache_v


def test_static_cache_is_written_in_place_by_one_execute_per_call():
    shape = (2, 3, 16, 8)
    cpu = [torch.zeros(shape), torch.zeros(shape)]
    tpu = [t.to("tpu") for t in cpu]
    view_k = tpu[0][:, :, :4]  # a view taken before the calls sees every write
    step = torch.compile(decode_step, backend="tpu")
    g = torch.Generator().manual_seed(0)
    with no_fallback():
        for i in range(6):
            k, v, q = (torch.randn(2, 3, 1, 8, generator=g) for _ in range(3))
            pos = torch.tensor([i])
            before = counts()
            out = step(*tpu, pos.to("tpu"), k.to("tpu"), v.to("tpu"), q.to("tpu"))
            after = counts()
            want = decode_step(*cpu, pos, k, v, q)
            torch.testing.assert_close(out.cpu(), want)
            if i >= 2:  # replays: nothing compiled, both caches donated, and two
                # programs: the step and, at the sync, index_copy_'s deferred range
                # check (AOTAutograd's write-back was one more copy_ per cache)
                assert after[0] - before[0] == 2 and after[1] == before[1], (before, after)
                assert after[2] - before[2] == 2
                assert after[3] - before[3] == 2 * cpu[0].numel() * 4
    for got, want in zip(tpu, cpu):
        torch.testing.assert_close(got.cpu(), want)
    torch.testing.assert_close(view_k.cpu(), cpu[0][:, :, :4])


def test_a_written_input_held_elsewhere_keeps_the_holders_value():
    # `alias` shares the written input's storage (a view), `snapshot` is a
    # clone taken before the call: each sees what it would on CPU.
    def f(buf, x):
        buf.add_(x)
        return buf * 2

    step = torch.compile(f, backend="tpu")
    buf_cpu, buf = torch.zeros(8), torch.zeros(8, device="tpu")
    for i in range(4):
        x = torch.full((8,), float(i + 1))
        snapshot_cpu, snapshot = buf_cpu.clone(), buf.clone()
        alias = buf.view(2, 4)
        out = step(buf, x.to("tpu"))
        torch.testing.assert_close(out.cpu(), f(buf_cpu, x))
        torch.testing.assert_close(snapshot.cpu(), snapshot_cpu)
        torch.testing.assert_close(alias.cpu(), buf_cpu.view(2, 4))
    torch.testing.assert_close(buf.cpu(), buf_cpu)


def test_a_written_view_input_writes_its_base():
    # A partial view is not copied to a whole storage when the graph writes it.
    def f(part, x):
        part.mul_(x)
        return part.sum()

    step = torch.compile(f, backend="tpu")
    base_cpu, base = torch.arange(12.0), torch.arange(12.0).to("tpu")
    for i in range(3):
        x = torch.tensor(2.0 + i)
        out = step(base[2:6], x.to("tpu"))
        torch.testing.assert_close(out.cpu(), f(base_cpu[2:6], x))
    torch.testing.assert_close(base.cpu(), base_cpu)


def test_batch_norm_running_stats_are_written_by_the_program(graphs):
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4))
    model = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4)).to("tpu")
    model.load_state_dict(ref.state_dict())
    cm = torch.compile(model, backend="tpu")
    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        x = torch.randn(10, 6, generator=g)
        torch.testing.assert_close(cm(x.to("tpu")).cpu(), ref(x), rtol=1e-5, atol=1e-5)
    for name, buf in ref.named_buffers():
        torch.testing.assert_close(dict(model.named_buffers())[name].cpu(), buf,
                                   rtol=1e-5, atol=1e-6)
    assert any(g.written for g in graphs)  # the forward graph writes the running stats

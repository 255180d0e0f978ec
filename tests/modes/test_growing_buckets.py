"""Bounded dynamism (torchtpu.config.growing_buckets): torch.cat results live in
storages rounded up to a bucket, so a tensor that grows one row per step (token
ids, a dynamic KV cache) reuses a few programs per bucket; every value, size and
stride stays CPU's. Program counts are counted, not timed: ``cache_misses`` is
every program the process compiled or loaded (the suite shares one cache, so a
program another test made is not counted again: the bounds are upper bounds)."""

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from _util import TokenPrograms, greedy_generate, new_programs, no_fallback

pytestmark = pytest.mark.opt_out_pass  # passes: tests/README.md


@pytest.fixture
def pow2(monkeypatch):
    monkeypatch.setattr(torchtpu.config, "growing_buckets", "pow2")
    torchtpu.set_eager_mode("strict")
    yield


def grow(start, new_row, dim, steps):
    """Grows `start` by `new_row(step)` along `dim`, on CPU and tpu; checks each
    step against CPU and returns (tpu result, new programs per step)."""
    cpu, tpu = start, start.to("tpu")
    per_step = []
    for step in range(steps):
        row = new_row(step)
        cpu = torch.cat([cpu, row], dim)
        before = new_programs()
        tpu = torch.cat([tpu, row.to("tpu")], dim)
        per_step.append(new_programs() - before)
        assert tpu.shape == cpu.shape and tpu.stride() == cpu.stride()
        assert tpu.is_contiguous()
        assert torch.equal(tpu.cpu(), cpu)
    return tpu, per_step


@pytest.mark.parametrize("shape,dim", [((2, 5), -1), ((1, 2, 5, 4), -2), ((5, 3), 0)],
                         ids=["ids_batch2", "kv_cache", "rows"])
def test_cat_grows_in_buckets_with_cpu_values_and_strides(pow2, shape, dim):
    torch.manual_seed(0)
    start = torch.randn(shape)
    row_shape = list(shape)
    row_shape[dim] = 1
    with no_fallback():
        tpu, per_step = grow(start, lambda s: torch.randn(row_shape), dim, 14)
    # Lengths 6..19 in buckets 8, 16 and 32: a program where a part's bucket
    # or the result's changes (about two per bucket), none inside a bucket.
    # Unbucketed: one per length (14).
    assert sum(per_step) <= 6, per_step
    assert per_step[5:11] == [0] * 6, per_step  # lengths 11..16: inside bucket 16
    rows = tpu.numel() // tpu.shape[dim]
    assert tpu.untyped_storage().nbytes() == rows * 32 * tpu.element_size()


def test_bucketed_tensors_read_by_any_op_give_cpu_values(pow2):
    ids = torch.arange(12).reshape(2, 6)
    k = torch.randn(1, 2, 6, 4)
    with no_fallback():
        t_ids, _ = grow(ids, lambda s: torch.full((2, 1), s), -1, 3)
        t_k, _ = grow(k, lambda s: torch.randn(1, 2, 1, 4), -2, 3)
        c_ids, c_k = t_ids.cpu(), t_k.cpu()
        checks = [
            (t_ids[:, -1:], c_ids[:, -1:]),
            (t_ids.sum(-1), c_ids.sum(-1)),
            (t_ids.view(-1), c_ids.view(-1)),
            (t_ids.t().contiguous(), c_ids.t().contiguous()),
            (t_k.transpose(-1, -2) @ t_k, c_k.transpose(-1, -2) @ c_k),
            # int64 and float parts: the result type is promoted, as on CPU
            (torch.cat([t_ids, torch.ones(2, 1, device="tpu")], -1),
             torch.cat([c_ids, torch.ones(2, 1)], -1)),
            (torch.cat([t_ids, t_ids], 0), torch.cat([c_ids, c_ids], 0)),
        ]
        t_ids.add_(100)
        c_ids.add_(100)
        checks.append((t_ids, c_ids))
        out = torch.empty(0, dtype=torch.long, device="tpu")
        torch.cat([t_ids, t_ids[:, :1]], -1, out=out)
        checks.append((out, torch.cat([c_ids, c_ids[:, :1]], -1)))
        # out= writes into the given tensor: its storage is its own size
        assert out.untyped_storage().nbytes() == out.numel() * 8
    for got, want in checks:
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got.cpu(), want)


def test_attention_over_a_bucketed_kv_cache_matches_cpu_and_compiles_per_bucket(pow2):
    torch.manual_seed(1)
    q = torch.randn(1, 2, 1, 8)
    k = torch.randn(1, 2, 9, 8)
    v = torch.randn(1, 2, 9, 8)
    tk, tv, tq = k.to("tpu"), v.to("tpu"), q.to("tpu")
    per_step = []
    with no_fallback():
        for _step in range(6):  # lengths 10..15: one bucket (16)
            new_k, new_v = torch.randn(1, 2, 1, 8), torch.randn(1, 2, 1, 8)
            k, v = torch.cat([k, new_k], -2), torch.cat([v, new_v], -2)
            tk, tv = torch.cat([tk, new_k.to("tpu")], -2), torch.cat([tv, new_v.to("tpu")], -2)
            before = new_programs()
            got = F.scaled_dot_product_attention(tq, tk, tv)
            per_step.append(new_programs() - before)
            torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(q, k, v))
        # A causal prefill of 3 queries over the same bucket (top-left aligned).
        q3 = torch.randn(1, 2, 3, 8)
        got = F.scaled_dot_product_attention(q3.to("tpu"), tk, tv, is_causal=True)
        torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(q3, k, v,
                                                                             is_causal=True))
        # The start of a much longer storage (a slice of a preallocated
        # cache) is read as itself, not as a bucket of 64 rows.
        long_k = torch.randn(1, 1, 64, 8)
        short = long_k[:, :, :5]
        t_long = long_k.to("tpu")
        got = F.scaled_dot_product_attention(tq[:, :1], t_long[:, :, :5], t_long[:, :, :5])
        want = F.scaled_dot_product_attention(q[:, :1], short, short)
        torch.testing.assert_close(got.cpu(), want)
    # One attention program for the bucket; unbucketed: one per length.
    assert sum(per_step[1:]) == 0, per_step


def test_attention_backward_through_a_bucketed_cache_matches_cpu(pow2):
    torch.manual_seed(2)
    q = torch.randn(1, 2, 2, 4, requires_grad=True)
    k0 = torch.randn(1, 2, 5, 4, requires_grad=True)
    new = torch.randn(1, 2, 1, 4)
    grads = []
    for device in ("cpu", "tpu"):
        qd = q.detach().to(device).requires_grad_()
        kd = k0.detach().to(device).requires_grad_()
        k = torch.cat([kd, new.to(device)], -2)
        F.scaled_dot_product_attention(qd, k, k).square().sum().backward()
        grads.append((qd.grad.cpu(), kd.grad.cpu()))
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want)


def test_pow2_none_and_listed_buckets_stop_at_the_largest(monkeypatch):
    # (The default, pow2, is checked in a fresh process below: the suite's
    # opt-out pass turns it off.)
    monkeypatch.setattr(torchtpu.config, "growing_buckets", "pow2")
    a = torch.ones(1, 5, device="tpu")
    assert torch.cat([a, a[:, :1]], -1).untyped_storage().nbytes() == 8 * 4
    # a cat of similar parts is not an append: CPU's storage
    assert torch.cat([a, a], -1).untyped_storage().nbytes() == 10 * 4
    monkeypatch.setattr(torchtpu.config, "growing_buckets", None)
    assert torch.cat([a, a[:, :1]], -1).untyped_storage().nbytes() == 6 * 4
    monkeypatch.setattr(torchtpu.config, "growing_buckets", [16, 8])
    assert torchtpu.config.growing_buckets == (8, 16)
    assert torch.cat([a, a, a[:, :1]], -1).untyped_storage().nbytes() == 16 * 4
    # past the largest listed size: the result's own size
    big = torch.cat([a, a, a, a[:, :2]], -1)
    assert big.untyped_storage().nbytes() == 17 * 4
    assert torch.equal(big.cpu(), torch.ones(1, 17))
    # Turned off, a tensor bucketed before is read as itself.
    bucketed = torch.cat([a, a, a[:, :1] * 2], -1)
    monkeypatch.setattr(torchtpu.config, "growing_buckets", None)
    both = torch.cat([bucketed, a], -1)
    assert both.untyped_storage().nbytes() == 16 * 4
    assert torch.equal(both.cpu(), torch.cat([torch.ones(1, 10), torch.full((1, 1), 2.0),
                                              torch.ones(1, 5)], -1))


def test_only_appends_start_a_bucket(pow2):
    # Parts of similar length (autograd's backward of split, torch.stack)
    # keep an exact storage; an append of a short part starts a bucket.
    a = torch.ones(2, 6, device="tpu")
    assert torch.cat([a, a], -1).untyped_storage().nbytes() == 24 * 4
    assert torch.stack([a, a]).untyped_storage().nbytes() == 24 * 4
    assert torch.stack([a, a, a]).untyped_storage().nbytes() == 36 * 4
    # Nor a cat of more than four parts, short last part or not: each part
    # of a bucketed cat is a kernel of its own on XLA:CPU (a stack of 2,000
    # rows took 27 s to compile).
    assert torch.cat([a] * 4 + [a[:, :1]], -1).untyped_storage().nbytes() == 2 * 25 * 4
    assert torch.cat([a, a[:, :3]], -1).untyped_storage().nbytes() == 2 * 16 * 4
    p = torch.randn(6, device="tpu", requires_grad=True)
    x, y = p.split([3, 3])
    (x.sum() * 2 + (y * y).sum()).backward()
    assert p.grad.untyped_storage().nbytes() == 6 * 4
    # channels-last parts give CPU's channels-last result, not a bucket
    cl = torch.randn(1, 3, 4, 5).to(memory_format=torch.channels_last)
    want = torch.cat([cl, cl[:, :1]], 1)
    got = torch.cat([cl.to("tpu"), cl.to("tpu")[:, :1]], 1)
    assert got.stride() == want.stride() and torch.equal(got.cpu(), want)


def test_deleting_the_setting_turns_bucketing_off(monkeypatch):
    monkeypatch.setattr(torchtpu.config, "growing_buckets", "pow2")
    a = torch.ones(1, 5, device="tpu")
    assert torch.cat([a, a[:, :1]], -1).untyped_storage().nbytes() == 8 * 4
    del torchtpu.config.growing_buckets
    try:
        assert torch.cat([a, a[:, :1]], -1).untyped_storage().nbytes() == 6 * 4
    finally:
        torchtpu.config.growing_buckets = None


@pytest.mark.parametrize("value,error", [("pow3", ValueError), ([0, 8], ValueError),
                                         ([], TypeError), ([8.0], TypeError),
                                         (16, TypeError), ([True], TypeError)])
def test_setting_validates(monkeypatch, value, error):
    monkeypatch.setattr(torchtpu.config, "growing_buckets", None)
    with pytest.raises(error, match="growing_buckets"):
        torchtpu.config.growing_buckets = value
    assert torchtpu.config.growing_buckets is None


transformers = pytest.importorskip("transformers")


def generate(model, ids, **kwargs):
    return greedy_generate(model, ids, 14, **kwargs)


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_bucketed_generate_matches_unbucketed_tokens(gpt2, monkeypatch, mode, cache):
    model, prompt = gpt2
    # A 6-token prompt: lengths no other test generates at.
    ids = prompt.repeat(1, 2)[:, :6]
    kwargs = {"cache_implementation": "static"} if cache == "static" else {}
    want = generate(model, ids, **kwargs)
    tpu_model = model.to("tpu")
    monkeypatch.setattr(torchtpu.config, "growing_buckets", "pow2")
    torchtpu.set_eager_mode(mode)
    try:
        with no_fallback():
            tokens = TokenPrograms()
            got = generate(tpu_model, ids.to("tpu"), streamer=tokens, **kwargs).cpu()
    finally:
        torchtpu.set_eager_mode("strict")
        model.to("cpu")
    assert torch.equal(got, want), (got, want)
    per_token = tokens.per_token()
    # Lengths 7..20 fall in buckets 8, 16 and 32: new programs only where a
    # bucket changes. Unbucketed, every token compiles 2 (static cache) to 4
    # (dynamic) programs in strict mode and one graph in fused mode.
    # (Measured, strict dynamic cache: [39, 24, 4, 4, 1, 0, 0, 0, 0, 0, 3, 3, 1,
    # 0, 0]; unbucketed 4 per token after the second.)
    assert sum(per_token[2:]) <= 20, str(per_token)
    assert per_token[5:10] == [0] * 5, str(per_token)  # lengths 11..15: bucket 16


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_static_cache_generate_compiles_nothing_after_its_first_decode_step(gpt2, monkeypatch,
                                                                            mode):
    # One bucket holds every length of the generation (the prompt's 7 tokens
    # plus 14), so the only growing tensor, the token ids, keeps its programs:
    # the prompt's step and the first decode step compile, no later token does.
    model, prompt = gpt2
    ids = prompt.repeat(1, 2)[:, :7]
    want = generate(model, ids, cache_implementation="static")
    tpu_model = model.to("tpu")
    monkeypatch.setattr(torchtpu.config, "growing_buckets", [32])
    torchtpu.set_eager_mode(mode)
    try:
        with no_fallback():
            tokens = TokenPrograms()
            got = generate(tpu_model, ids.to("tpu"), streamer=tokens,
                           cache_implementation="static").cpu()
    finally:
        torchtpu.set_eager_mode("strict")
        model.to("cpu")
    assert torch.equal(got, want), (got, want)
    per_token = tokens.per_token()
    assert per_token[2:] == [0] * len(per_token[2:]), str(per_token)


def test_environment_variable_sets_it_and_a_bad_value_names_it():
    import os
    import subprocess
    import sys

    def run(value):
        env = dict(os.environ, TORCHTPU_GROWING_BUCKETS=value)
        if value is None:
            del env["TORCHTPU_GROWING_BUCKETS"]
        code = "import torchtpu; print(repr(torchtpu.config.growing_buckets))"
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=120, check=False)

    ok = run(" POW2 ")
    assert ok.returncode == 0 and ok.stdout.strip().endswith("'pow2'"), ok.stderr[-2000:]
    default = run(None)
    assert default.returncode == 0 and default.stdout.strip().endswith("'pow2'"), \
        default.stderr[-2000:]
    off = run("none")
    assert off.returncode == 0 and off.stdout.strip().endswith("None"), off.stderr[-2000:]
    bad = run("0,8")
    assert bad.returncode != 0
    want = "ValueError: TORCHTPU_GROWING_BUCKETS: growing_buckets sizes must be positive"
    assert want in bad.stderr

"""Programs compiled per generated token: Hugging Face GPT-2 generate (small
random config) on tpu gives CPU's tokens and, once its first tokens have run,
compiles only what the growing token ids need; a second generate compiles
nothing. Also the root causes, without transformers: an op reading a small
view of a storage that grows every step compiles once, not once per step.

Counts are counted, not timed: ``cache_misses`` is every program the process
had to compile or load from the persistent cache (the suite shares one cache
directory, so a program another test compiled is a load, not a compile).
"""

import pytest
import torch

import torchtpu
from _util import TokenPrograms, greedy_generate, new_programs, no_fallback

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md


@pytest.fixture
def strict():
    torchtpu.set_eager_mode("strict")
    yield


def test_ops_reading_the_end_of_a_growing_storage_compile_once(strict, monkeypatch):
    # generate's loop: torch.cat makes a new, longer input_ids, and several ops
    # read its last column (stopping criteria, next inputs). Each op's program
    # once bound the whole storage, so each compiled again at every length.
    # Without growing buckets (on by default: then a storage grows only at a
    # bucket's end, where these ops compile once for the new bucket).
    monkeypatch.setattr(torchtpu.config, "growing_buckets", None)
    eos = torch.tensor([5])
    ids = torch.tensor([[1, 2, 3, 4]])
    want, got = [], []
    tpu_ids, tpu_eos = ids.to("tpu"), eos.to("tpu")
    per_step = []
    with no_fallback():
        for step in range(6):
            new = torch.tensor([[step + 3]])
            ids = torch.cat([ids, new], dim=-1)
            tpu_ids = torch.cat([tpu_ids, new.to("tpu")], dim=-1)
            before = new_programs()
            for x, out in ((ids, want), (tpu_ids, got)):
                last = x[:, -1:]
                out.append((torch.isin(last, eos if x is ids else tpu_eos), last.clone(),
                            last + 10, last * 3))
            per_step.append(new_programs() - before)
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            assert torch.equal(b.cpu(), a)
    # From the third length on, at most one program per length (the view
    # read into a buffer of its own, shared by isin, clone, add and mul; none
    # where an earlier test left it); the cat above is counted outside.
    # Before: one per op and length.
    assert all(n <= 1 for n in per_step[2:]), per_step


def test_views_of_a_storage_of_one_size_keep_one_program_per_op(strict):
    # A static-shape loop (the usual case) must not pay an extra program run:
    # slicing batch after batch out of one tensor stays one execute per op.
    data = torch.arange(64.0).reshape(8, 8)
    tpu = data.to("tpu")
    for i in range(2):  # warm: both offsets' programs exist
        (tpu[i:i + 2] * 2).cpu()
    m = torchtpu.metrics.metrics()
    got = [tpu[i:i + 2] * 2 for i in range(2, 6)]
    after = torchtpu.metrics.metrics()
    assert after["executes"] - m["executes"] == 4
    assert after["cache_misses"] == m["cache_misses"]
    for i, g in zip(range(2, 6), got):
        assert torch.equal(g.cpu(), data[i:i + 2] * 2)


transformers = pytest.importorskip("transformers")


def generate(model, ids, **kwargs):
    return greedy_generate(model, ids, 8, **kwargs)


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_generate_matches_cpu_and_compiles_per_token_only_for_the_growing_ids(gpt2, mode,
                                                                              cache):
    model, ids = gpt2
    kwargs = {"cache_implementation": "static"} if cache == "static" else {}
    want = generate(model, ids, **kwargs)
    tpu_model = model.to("tpu")
    torchtpu.set_eager_mode(mode)
    try:
        with no_fallback():
            tokens = TokenPrograms()
            got = generate(tpu_model, ids.to("tpu"), streamer=tokens, **kwargs).cpu()
            before = new_programs()
            # The same reads as the first call (a streamer reads each token:
            # fused mode's graphs end at reads), so the same programs.
            again = generate(tpu_model, ids.to("tpu"), streamer=TokenPrograms(), **kwargs).cpu()
            second_call = new_programs() - before
    finally:
        torchtpu.set_eager_mode("strict")
        model.to("cpu")
    assert torch.equal(got, want), (got, want)
    assert torch.equal(again, want)
    assert second_call == 0
    per_token = tokens.per_token()[3:]
    if mode == "strict" and cache == "static":
        # Per token: torch.cat of input_ids and of the position ids (one
        # program, same shapes) and the read of their last column; the model
        # and the stopping criteria reuse their programs.
        assert all(n <= 2 for n in per_token), tokens.per_token()
    elif mode == "strict":
        # The same two, plus the attention over the growing KV cache: its
        # cat and scaled_dot_product_attention, one program (the overrideable
        # backend, csrc/aten/rules/nn/sdpa.cc; the math path's key scaling,
        # two bmm and _safe_softmax were four).
        assert all(n <= 4 for n in per_token), tokens.per_token()

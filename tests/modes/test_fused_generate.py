"""Hugging Face GPT-2 generate in fused mode (small random config): tokens equal
CPU's with the default dynamic cache and with cache_implementation="static",
and the storm detector stops the per-token graph compiles: the line that starts
each token's graph compiles a bounded number of fused graphs, then runs strict.
Compile counts are counted, not timed."""

import warnings

import pytest
import torch

import torchtpu

transformers = pytest.importorskip("transformers")


def generate(model, ids, **kwargs):
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=10, do_sample=False, pad_token_id=0, **kwargs)


class TokenCompiles:
    """A generate streamer: the runtime's compile count at each new token."""

    def __init__(self):
        self.at = []

    def put(self, value):
        self.at.append(torchtpu.metrics.metrics()["compiles"])

    def end(self):
        self.at.append(torchtpu.metrics.metrics()["compiles"])


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_generate_in_fused_mode_matches_cpu_and_stops_compiling_per_token(gpt2, cache,
                                                                         monkeypatch):
    model, prompt = gpt2
    # A 32-token prompt: lengths no other test generates at, so every graph
    # here is new whatever ran before in the process (a storm needs new
    # graphs; test_generate_compiles compiles the 5-token prompt's).
    ids = prompt.repeat(1, 7)[:, :32]
    kwargs = {"cache_implementation": "static"} if cache == "static" else {}
    want = generate(model, ids, **kwargs)
    tpu_model = model.to("tpu")
    monkeypatch.setattr(torchtpu.config, "fused_storm_threshold", 4)
    # A shape per token is what makes a storm: without buckets (the default
    # pow2 buckets keep the shapes, test_growing_buckets.py).
    monkeypatch.setattr(torchtpu.config, "growing_buckets", None)
    torchtpu.set_eager_mode("fused")
    torchtpu.metrics.reset()
    try:
        steps = TokenCompiles()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = generate(tpu_model, ids.to("tpu"), streamer=steps, **kwargs).cpu()
        m = torchtpu.metrics.metrics()
        counts = torchtpu.metrics.recompile_counts()
        # The same reads as the first call (the streamer reads each token), so
        # the same graphs.
        again = generate(tpu_model, ids.to("tpu"), streamer=TokenCompiles(), **kwargs).cpu()
        compiles_again = torchtpu.metrics.metrics()["compiles"] - m["compiles"]
    finally:
        torchtpu.set_eager_mode("strict")
        torchtpu.metrics.reset()
        model.to("cpu")
    assert torch.equal(got, want), (got, want)
    assert torch.equal(again, want)
    # The generation loop's line stopped fusing after 4 new shapes: at most
    # 5 fused graphs from it (not one per token) and the rest ran strict.
    assert max(counts.values()) <= 5, counts
    assert m["fused_strict_ops"] > 0
    storms = [w for w in caught if "stops fusing" in str(w.message)]
    assert len(storms) == 1, [str(w.message)[:200] for w in caught]
    # A second call compiles nothing new.
    assert compiles_again == 0
    per_token = [b - a for a, b in zip(steps.at, steps.at[1:])]
    if cache == "static":
        # Once the unchanged ops run as cached segments, a token compiles only
        # the 4 small programs on the growing token ids (torch.cat of the new
        # token, and the reads of its last column by generate's stopping and
        # input preparation code), never the model again.
        assert all(c <= 4 for c in per_token[-3:]), per_token

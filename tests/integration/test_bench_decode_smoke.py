"""bench/bench_decode.py's configurations produce CPU's greedy tokens (a tiny
Llama, 6 new tokens), and its counters see what the benchmark reports: one
program per fused decode step and the static KV cache donated in place."""

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="bench_decode runs a transformers Llama")

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_decode.py"
NEW_TOKENS, BATCH = 6, 2


@pytest.fixture(scope="module")
def bench():
    if str(BENCH.parent) not in sys.path:  # bench/_report.py, as when run from bench/
        sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("bench_decode", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cpu_tokens(bench):
    return bench.TorchWorker("cpu", "tiny", BATCH, NEW_TOKENS).first()["tokens"]


def test_jax_decode_matches_cpu(bench, cpu_tokens):
    pytest.importorskip("jax", reason="the JAX configuration needs jax")
    assert bench.JaxLlama("tiny", BATCH, NEW_TOKENS).first()["tokens"] == cpu_tokens


def test_fused_static_is_one_program_per_step_with_the_cache_donated(bench, cpu_tokens):
    import torchtpu

    previous = torchtpu.get_eager_mode()
    try:
        worker = bench.TorchWorker("tpu_fused_static", "tiny", BATCH, NEW_TOKENS)
        assert worker.first()["tokens"] == cpu_tokens
        run = worker.run()
    finally:
        torchtpu.set_eager_mode(previous)
    assert run["executes_per_step"] == 1
    assert run["compiles_per_step"] == 0
    # K and V of 2 layers, [2, 2, 32 + 6, 16] float32 each; a median over
    # steps, so not exact
    kv_bytes = 2 * 2 * BATCH * 2 * (32 + NEW_TOKENS) * 16 * 4
    assert run["donated_bytes_per_step"] >= kv_bytes // 2

"""The persistent compile cache: a warm second process compiles nothing; corrupt,
truncated and foreign entries are survived; concurrent processes share a
directory; ``torchtpu.cache.info()`` / ``clear()``.

Each scenario runs fresh Python processes (the runtime reads the cache directory
once, at start) with ``TORCHTPU_CACHE_DIR`` in pytest's ``tmp_path``.
"""

import json
import os
import random
import stat
import subprocess
import sys

import pytest
import torch

import torchtpu

pytestmark = pytest.mark.alone  # passes: tests/README.md

# One MLP training step (forward, cross-entropy, backward, SGD update) and a read.
# Prints one JSON line: the loss, the updated weight's sum, metrics and cache info.
STEP = """
import json, torch, torchtpu
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
dev = "tpu:{device}"
model = model.to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = torch.nn.functional.cross_entropy(model(x.to(dev)), y.to(dev))
loss.backward()
opt.step()
out = {{"loss": loss.item(), "w": model[0].weight.sum().item(),
        "metrics": torchtpu.metrics.metrics(), "info": torchtpu.cache.info()}}
print(json.dumps(out))
"""

# A few ops, a few programs (5): for the scenarios that need entries, not a model.
SMALL = """
import json, torch, torchtpu
torch.manual_seed(0)
x, w = torch.randn(8, 16).to("tpu:{device}"), torch.randn(16, 4).to("tpu:{device}")
y = ((x @ w).relu() + 1).exp().sum()
out = {{"loss": y.item(), "w": 0.0,
        "metrics": torchtpu.metrics.metrics(), "info": torchtpu.cache.info()}}
print(json.dumps(out))
"""


def run_step(cache_dir, device=0, check=True, code=STEP, **env):
    """Runs `code` in a new process; returns (parsed JSON or None, CompletedProcess)."""
    full = dict(os.environ, **env)
    full.pop("TORCHTPU_CACHE", None)
    if cache_dir is not None:
        full["TORCHTPU_CACHE_DIR"] = str(cache_dir)
    r = subprocess.run([sys.executable, "-c", code.format(device=device)],
                       capture_output=True, text=True, env=full, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None
    return result, r


def entries(cache_dir):
    return sorted(p for p in cache_dir.iterdir() if p.suffix == ".ttpu")


def test_warm_second_process_compiles_nothing(tmp_path):
    cache_dir = tmp_path / "cache"
    cold, r = run_step(cache_dir, TORCHTPU_CACHE_LOG="1")
    m = cold["metrics"]
    assert m["compiles"] > 0
    assert m["persistent_hits"] == 0
    assert m["persistent_misses"] == m["compiles"]
    assert len(entries(cache_dir)) == m["compiles"]
    assert cold["info"]["entries"] == m["compiles"] and cold["info"]["misses"] == m["compiles"]
    # TORCHTPU_CACHE_LOG=1 explains each miss with every key part.
    assert r.stderr.count("compile cache miss") == m["compiles"]
    for part in ("program=", "compile_options=", "plugin=", "pjrt_api=", "cpu=", "torchtpu=",
                 "xla_env="):
        assert part in r.stderr

    warm, _ = run_step(cache_dir)
    w = warm["metrics"]
    assert w["compiles"] == 0
    assert w["persistent_hits"] == m["compiles"]
    assert w["persistent_misses"] == 0 and w["persistent_rejected"] == 0
    assert w["persistent_load_seconds"] > 0
    assert warm["info"]["hits"] == m["compiles"]
    assert (warm["loss"], warm["w"]) == (cold["loss"], cold["w"])

    # Programs are compiled for one replica with the device chosen at execute
    # time, so entries written by a 1-device process serve device 1 of a
    # 2-device process.
    other, _ = run_step(cache_dir, device=1, TORCHTPU_CPU_DEVICES="2")
    assert other["metrics"]["compiles"] == 0
    assert (other["loss"], other["w"]) == (cold["loss"], cold["w"])


def test_entries_compiled_under_other_xla_flags_are_not_reused(tmp_path):
    # The plugin takes its compile defaults from XLA_FLAGS (read once, at
    # load): a program compiled under other flags is another program, so a
    # process with other flags must not load the entry (it did: a fast-math
    # build served a process without fast math, and the other way round).
    cache_dir = tmp_path / "cache"
    cold, _ = run_step(cache_dir, code=SMALL)
    n = cold["metrics"]["compiles"]
    assert n > 0
    flags = "--xla_cpu_enable_fast_min_max=true"
    other, r = run_step(cache_dir, code=SMALL, XLA_FLAGS=flags, TORCHTPU_CACHE_LOG="1")
    assert other["metrics"]["persistent_hits"] == 0
    assert other["metrics"]["compiles"] == n
    assert r.stderr.count(f" xla_env=XLA_FLAGS={flags};") == n
    again, _ = run_step(cache_dir, code=SMALL, XLA_FLAGS=flags)
    assert again["metrics"]["compiles"] == 0 and again["metrics"]["persistent_hits"] == n
    assert again["loss"] == other["loss"]


def _corrupt(paths):
    """Damages every entry a different way: truncation, random bytes, a flipped
    payload byte, an empty file, and another key's entry under this name."""
    rng = random.Random(0)
    originals = [p.read_bytes() for p in paths]
    for i, p in enumerate(paths):
        data = originals[i]
        kind = i % 5
        if kind == 0:
            p.write_bytes(data[: len(data) // 2])
        elif kind == 1:
            p.write_bytes(bytes(rng.randrange(256) for _ in range(len(data))))
        elif kind == 2:
            flipped = bytearray(data)
            flipped[-1] ^= 0xFF
            p.write_bytes(bytes(flipped))
        elif kind == 3:
            p.write_bytes(b"")
        else:
            p.write_bytes(originals[(i + 1) % len(paths)])  # wrong key


def test_corrupt_truncated_and_foreign_entries_are_recompiled(tmp_path):
    cache_dir = tmp_path / "cache"
    cold, _ = run_step(cache_dir, code=SMALL)
    paths = entries(cache_dir)
    assert len(paths) >= 5
    _corrupt(paths)

    survived, r = run_step(cache_dir, code=SMALL)
    m = survived["metrics"]
    assert m["compiles"] == len(paths), r.stderr
    assert m["persistent_rejected"] == len(paths)
    assert m["persistent_hits"] == 0
    assert (survived["loss"], survived["w"]) == (cold["loss"], cold["w"])

    # The damaged entries were overwritten with good ones.
    again, _ = run_step(cache_dir, code=SMALL)
    assert again["metrics"]["compiles"] == 0
    assert again["metrics"]["persistent_rejected"] == 0


def test_two_processes_filling_one_directory_at_once_both_succeed(tmp_path):
    cache_dir = tmp_path / "cache"
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(cache_dir))
    procs = [subprocess.Popen([sys.executable, "-c", SMALL.format(device=0)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["loss"] == results[1]["loss"]
    n = max(r["metrics"]["cached_programs"] for r in results)
    assert len(entries(cache_dir)) == n
    assert not [p for p in cache_dir.iterdir() if p.suffix != ".ttpu"], "temp files left"
    after, _ = run_step(cache_dir, code=SMALL)
    assert after["metrics"]["compiles"] == 0
    assert after["metrics"]["persistent_rejected"] == 0


def test_info_and_clear(tmp_path):
    cache_dir = tmp_path / "a" / "b"  # created, parents too, owner-only
    code = SMALL.format(device=0) + (
        "removed = torchtpu.cache.clear()\n"
        "print(json.dumps({'removed': removed, 'info': torchtpu.cache.info()}))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, TORCHTPU_CACHE_DIR=str(cache_dir)), timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    before, after = json.loads(lines[-2]), json.loads(lines[-1])
    info = before["info"]
    assert info["enabled"] and info["dir"] == str(cache_dir)
    assert info["entries"] == before["metrics"]["compiles"] > 0
    assert info["bytes"] > 0
    assert after["removed"] == info["entries"]
    assert after["info"]["entries"] == 0 and after["info"]["bytes"] == 0
    assert after["info"]["misses"] == info["misses"]  # counters are per process, not per dir
    assert entries(cache_dir) == []
    for d in (tmp_path / "a", cache_dir):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700


def test_info_in_this_process_uses_the_session_dir():
    # conftest.py points the whole test session at a temp dir, never ~/.cache.
    info = torchtpu.cache.info()
    assert info["enabled"]
    assert info["dir"] == os.path.abspath(os.environ["TORCHTPU_CACHE_DIR"])
    assert not info["dir"].startswith(os.path.expanduser("~/.cache"))


def test_disabled_cache_writes_nothing(tmp_path):
    # TORCHTPU_CACHE_DIR="" (set, empty) disables; so does TORCHTPU_CACHE=0
    # (covered with every other spelling in cache_test's DirectoryFromEnvironment).
    home = tmp_path / "home"
    home.mkdir()
    full = dict(os.environ, HOME=str(home), XDG_CACHE_HOME=str(home / "xdg"),
                TORCHTPU_CACHE_DIR="")
    r = subprocess.run([sys.executable, "-c", SMALL.format(device=0)], capture_output=True,
                       text=True, env=full, timeout=300)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["info"] == {"enabled": False, "dir": None, "entries": 0, "bytes": 0,
                              "hits": 0, "misses": 0, "rejected": 0}
    assert result["metrics"]["compiles"] > 0
    assert list(home.rglob("*")) == []


def test_directory_others_can_write_is_refused_with_a_warning(tmp_path):
    cache_dir = tmp_path / "shared"
    cache_dir.mkdir()
    cache_dir.chmod(0o777)
    result, r = run_step(cache_dir, code=SMALL)
    assert "persistent compile cache disabled" in r.stderr and "chmod 700" in r.stderr
    assert result["info"]["enabled"] is False
    assert result["metrics"]["compiles"] > 0
    assert entries(cache_dir) == []


EVICT = """
import json, warnings, torch, torchtpu
torchtpu.set_eager_mode("fused")
outs = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for rnd in range(2):
        for n in range(1, 11):  # 10 distinct programs, twice
            x = torch.arange(n, dtype=torch.float32, device="tpu:{device}")
            outs.append(((x * 2 + 1).sin().sum()).item())
m = torchtpu.metrics.metrics()
print(json.dumps({{"outs": outs, "metrics": m,
                  "recompile_warnings": sum("recompil" in str(w.message) for w in caught)}}))
"""


def test_loaded_programs_are_bounded_and_evicted_ones_reload(tmp_path):
    # Each loaded executable holds memory mappings and Linux caps a process's
    # mappings, so at most TORCHTPU_MAX_PROGRAMS stay loaded; an evicted program
    # comes back from the persistent cache, and is not a "new graph" again.
    # 10 distinct graphs from one line stay under a warning threshold of 12; had
    # the reloads counted as new graphs, the second round would cross it.
    result, _ = run_step(tmp_path, code=EVICT, TORCHTPU_MAX_PROGRAMS="4",
                         TORCHTPU_RECOMPILE_WARN="12")
    m = result["metrics"]
    assert m["cached_programs"] == 4
    assert m["compiles"] == 10                # each distinct program compiled once
    assert m["persistent_hits"] == 10         # the second round reloads them all
    assert result["recompile_warnings"] == 0
    expected = [float((torch.arange(n, dtype=torch.float32) * 2 + 1).sin().sum())
                for n in range(1, 11)] * 2
    assert result["outs"] == pytest.approx(expected, rel=1e-6, abs=1e-6)

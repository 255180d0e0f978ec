"""torchtpu.spmd over 4 devices of one process: sharded tensors, functions run
as ONE Shardy-partitioned program (_spmd_checks.py), shard_map with functional
collectives compiled in (_shard_map_checks.py), the Llama training recipes
(_spmd_recipe_checks.py), the errors. Each checks file runs in ONE subprocess
with TORCHTPU_CPU_DEVICES=4 (this session's runtime has one device); each check
is reported as its own test."""

import os

import pytest

import _shard_map_checks
import _spmd_checks
import _spmd_recipe_checks
from _util import run_checks_subprocess

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = {m.__name__: m for m in (_spmd_checks, _shard_map_checks, _spmd_recipe_checks)}
CASES = [(f, n) for f, m in FILES.items() for n in sorted(vars(m)) if n.startswith("check_")]


@pytest.fixture(scope="module")
def results():
    cache = {}

    def of(name):
        if name not in cache:
            cache[name] = run_checks_subprocess(os.path.join(HERE, name + ".py"), devices=4)
        return cache[name]
    return of


@pytest.mark.parametrize(("checks", "check"), CASES)
def test_spmd(results, checks, check):
    got = results(checks)
    assert check in got, f"{check} did not run"
    assert got[check] is None, got[check]

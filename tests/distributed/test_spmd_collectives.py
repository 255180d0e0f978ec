"""torchtpu.spmd.shard_map over 4 devices of one process: PyTorch's functional
collectives over mesh groups compiled into ONE program (stablehlo.all_reduce,
all_gather, reduce_scatter, all_to_all, collective_permute). The checks live
in _shard_map_checks.py and run in ONE subprocess with TORCHTPU_CPU_DEVICES=4;
each check is reported as its own test."""

import os

import pytest

import _shard_map_checks
from _util import run_checks_subprocess

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = sorted(n for n in vars(_shard_map_checks) if n.startswith("check_"))


@pytest.fixture(scope="module")
def results():
    return run_checks_subprocess(os.path.join(HERE, "_shard_map_checks.py"), devices=4)


@pytest.mark.parametrize("check", CHECKS)
def test_shard_map(results, check):
    assert check in results, f"{check} did not run"
    assert results[check] is None, results[check]

"""torchtpu.spmd over 4 devices of one process: sharded tensors, functions run
as ONE Shardy-partitioned program, the errors. The checks live in
_spmd_checks.py and run in ONE subprocess with TORCHTPU_CPU_DEVICES=4 (this
session's runtime has one device); each check is reported as its own test."""

import os

import pytest

import _spmd_checks
from _util import run_checks_subprocess

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = sorted(n for n in vars(_spmd_checks) if n.startswith("check_"))


@pytest.fixture(scope="module")
def results():
    return run_checks_subprocess(os.path.join(HERE, "_spmd_checks.py"), devices=4)


@pytest.mark.parametrize("check", CHECKS)
def test_spmd(results, check):
    assert check in results, f"{check} did not run"
    assert results[check] is None, results[check]

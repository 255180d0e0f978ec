"""Two tpu devices in one process, as two CUDA devices behave: copies between
them (case 07), the device guard, set_device / device(), mixed-device errors,
per-device memory and events. The checks live in _multidevice_checks.py and
run in ONE subprocess with TORCHTPU_CPU_DEVICES=2 (this session's runtime has
one device and cannot be restarted); each check is reported as its own test."""

import os

import pytest

import _multidevice_checks
from _util import run_checks_subprocess

pytestmark = [pytest.mark.alone, pytest.mark.fused_pass]  # passes: tests/README.md

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = sorted(n for n in vars(_multidevice_checks) if n.startswith("check_"))


# Copies between devices again, staged through host memory (the path for a
# plugin without PJRT_Buffer_CopyToDevice).
HOST_COPY_CHECKS = ["check_case_07", "check_copy_views_dtypes_broadcast",
                    "check_fused_mode_pending_value_crosses",
                    "check_copies_into_views_and_dtypes_across_devices"]


def _run(extra_env, names=()):
    return run_checks_subprocess(os.path.join(HERE, "_multidevice_checks.py"), 2, extra_env, names)


@pytest.fixture(scope="module")
def results():
    return _run({})


@pytest.fixture(scope="module")
def host_copy_results():
    return _run({"TORCHTPU_DEVICE_COPY": "host"}, HOST_COPY_CHECKS)


@pytest.mark.parametrize("check", CHECKS)
def test_two_devices(results, check):
    assert check in results, f"{check} did not run"
    assert results[check] is None, results[check]


@pytest.mark.parametrize("check", HOST_COPY_CHECKS)
def test_two_devices_host_staged_copies(host_copy_results, check):
    assert check in host_copy_results, f"{check} did not run"
    assert host_copy_results[check] is None, host_copy_results[check]

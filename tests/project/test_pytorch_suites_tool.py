"""The PyTorch-suites runner (python -m torchtpu.tools.pytorch_suites) on a synthetic
device-generic test file: it tells a pass from a tpu-only failure, survives a
worker that aborts or stalls inside a test and runs the tests after it, and
reads its expected file. PyTorch's own test files are not needed (~30 s)."""
import json
import textwrap

import pytest

from torchtpu.tools import _suites_plugin as plugin
from torchtpu.tools import _suites_report as report
from torchtpu.tools import pytorch_suites

SYNTHETIC = '''
import os
import time

import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


def is_tpu(device):
    return torch.device(device).type == "tpu"


class TestSynthetic(TestCase):
    def setUp(self):
        # as 2.4's test_linalg.py: a recursion unless the runner's shim rebases
        super(self.__class__, self).setUp()

    def test_a_passes(self, device):
        self.assertEqual(torch.ones(3, device=device).sum().item(), 3.0)

    def test_b_wrong_on_tpu(self, device):
        x = torch.zeros(2, device=device)
        self.assertEqual(x + (1 if is_tpu(device) else 0), torch.zeros(2, device=device))

    def test_c_aborts_on_tpu(self, device):
        if is_tpu(device):
            os.abort()

    def test_d_stalls_on_tpu(self, device):
        if is_tpu(device):
            time.sleep(600)

    def test_e_no_check_on_tpu(self, device):
        with self.assertRaises(RuntimeError):
            if not is_tpu(device):
                raise RuntimeError("checked on CPU")

    def test_f_listed(self, device):
        if is_tpu(device):
            raise NotImplementedError("an intended gap")

    def test_g_skipped(self, device):
        self.skipTest("not for this test")

    def test_h_fails_on_both(self, device):
        raise ValueError("broken test")

    def test_j_fails_on_both_not_alike(self, device):
        # CPU's failure (say, a 2.4 expectation) must not hide tpu's own bug
        if is_tpu(device):
            raise RuntimeError("a tpu bug")
        raise ValueError("broken test")

    def test_k_fails_on_both_explained(self, device):
        raise KeyError("tpu") if is_tpu(device) else ValueError("broken test")

    def test_i_after_the_crashes(self, device):
        self.assertEqual(torch.arange(4, device=device).sum().item(), 6)


instantiate_device_type_tests(TestSynthetic, globals())


class TestNotDeviceGeneric(TestCase):
    def test_never_run(self):
        raise AssertionError("only device-generic classes run")
'''


def test_runner_classifies_each_outcome(tmp_path, capsys):
    (tmp_path / "test_synthetic.py").write_text(SYNTHETIC)
    expected = tmp_path / "expected.txt"
    expected.write_text("test_synthetic.py::TestSynthetic::test_f_listed_tpu "
                        "not_implemented  # the test's intended gap\n"
                        "test_synthetic.py::TestSynthetic::test_k_fails_on_both_explained_tpu "
                        "error:KeyError  # a tpu failure the file explains\n")
    out = tmp_path / "report.json"
    rc = pytorch_suites.main(["--pytorch-test-dir", str(tmp_path), "test_synthetic.py",
                              "--timeout", "8", "--expected", str(expected),
                              "--report", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    got = {r["test"].split("::")[-1]: (r["category"], r["kind"]) for r in data["tests"]}
    assert got == {
        "test_a_passes_tpu": ("passed", ""),
        "test_b_wrong_on_tpu_tpu": ("tpu_fail", "wrong_value"),
        "test_c_aborts_on_tpu_tpu": ("tpu_fail", "crash"),
        "test_d_stalls_on_tpu_tpu": ("tpu_fail", "timeout"),
        "test_e_no_check_on_tpu_tpu": ("tpu_fail", "missing_check"),
        "test_f_listed_tpu": ("expected", "not_implemented"),
        "test_g_skipped_tpu": ("skipped", ""),
        "test_h_fails_on_both_tpu": ("both_fail", "error:ValueError"),
        "test_j_fails_on_both_not_alike_tpu": ("both_fail_differ", "error:RuntimeError"),
        "test_k_fails_on_both_explained_tpu": ("expected", "error:KeyError"),
        "test_i_after_the_crashes_tpu": ("passed", ""),
    }
    lines = SYNTHETIC.splitlines()
    where = {r["kind"]: r["tpu_where"] for r in data["tests"] if r["kind"]}
    assert where["crash"] == f"test_synthetic.py:{lines.index('            os.abort()') + 1}"
    wrong = next(i for i, line in enumerate(lines) if "self.assertEqual(x + (1" in line)
    assert where["wrong_value"] == f"test_synthetic.py:{wrong + 1}"
    crash = next(r for r in data["tests"] if r["kind"] == "crash")
    assert "SIGABRT" in crash["tpu_message"]
    tpu = next(u for u in data["units"] if u["device"] == "tpu")
    assert tpu["attempts"] == 3 and tpu["crashes"] == 1 and tpu["timeouts"] == 1
    # the CPU run ran the same tests (a pass on CPU is what makes b-e tpu-only)
    assert {r["cpu_outcome"] for r in data["tests"] if r["category"] == "tpu_fail"} == {"passed"}
    printed = capsys.readouterr().out
    assert "tpu-only failures by kind" in printed and "test_c_aborts_on_tpu_tpu" in printed
    assert "on CPU: ValueError: broken test" in printed


def test_shared_ids_and_dtype_filter():
    assert plugin.shared_id("TestFooCPU", "test_to_cpu_cpu_float32", "cpu") == \
        "TestFoo::test_to_cpu_tpu_float32"
    assert plugin.shared_id("TestFooPRIVATEUSE1", "test_to_cpu_tpu", "tpu") == \
        "TestFoo::test_to_cpu_tpu"
    known = {"float32", "int64", "float8_e4m3fn", "float8_e4m3fnuz"}
    assert plugin.dtypes_of("test_add_tpu_float32_int64", known) == ["float32", "int64"]
    assert plugin.dtypes_of("test_cast_tpu_float8_e4m3fn", known) == ["float8_e4m3fn"]
    assert plugin.dtypes_of("test_add_tpu", known) == []
    assert plugin.dtypes_of("test_add_tpu_sparse", known) is None


@pytest.mark.parametrize("exc, message, kind", [
    ("AssertionError", "Tensor-likes are not close! | Mismatched elements: 1 / 4", "wrong_value"),
    ("AssertionError", "RuntimeError not raised", "missing_check"),
    ("AssertionError", '"index out of range" does not match "bad index"', "message"),
    ("AssertionError", "UserWarning not triggered", "missing_warning"),
    ("NotImplementedError", "Could not run 'aten::foo'", "not_implemented"),
    ("RuntimeError", "INTERNAL: boom", "error:RuntimeError"),
])
def test_failure_kinds(exc, message, kind):
    assert report.kind_of({"outcome": "failed", "exc_type": exc, "message": message}) == kind


def test_expected_file_is_well_formed(tmp_path):
    entries = report.read_expected(pytorch_suites._DEFAULT_EXPECTED)
    assert all(reason for *_, reason in entries)
    bad = tmp_path / "bad.txt"
    bad.write_text(textwrap.dedent("""\
        test_torch.py::*complex32* not_implemented
    """))  # no reason
    with pytest.raises(ValueError):
        report.read_expected(str(bad))


def test_failures_alike_across_devices():
    def rec(exc, message):
        return {"outcome": "failed", "exc_type": exc, "message": message}
    # values drawn by each device's generator differ, and so do device names
    assert report.failure_key(rec("AssertionError", "Mismatched elements: 3 / 10 on tpu:0")) \
        == report.failure_key(rec("AssertionError", "Mismatched elements: 5 / 10 on cpu"))
    assert report.failure_key(rec("AssertionError", "RuntimeError not raised")) \
        != report.failure_key(rec("AssertionError", '"bad" does not match "other"'))
    assert report.failure_key(rec("RuntimeError", "boom")) \
        != report.failure_key(rec("ValueError", "boom"))

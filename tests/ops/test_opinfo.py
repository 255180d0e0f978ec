"""OpInfo conformance: PyTorch's ``op_db`` sample inputs on tpu against CPU.

A fast subset of the sweep in :mod:`torchtpu.tools.coverage`: the OpInfos whose
ATen name matches an op with a tpu lowering (``torchtpu.metrics.lowered_ops()``),
for float32, int64 and bool, first ``_LIMIT_SAMPLES`` samples each. Every
(OpInfo, dtype) must be ``native`` (all samples match CPU, no CPU fallback)
unless ``opinfo_expected_failures.txt`` lists its category with a reason: then it
xfails, and it fails once the category changes, so the file only shrinks.
``crash`` entries are skipped (they would take the test process down).

The same holds for gradients: for the selected OpInfos that support autograd,
float32 backward on tpu against backward on CPU (dtype ``float32_grad`` in the
expected-failures file).
"""

import pathlib
import re

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import torchtpu
from torchtpu.tools._opinfo_sweep import accepts, full_name, read_expected, run_opinfo

_DTYPES = (torch.float32, torch.int64, torch.bool)
_LIMIT_SAMPLES = 8  # as the coverage sweep, so both see the same samples
_EXPECTED_FILE = pathlib.Path(__file__).resolve().parents[1] / "opinfo_expected_failures.txt"


def _lowered_base_names():
    """Lowered ATen ops without overload, ``_``/``native_`` prefixes and the
    suffixes that separate a kernel from its OpInfo (``max_pool2d_with_indices``
    is OpInfo ``nn.functional.max_pool2d``)."""
    names = set()
    for op in torchtpu.metrics.lowered_ops():
        names.add(op.split(".")[0])
        base = re.sub(r"^_*(native_)?", "", op.split(".")[0])
        names.add(re.sub(r"(_with_indices|_forward|_overrideable|_impl|_functional)$", "", base))
    return names


def _selected_opinfos():
    lowered = _lowered_base_names()
    for op in op_db:
        # masked.* and sparse.* reach the lowered ops only through composites
        # that the full sweep covers; they would double this file's run time.
        if op.name.startswith(("masked.", "sparse.")):
            continue
        if op.variant_test_name.endswith("triton_optimized"):
            continue
        if op.aten_name in lowered or op.name.split(".")[-1] in lowered:
            yield op


_EXPECTED = read_expected(_EXPECTED_FILE)
_CASES = [
    pytest.param(op, dtype, id=f"{full_name(op)}-{str(dtype).removeprefix('torch.')}")
    for op in _selected_opinfos()
    for dtype in _DTYPES
    if dtype in op.supported_dtypes("cpu")
]


_GRAD_CASES = [
    pytest.param(op, id=full_name(op))
    for op in _selected_opinfos()
    if op.supports_autograd and torch.float32 in op.supported_dtypes("cpu")
]


@pytest.mark.parametrize("op,dtype", _CASES)
def test_opinfo_matches_cpu(op, dtype):
    _check(op, dtype, str(dtype).removeprefix("torch."), backward=False)


@pytest.mark.parametrize("op", _GRAD_CASES)
def test_opinfo_gradients_match_cpu(op):
    _check(op, torch.float32, "float32_grad", backward=True)


def _check(op, dtype, label, backward):
    key = (full_name(op), label)
    listed, reason = _EXPECTED.get(key, ("native", ""))
    if listed == "crash":
        pytest.skip(f"crashes the process: {reason}")
    result = run_opinfo(op, dtype, limit_samples=_LIMIT_SAMPLES, backward=backward)
    if result.category == "no_samples":
        pytest.skip("CPU raises for every sample input")
    if result.category == "native" and accepts(listed, "native"):
        return
    if accepts(listed, result.category):
        pytest.xfail(reason)
    hint = (f"listed as {listed!r} ({reason}); update {_EXPECTED_FILE.name}"
            if listed != "native" else f"add '{key[0]} {key[1]} {result.category}  # reason' "
            f"to {_EXPECTED_FILE.name} only with an issue for it")
    pytest.fail(f"{key[0]} {key[1]}: {result.category} {result.detail} "
                f"fallbacks={result.fallbacks}; {hint}")

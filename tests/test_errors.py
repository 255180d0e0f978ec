"""Bad input gets a clear Python exception, never a crash or a hang."""

import os
import subprocess
import sys

import pytest
import torch

import torchtpu
from _util import UNLOWERED_OP, same_error, unlowered


def test_mm_shape_mismatch():
    a = torch.ones(2, 3, device="tpu")
    b = torch.ones(4, 5, device="tpu")
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        torch.mm(a, b)


def test_broadcast_mismatch():
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.ones(2, 3, device="tpu") + torch.ones(4, device="tpu")


def test_cpu_and_tpu_mixed():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)


def test_cpu_zero_dim_tensor_mixes_like_a_scalar():
    y = torch.ones(3, device="tpu") + torch.tensor(2.0)
    assert y.device.type == "tpu"
    assert y.cpu().tolist() == [3.0, 3.0, 3.0]


def run_python(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, timeout=120)


def test_missing_plugin_names_the_path_and_the_fix():
    r = run_python(
        "import torch, torchtpu\n"
        "try:\n"
        "    torch.ones(2, device='tpu')\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n",
        TORCHTPU_PLUGIN="/no/such.so")
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "/no/such.so" in r.stdout
    assert "TORCHTPU_PLUGIN" in r.stdout
    assert torch.tpu.is_available()  # this process is unaffected


def test_missing_plugin_device_count_is_zero_not_an_error():
    r = run_python("import torch, torchtpu\nprint(torch.tpu.is_available(), torch.tpu.device_count())",
                   TORCHTPU_PLUGIN="/no/such.so")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("False 0")


def test_fallback_error_mode():
    r = run_python(
        "import torch, torchtpu\n"
        "x = torch.ones(4, device='tpu')\n"
        "try:\n"
        "    torch.special.airy_ai(x)\n"
        "except NotImplementedError as e:\n"
        "    print('ERR', e)\n",
        TORCHTPU_FALLBACK="error")
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "airy_ai" in r.stdout and "TORCHTPU_FALLBACK" in r.stdout


def test_fallback_is_counted_and_correct():
    torchtpu.metrics.reset()
    x = torch.tensor([1.0, 2.0], device="tpu")
    y = unlowered(x)
    torch.testing.assert_close(y.cpu(), unlowered(torch.tensor([1.0, 2.0])))
    assert torchtpu.metrics.fallback_counts().get(UNLOWERED_OP, 0) == 1


def test_a_failed_op_leaves_earlier_tensors_readable():
    a = torch.arange(4.0, device="tpu")
    with pytest.raises(RuntimeError):
        torch.mm(a.reshape(2, 2), torch.ones(3, 3, device="tpu"))
    assert a.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_bad_eager_mode():
    with pytest.raises(ValueError, match="eager mode"):
        torchtpu.set_eager_mode("fast")


def test_rejected_stablehlo_names_the_op_and_does_not_abort():
    bad = "module @m { func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {" \
          " %0 = stablehlo.add %a, %a : tensor<4xf32> return %0 : tensor<3xf32> } }"
    with pytest.raises(RuntimeError, match="aten::fake_op"):
        torchtpu._C._compile_stablehlo(bad, "aten::fake_op")
    assert (torch.ones(2, device="tpu") + 1).cpu().tolist() == [2.0, 2.0]


def test_out_of_memory_is_a_clear_error():
    with pytest.raises(RuntimeError, match="(?i)out of memory"):
        torch.zeros(2**36, device="tpu")  # 256 GiB
    assert (torch.ones(3, device="tpu") * 2).cpu().tolist() == [2.0] * 3


def test_deferred_failure_surfaces_at_the_read_naming_the_op():
    torchtpu.set_eager_mode("fused")
    try:
        x = torch.zeros(2**36, device="tpu")  # recorded, not run
        y = x + 1
        with pytest.raises(RuntimeError, match=r"(?s)aten::zero_.*(?i:out of memory)"):
            y[0].item()
        with pytest.raises(RuntimeError, match="never computed|failed"):
            (y * 2).cpu()
    finally:
        torchtpu.set_eager_mode("strict")
    assert (torch.ones(2, device="tpu") + 1).cpu().tolist() == [2.0, 2.0]


@pytest.mark.parametrize("op", [torch.neg, torch.floor, torch.ceil, torch.trunc, torch.round,
                                torch.frac, torch.sign, torch.sgn])
@pytest.mark.parametrize("dtypes", [(torch.float32, torch.float64), (torch.float64, torch.float32),
                                    (torch.float32, torch.float32)])
def test_unary_out_must_have_the_result_dtype(op, dtypes):
    # These CPU kernels take only an out of the result's dtype (TensorIterator's
    # check_all_same_dtype), where binary ops cast to any castable out.
    x = torch.tensor([1.5, -2.25])
    out = torch.empty(0, dtype=dtypes[1])
    if dtypes[0] == dtypes[1]:
        got = op(x.to(dtypes[0]).to("tpu"), out=out.to("tpu"))
        assert torch.equal(got.cpu(), op(x.to(dtypes[0])))
    else:
        same_error(lambda t, o: op(t, out=o), x.to(dtypes[0]), out)


def test_cat_out_of_a_lower_kind_is_a_type_error():
    x = torch.tensor([1.5, 2.0])
    same_error(lambda a, o: torch.cat([a, a], out=o), x, torch.empty(4, dtype=torch.uint8))
    same_error(lambda a, o: torch.cat([a, a], out=o), x.cfloat(), torch.empty(4))


def test_a_dtype_tpu_lacks_is_not_implemented_not_a_type_error():
    # A TypeError would make `a + b` Python's "unsupported operand type(s)".
    with pytest.raises(NotImplementedError, match="tpu does not support dtype ComplexHalf"):
        torch.ones(2, dtype=torch.chalf).to("tpu")
    with pytest.raises(NotImplementedError, match="tpu does not support dtype"):
        torch.tensor(1, dtype=torch.complex64, device="tpu") + torch.ones(2, dtype=torch.half,
                                                                          device="tpu")

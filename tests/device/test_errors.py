"""Bad input gets a clear Python exception, never a crash or a hang."""

import os
import subprocess
import sys

import pytest
import torch

import torchtpu
from _util import UNLOWERED_OP, same_error, unlowered

pytestmark = pytest.mark.opt_out_pass  # passes: tests/README.md


def test_mm_shape_mismatch():
    a = torch.ones(2, 3, device="tpu")
    b = torch.ones(4, 5, device="tpu")
    with pytest.raises(
        RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"
    ):
        torch.mm(a, b)


def test_broadcast_mismatch():
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.ones(2, 3, device="tpu") + torch.ones(4, device="tpu")


def test_cpu_and_tpu_mixed():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)


def test_device_index_out_of_range_names_the_setting():
    n = torch.tpu.device_count()
    for make in (lambda: torch.ones(2, device=f"tpu:{n}"), lambda: torch.tpu.set_device(n)):
        with pytest.raises(IndexError, match=f"tpu device index {n} is out of range: this "
                                             f"process has {n} tpu device.*TORCHTPU_CPU_DEVICES"):
            make()


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
    r = run_python(
        "import torch, torchtpu\nprint(torch.tpu.is_available(), torch.tpu.device_count())",
        TORCHTPU_PLUGIN="/no/such.so",
    )
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


def test_fallback_checks_devices_as_cuda_kernels_do():
    # linalg_lstsq of complex tensors runs on the CPU fallback; CUDA's
    # generated wrapper refuses a CPU tensor beside a device one, CPU's
    # kernel checks nothing. A TensorIterator op (device_check: NoCheck in
    # native_functions.yaml) on the fallback still takes a CPU scalar.
    a = torch.randn(4, 3, dtype=torch.complex64)
    b = torch.randn(4, 2, dtype=torch.complex64)
    for args in ((a.to("tpu"), b), (a, b.to("tpu"))):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, "
                                               "but got b is on"):
            torch.linalg.lstsq(*args)
    solution = torch.linalg.lstsq(a.to("tpu"), b.to("tpu")).solution
    torch.testing.assert_close(solution.cpu(), torch.linalg.lstsq(a, b).solution,
                               rtol=1e-4, atol=1e-4)
    x = torch.randn(3, dtype=torch.complex64)
    torchtpu.metrics.reset()
    y = torch.pow(x.to("tpu"), torch.tensor(2.0))
    torch.testing.assert_close(y.cpu(), torch.pow(x, torch.tensor(2.0)))
    assert torchtpu.metrics.fallback_counts() == {"aten::pow.Tensor_Tensor": 1}


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


def _exact_error(fn, *inputs):
    """fn raises on tpu, at the call, exactly the exception CPU raises (type and
    whole message)."""
    with pytest.raises(Exception) as cpu:
        fn(*inputs, "cpu")
    with pytest.raises(type(cpu.value)) as tpu:
        fn(*inputs, "tpu")
    assert str(tpu.value) == str(cpu.value)


SPD = torch.eye(3) * 2 + 0.5

OUT_DTYPE_CASES = {
    "nonzero": lambda d: torch.nonzero(torch.tensor([1.0, 0.0], device=d),
                                       out=torch.empty(0, device=d)),
    "all": lambda d: torch.all(torch.ones(3, device=d), out=torch.empty(0, device=d)),
    "any_dim": lambda d: torch.any(torch.ones(3, 2, device=d), 1,
                                   out=torch.empty(0, device=d, dtype=torch.int32)),
    "isposinf": lambda d: torch.isposinf(torch.ones(3, device=d), out=torch.empty(3, device=d)),
    "isneginf": lambda d: torch.isneginf(torch.ones(3, device=d), out=torch.empty(3, device=d)),
    "linalg_cholesky": lambda d: torch.linalg.cholesky(
        SPD.to(d), out=torch.empty(0, device=d, dtype=torch.int32)),
    "cholesky": lambda d: torch.cholesky(SPD.to(d), out=torch.empty(0, device=d,
                                                                     dtype=torch.int32)),
    "cholesky_inverse": lambda d: torch.cholesky_inverse(
        SPD.to(d), out=torch.empty(0, device=d, dtype=torch.int32)),
    "eigh": lambda d: torch.linalg.eigh(SPD.to(d), out=(torch.empty(0, device=d),
                                                         torch.empty(0, device=d,
                                                                     dtype=torch.int32))),
    "eigvalsh": lambda d: torch.linalg.eigvalsh(SPD.to(d), out=torch.empty(0, device=d,
                                                                           dtype=torch.int32)),
    "inv": lambda d: torch.linalg.inv(SPD.to(d), out=torch.empty(0, device=d, dtype=torch.int32)),
    "heaviside_complex_out": lambda d: torch.heaviside(
        torch.ones(3, device=d), torch.ones(3, device=d),
        out=torch.empty(3, device=d, dtype=torch.complex64)),
    "heaviside_float64_out": lambda d: torch.heaviside(
        torch.ones(3, device=d), torch.ones(3, device=d),
        out=torch.empty(3, device=d, dtype=torch.float64)),
    "complex": lambda d: torch.complex(torch.ones(2, device=d), torch.ones(2, device=d),
                                       out=torch.empty(2, device=d)),
    "uniform_overflow": lambda d: torch.empty(3, device=d, dtype=torch.float16).uniform_(-1e5, 1),
    "random_bool": lambda d: torch.empty(3, device=d, dtype=torch.bool).random_(0, 3),
    "random_int8": lambda d: torch.empty(3, device=d, dtype=torch.int8).random_(-200, 3),
    "one_hot_negative": lambda d: torch.nn.functional.one_hot(torch.tensor([3, -1], device=d)),
    "one_hot_too_large": lambda d: torch.nn.functional.one_hot(torch.tensor([3, 4], device=d), 3),
    "mode_values": lambda d: torch.mode(torch.ones(10, device=d), -1, True, out=(
        torch.empty(0, device=d, dtype=torch.float64), torch.empty(0, device=d, dtype=torch.long))),
    "mode_indices": lambda d: torch.mode(torch.ones(10, device=d), -1, True, out=(
        torch.empty(0, device=d), torch.empty(0, device=d, dtype=torch.int16))),
    "max_dim_values": lambda d: torch.max(torch.ones(5, 5, device=d), dim=0, out=(
        torch.empty(5, dtype=torch.int, device=d), torch.empty(5, dtype=torch.long, device=d))),
    "min_dim_indices": lambda d: torch.min(torch.ones(5, 5, device=d), dim=0, out=(
        torch.empty(5, device=d), torch.empty(5, dtype=torch.double, device=d))),
    "argmax_65_dims": lambda d: torch.argmax(torch.ones([1] * 65, device=d), dim=0),
    "add_bool_alpha": lambda d: torch.add(torch.ones(3, dtype=torch.int8, device=d),
                                          torch.ones(3, dtype=torch.int8, device=d), alpha=True),
    "nearest_int": lambda d: torch.nn.functional.interpolate(
        torch.ones(1, 3, 4, 4, device=d, dtype=torch.int32), scale_factor=2),
    "nearest_1d_int16": lambda d: torch.nn.functional.interpolate(
        torch.ones(1, 3, 4, device=d, dtype=torch.int16), scale_factor=2),
    "nearest_exact_int": lambda d: torch.nn.functional.interpolate(
        torch.ones(1, 3, 4, 4, device=d, dtype=torch.int64), scale_factor=2,
        mode="nearest-exact"),
}


@pytest.mark.parametrize("case", sorted(OUT_DTYPE_CASES))
def test_cpu_checks_and_messages(case):
    # Each op's own check with CPU's message (structured out= dtypes, random
    # bounds, one_hot's class range, integer nearest upsampling), at the call.
    _exact_error(OUT_DTYPE_CASES[case])


def test_fill_and_threshold_take_an_expanded_tensor():
    # CPU builds these TensorIterators without the overlap check.
    for d in ("cpu", "tpu"):
        a = torch.zeros(1, device=d)
        a.expand(3).fill_(2.0)
        b = torch.arange(3.0, device=d).view(3, 1).expand(3, 4)
        torch.nn.functional.threshold_(b, 0.5, -1.0)
        c = torch.ones(2, device=d)
        c[:1].expand(4).zero_()
        assert a.cpu().tolist() == [2.0] and c.cpu().tolist() == [0.0, 1.0]
        assert b.cpu()[:, 0].tolist() == [-1.0, 1.0, 2.0]
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        torch.ones(1, device="tpu").expand(3).mul_(2)


def test_random_from_to_warns_as_cpu():
    for d in ("cpu", "tpu"):
        with pytest.warns(UserWarning, match=r"to - 1 is out of bounds \[-\(2\^24\), 2\^24\]"):
            torch.empty(3, device=d).random_(0, 2**25)


def test_deterministic_mode_fills_and_alerts_as_cpu():
    # use_deterministic_algorithms(True) with fill_uninitialized_memory:
    # torch.empty and resize_'s new elements hold NaN / the dtype's maximum;
    # max_unpool alerts as on CPU.
    torch.use_deterministic_algorithms(True)
    try:
        assert torch.empty(3, device="tpu").isnan().all()
        assert (torch.empty(2, device="tpu", dtype=torch.int32).cpu() == 2**31 - 1).all()
        assert torch.empty_strided((2, 2), (1, 2), device="tpu").isnan().all()
        t = torch.zeros(2, device="tpu")
        t.resize_(4)
        assert t.cpu()[:2].tolist() == [0.0, 0.0] and t.cpu()[2:].isnan().all()
        for unpool, x, name in ((torch.nn.MaxUnpool2d(2), torch.ones(1, 1, 2, 2), "2d"),
                                (torch.nn.MaxUnpool3d(2), torch.ones(1, 1, 2, 2, 2), "3d")):
            idx = torch.zeros(x.shape, dtype=torch.int64)
            for d in ("cpu", "tpu"):
                with pytest.raises(RuntimeError, match=f"max_unpooling{name}_forward_out does "
                                   "not have a deterministic implementation"):
                    unpool(x.to(d), idx.to(d))
    finally:
        torch.use_deterministic_algorithms(False)

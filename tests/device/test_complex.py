"""Complex tensors on tpu: transfers, the dtype views and their aliasing, lazy
conjugation, the natively lowered complex ops, and the CPU fallback that every
other op takes with complex inputs."""

import pytest
import torch

import torchtpu
from _util import assert_close_cpu, no_fallback, run_both, to_tpu

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

CDTYPES = [torch.complex64, torch.complex128]


def crand(*shape, dtype=torch.complex64):
    return torch.randn(shape, dtype=dtype)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 4)])
def test_round_trip(dtype, shape):
    x = crand(*shape, dtype=dtype)
    with no_fallback():
        t = x.to("tpu")
        assert t.dtype == dtype and t.shape == x.shape
        back = t.cpu()
    assert torch.equal(back, x)


def test_non_contiguous_round_trip():
    x = crand(4, 6)
    with no_fallback():
        t = x.to("tpu")
        assert torch.equal(t.t().cpu(), x.t())
        assert torch.equal(t[:, ::2].cpu(), x[:, ::2])
        assert torch.equal(t.t().contiguous().cpu(), x.t().contiguous())


@pytest.mark.parametrize("dtype", CDTYPES)
def test_item_and_print(dtype):
    x = torch.tensor([1.5 - 2j, 0.25 + 1j], dtype=dtype)
    t = x.to("tpu")
    assert t[0].item() == x[0].item()
    assert isinstance(t[1].item(), complex)
    text = str(t)
    assert "device='tpu:0'" in text
    assert text.replace(", device='tpu:0'", "") == str(x)


def test_float_to_complex_and_back():
    x = torch.randn(3, 4)
    run_both(lambda a: a.to(torch.complex64), x)
    run_both(lambda a: a.cfloat(), x)
    run_both(lambda a: a.cdouble(), x)
    run_both(lambda a: a.to(torch.complex64), torch.arange(6))
    run_both(lambda a: a.to(torch.complex128), torch.tensor([True, False]))
    z = crand(5)
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        run_both(lambda a: a.to(torch.float32), z)
        run_both(lambda a: a.to(torch.int32), z * 3)
    run_both(lambda a: a.to(torch.bool), torch.tensor([0j, 1j, 2 + 0j, 0j]))


def test_conj_is_lazy_and_resolves():
    z = crand(3, 4)
    with no_fallback():
        t = z.to("tpu")
        c = t.conj()
        assert c.is_conj()
        assert torch.equal(c.cpu(), z.conj())
        assert not c.resolve_conj().is_conj()
        assert torch.equal(c.resolve_conj().cpu(), z.conj().resolve_conj())
        assert torch.equal(c.clone().cpu(), z.conj())
        assert torch.equal(t.conj_physical().cpu(), z.conj_physical())
    run_both(lambda a: a.conj().imag.clone(), z)
    # A copy into a conjugated view stores the conjugate.
    t = z.to("tpu")
    src = crand(3, 4)
    t.conj().copy_(src.to("tpu"))
    assert torch.equal(t.cpu(), src.conj())


def test_view_as_real_aliases():
    z = crand(3, 2)
    t = z.to("tpu")
    with no_fallback():
        r = torch.view_as_real(t)
        assert r.shape == (3, 2, 2) and r.dtype == torch.float32
        assert torch.equal(r.cpu(), torch.view_as_real(z))
        assert r.data_ptr() == t.data_ptr()
        # Writing through the real view changes the complex tensor.
        r[..., 0].add_(1)
        expected = z + 1
        assert torch.equal(t.cpu(), expected)
        # ... and writing the complex tensor changes the real view.
        t.mul_(2)
        assert torch.equal(r.cpu(), torch.view_as_real(expected * 2))
        assert torch.equal(t.real.cpu(), (expected * 2).real)
        assert torch.equal(t.imag.cpu(), (expected * 2).imag)


def test_view_as_complex_aliases():
    x = torch.randn(4, 2)
    t = x.to("tpu")
    with no_fallback():
        c = torch.view_as_complex(t)
        assert c.dtype == torch.complex64 and c.shape == (4,)
        assert torch.equal(c.cpu(), torch.view_as_complex(x))
        c.mul_(1j)
        assert torch.equal(t.cpu(), torch.view_as_real(torch.view_as_complex(x) * 1j))
    with pytest.raises(RuntimeError, match="Tensor must have a last dimension of size 2"):
        torch.view_as_complex(torch.randn(3, 3).to("tpu"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_complex_and_polar(dtype):
    a, b = torch.randn(3, 4, dtype=dtype), torch.randn(4, dtype=dtype)
    run_both(torch.complex, a, b)
    run_both(torch.polar, a.abs(), b)
    run_both(torch.complex, a[:, :3].t(), a[:, 1:].t())
    run_both(torch.complex, torch.randn((), dtype=dtype), torch.randn((), dtype=dtype))
    run_both(torch.complex, torch.randn(0, 2, dtype=dtype), torch.randn(0, 2, dtype=dtype))
    other = torch.float64 if dtype == torch.float32 else torch.float32
    with pytest.raises(RuntimeError, match="Expected object of scalar type"):
        torch.complex(a.to("tpu"), b.to(other).to("tpu"))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_arithmetic(dtype):
    x, y = crand(3, 4, dtype=dtype), crand(4, dtype=dtype)
    run_both(torch.add, x, y)
    run_both(lambda a, b: torch.add(a, b, alpha=2.5), x, y)
    run_both(lambda a, b: torch.sub(a, b, alpha=1 - 2j), x, y)
    run_both(torch.mul, x, y)
    run_both(torch.div, x, y)
    run_both(lambda a: a * 3, x)
    run_both(lambda a: a * (2 - 1j), x)
    run_both(lambda a: a + 1j, x)
    run_both(lambda a: a / 2, x)
    run_both(lambda a: -a, x)
    run_both(lambda a, b: a * b, x, torch.randn(4))  # complex * real promotes
    run_both(lambda a: a.t() + 1, x)
    run_both(torch.abs, x)
    run_both(torch.abs, torch.tensor([3 + 4j, 0j, 1e30 + 1e30j, float("inf") + 1j], dtype=dtype))
    run_both(torch.angle, x)
    run_both(torch.angle, torch.tensor([0j, -1 + 0j, -1j, 2 + 2j], dtype=dtype))
    run_both(lambda a: a == a.conj(), x)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_movement_and_reductions(dtype):
    x = crand(3, 4, dtype=dtype)
    run_both(lambda a: torch.cat([a, a * 2], dim=1), x)
    run_both(lambda a: torch.stack([a, a]), x)
    run_both(lambda a: torch.flip(a, [0]), x)
    run_both(lambda a: torch.roll(a, 1, 1), x)
    run_both(lambda a: a.repeat(2, 1), x)
    run_both(torch.sum, x)
    run_both(lambda a: a.sum(1, keepdim=True), x)
    run_both(torch.mean, x)
    run_both(lambda a: a.mean(0), x)
    run_both(lambda a: torch.sum(a, dtype=dtype), torch.randn(3, 4))
    run_both(lambda a: torch.where(a.real > 0, a, 0j * a), x)
    run_both(lambda a: torch.zeros_like(a), x)
    run_both(lambda a: torch.full_like(a, 2 - 3j), x)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_products_and_indexing(dtype):
    a, b = crand(3, 4, dtype=dtype), crand(4, 2, dtype=dtype)
    run_both(torch.mm, a, b)
    run_both(torch.matmul, a, b)
    run_both(lambda x, y: x.t().t() @ y, a, b)
    run_both(torch.bmm, crand(2, 3, 4, dtype=dtype), crand(2, 4, 5, dtype=dtype))
    c = crand(3, 2, dtype=dtype)
    run_both(lambda c, x, y: torch.addmm(c, x, y, beta=0.5, alpha=2), c, a, b)
    run_both(torch.dot, crand(5, dtype=dtype), crand(5, dtype=dtype))
    run_both(lambda x, i: torch.index_select(x, 1, i), a, torch.tensor([3, 0, 0]))
    run_both(lambda x, m: x.masked_fill(m, 1 - 1j), a, a.real > 0)
    run_both(lambda x: x == (1 + 0j), torch.tensor([1 + 0j, 1 + 1j], dtype=dtype))
    run_both(lambda x: x != 1j, torch.tensor([1j, 1 + 1j], dtype=dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_addmm_family_with_complex_alpha_and_beta(dtype):
    """A complex alpha/beta is a value, not a double: each op of the family
    (and add's/index_add's alpha) equals CPU's, natively lowered."""
    alpha, beta = 1 + 2j, 0.5 - 1j
    a, b, c = crand(3, 5, dtype=dtype), crand(5, 4, dtype=dtype), crand(3, 4, dtype=dtype)
    b1, b2 = crand(2, 3, 5, dtype=dtype), crand(2, 5, 4, dtype=dtype)
    v, w = crand(5, dtype=dtype), crand(4, dtype=dtype)
    run_both(lambda m, x, y: torch.addmm(m, x, y, beta=beta, alpha=alpha), c, a, b)
    run_both(
        lambda m, x, y: torch.baddbmm(m, x, y, beta=beta, alpha=alpha),
        crand(2, 3, 4, dtype=dtype),
        b1,
        b2,
    )
    run_both(lambda m, x, y: torch.addbmm(m, x, y, beta=beta, alpha=alpha), c, b1, b2)
    run_both(lambda m, x, y: torch.addmv(m, x, y, beta=beta, alpha=alpha), c[:, 0], a, v)
    run_both(lambda m, x, y: torch.addr(m, x, y, beta=beta, alpha=alpha), c, c[:, 0], w)
    run_both(torch.mv, a, v)
    # An empty product leaves beta * self (and a 1 + 0j alpha is the identity).
    run_both(lambda m, x, y: torch.addmm(m, x, y, beta=2j, alpha=1j), c, a[:, :0], b[:0])
    run_both(lambda x, y: torch.add(x, y, alpha=1 + 0j), c, c)
    run_both(lambda x, y: torch.add(x, y, alpha=alpha), c, c)


def test_conjugated_operand_falls_back_correctly():
    """mm receives lazily conjugated inputs (the Conjugate key passes it
    through): the kernel sends those to CPU rather than read raw values."""
    a, b = crand(3, 4), crand(4, 2)
    torchtpu.metrics.reset()
    got = torch.mm(a.to("tpu").conj(), b.to("tpu"))
    assert torchtpu.metrics.fallback_counts()
    assert_close_cpu(got, torch.mm(a.conj(), b))


def test_inplace_and_out():
    x = crand(3, 4)
    t = x.to("tpu")
    with no_fallback():
        t.add_(1j)
        t.mul_(2)
        out = torch.empty(3, 4, dtype=torch.complex64, device="tpu")
        torch.add(t, t, out=out)
    assert_close_cpu(t, (x + 1j) * 2)
    assert_close_cpu(out, ((x + 1j) * 2) * 2)
    # abs_ of a complex tensor refuses, as ATen's (its real result would be
    # cast back into the complex tensor); abs(out=float) works.
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex tensors."):
        t.abs_()
    assert_close_cpu(t, (x + 1j) * 2)
    real = torch.empty(0, device="tpu")
    with no_fallback():
        torch.abs(t, out=real)
    assert_close_cpu(real, ((x + 1j) * 2).abs())


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize(
    "fn", [torch.exp, torch.expm1, torch.log, torch.log1p, torch.sqrt, torch.rsqrt, torch.sin,
           torch.cos, torch.tanh, torch.sgn, torch.reciprocal],
    ids=lambda f: f.__name__)
def test_elementwise(fn, dtype):
    x = crand(3, 4, dtype=dtype)
    run_both(fn, x)
    run_both(fn, x.t())
    run_both(fn, torch.tensor([0j, 1 + 0j, -1 + 0j, 1j, -2 - 3j], dtype=dtype))


def test_unmarked_op_falls_back():
    """An op whose rule was never checked with complex inputs runs on CPU
    (counted) and gives CPU's answer, instead of a wrong native result."""
    x = crand(3, 4)
    t = x.to("tpu")
    torchtpu.metrics.reset()
    got = torch.sinh(t)
    counts = torchtpu.metrics.fallback_counts()
    assert any("sinh" in k for k in counts), counts
    assert_close_cpu(got, torch.sinh(x))
    # A real op still runs natively next to it.
    with no_fallback():
        torch.sinh(t.real)


def test_complex_in_place_on_unmarked_op_falls_back():
    x = crand(4)
    t = x.to("tpu")
    torchtpu.metrics.reset()
    t.cosh_()
    assert torchtpu.metrics.fallback_counts()
    assert_close_cpu(t, torch.cosh(x))


def test_complex_factories():
    with no_fallback():
        z = torch.zeros(2, 3, dtype=torch.complex64, device="tpu")
        assert torch.equal(z.cpu(), torch.zeros(2, 3, dtype=torch.complex64))
        o = torch.ones(2, dtype=torch.complex128, device="tpu")
        assert torch.equal(o.cpu(), torch.ones(2, dtype=torch.complex128))
        f = torch.full((2,), 1 + 2j, device="tpu")
        assert f.dtype == torch.complex64
        assert torch.equal(f.cpu(), torch.full((2,), 1 + 2j))


def test_fused_mode_complex():
    x, y = crand(4), crand(4)
    torchtpu.set_eager_mode("fused")
    try:
        t = to_tpu(x) * to_tpu(y) + 1
        got = torch.view_as_real(t).cpu()
    finally:
        torchtpu.set_eager_mode("strict")
    assert torch.allclose(got, torch.view_as_real(x * y + 1))

"""Matrix products on tpu compared with CPU PyTorch: mm, addmm, bmm and their
family, vector products, matmul/linear decompositions, linalg.cross, cdist and
pdist; values, dtype and shape with no CPU fallback, gradients, the CPU kernels'
error messages, and half-precision products rounded once."""



import pytest
import torch
import torch.nn.functional as F

from _nn_util import TOL, grads_close, make
from _util import assert_close_cpu, no_fallback, run_both, same_error

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md


MM_SHAPES = [((3, 4), (4, 5)), ((1, 1), (1, 1)), ((0, 4), (4, 5)), ((3, 0), (0, 5)),
             ((3, 4), (4, 0))]


A = torch.ops.aten


@pytest.mark.parametrize("shapes", MM_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_mm(shapes, dtype):
    a, b = make(shapes[0], dtype), make(shapes[1], dtype)
    run_both(torch.mm, a, b, **TOL)
    run_both(lambda x, y: x @ y, a, b, **TOL)


def test_mm_non_contiguous_and_dtypes():
    a, b = torch.randn(4, 3), torch.randn(5, 4)
    run_both(lambda x, y: torch.mm(x.t(), y.t()), a, b, **TOL)
    run_both(lambda x, y: torch.mm(x[::2], y[:, 1:].t()), torch.randn(6, 3), torch.randn(5, 4),
             **TOL)
    run_both(torch.mm, a.t().double(), b.t().double(), **TOL)
    run_both(torch.mm, a.t().int(), b.t().int(), **TOL)
    run_both(torch.mm, a.t().bfloat16(), b.t().bfloat16(), rtol=1e-2, atol=1e-2)
    run_both(torch.mm, torch.full((2, 3), 2**40), torch.full((3, 2), 3), **TOL)  # exact in int64


def test_mm_out_and_in_place():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    out = torch.empty(0, device="tpu")
    with no_fallback():
        torch.mm(a.to("tpu"), b.to("tpu"), out=out)
    assert_close_cpu(out, a @ b, **TOL)
    s = torch.randn(3, 7)
    s_t = s.to("tpu")
    s[:, 2:].addmm_(a, b, beta=0.5, alpha=2)
    with no_fallback():
        s_t[:, 2:].addmm_(a.to("tpu"), b.to("tpu"), beta=0.5, alpha=2)
    assert_close_cpu(s_t, s, **TOL)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2), (0, 1), (False, 3)])
def test_addmm(beta, alpha):
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    for self in [torch.randn(5), torch.randn(3, 5), torch.randn(1, 1), torch.tensor(2.0)]:
        run_both(lambda s, x, y: torch.addmm(s, x, y, beta=beta, alpha=alpha), self, a, b, **TOL)
    run_both(lambda s, x, y: torch.addmm(s, x.t(), y, beta=beta, alpha=alpha),
             torch.randn(5), torch.randn(4, 3), b, **TOL)
    run_both(lambda s, x, y: torch.addmm(s, x, y, beta=beta, alpha=alpha),
             torch.randint(-5, 5, (5,)), a.long(), b.long(), **TOL)


def test_addmm_beta_zero_ignores_nan():
    nan = torch.full((3, 5), float("nan"))
    run_both(lambda s, x, y: torch.addmm(s, x, y, beta=0), nan, torch.randn(3, 4),
             torch.randn(4, 5), **TOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_bmm_family(dtype):
    b1, b2 = make((2, 3, 4), dtype), make((2, 4, 5), dtype)
    run_both(torch.bmm, b1, b2, **TOL)
    run_both(lambda x, y: torch.bmm(x.transpose(1, 2), y), make((2, 4, 3), dtype), b2, **TOL)
    run_both(torch.bmm, make((0, 3, 4), dtype), make((0, 4, 5), dtype), **TOL)
    run_both(torch.bmm, make((2, 3, 0), dtype), make((2, 0, 5), dtype), **TOL)
    run_both(lambda s, x, y: torch.baddbmm(s, x, y, beta=2, alpha=3), make((3, 5), dtype), b1, b2,
             **TOL)
    run_both(lambda s, x, y: torch.baddbmm(s, x, y, beta=0), make((2, 3, 5), dtype), b1, b2, **TOL)
    run_both(lambda s, x, y: torch.addbmm(s, x, y, beta=2, alpha=3), make((3, 5), dtype), b1, b2,
             **TOL)
    run_both(lambda s, x, y: torch.addbmm(s, x, y, beta=2), make((5,), dtype),
             make((0, 3, 4), dtype), make((0, 4, 5), dtype), **TOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_vector_products(dtype):
    m, v = make((3, 4), dtype), make((4,), dtype)
    run_both(torch.mv, m, v, **TOL)
    run_both(lambda x, y: torch.mv(x.t(), y), make((4, 3), dtype), v, **TOL)
    run_both(torch.mv, make((0, 4), dtype), v, **TOL)
    run_both(torch.mv, make((3, 0), dtype), make((0,), dtype), **TOL)
    run_both(lambda s, x, y: torch.addmv(s, x, y, beta=2, alpha=3), make((3,), dtype), m, v, **TOL)
    run_both(lambda s, x, y: torch.addmv(s, x, y), make((1,), dtype), m, v, **TOL)
    run_both(lambda s, x, y: torch.addmv(s, x, y), make((), dtype), m, v, **TOL)
    run_both(torch.dot, v, make((4,), dtype), **TOL)
    run_both(torch.dot, make((0,), dtype), make((0,), dtype), **TOL)
    run_both(lambda x, y: torch.dot(x[::2], y), make((8,), dtype), v, **TOL)
    run_both(torch.vdot, v, make((4,), dtype), **TOL)
    run_both(lambda s, x, y: torch.addr(s, x, y, beta=2, alpha=3), make((3, 4), dtype),
             make((3,), dtype), v, **TOL)
    run_both(torch.outer, make((3,), dtype), v, **TOL)


def test_addr_bool_and_promotion():
    run_both(torch.addr, torch.rand(3, 4) > 0.5, torch.rand(3) > 0.5, torch.rand(4) > 0.5, **TOL)
    run_both(lambda s, x, y: torch.addr(s, x, y, beta=False), torch.rand(3, 4) > 0.5,
             torch.rand(3) > 0.5, torch.rand(4) > 0.5, **TOL)
    run_both(torch.addr, torch.randint(0, 5, (3, 4)), torch.randn(3), torch.randn(4), **TOL)


def test_matmul_and_linear_decompositions():
    run_both(torch.matmul, torch.randn(4), torch.randn(4, 5), **TOL)
    run_both(torch.matmul, torch.randn(3, 4), torch.randn(4), **TOL)
    run_both(torch.matmul, torch.randn(2, 1, 3, 4), torch.randn(5, 4, 2), **TOL)
    run_both(
        lambda a, b: torch.einsum("bij,bjk->bik", a, b), torch.randn(2, 3, 4), torch.randn(2, 4, 5),
        **TOL,
    )
    run_both(F.linear, torch.randn(2, 3, 4), torch.randn(5, 4), torch.randn(5), **TOL)
    run_both(F.linear, torch.randn(3, 4), torch.randn(5, 4), **TOL)


def test_matrix_product_errors():
    a = torch.randn(2, 3)
    tpu_a, tpu_b = a.to("tpu"), torch.randn(4, 5, device="tpu")
    message = r"^mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)$"
    with pytest.raises(RuntimeError, match=message):
        torch.mm(tpu_a, tpu_b)
    same_error(torch.mm, a, torch.randn(4, 5))
    same_error(torch.mm, a, torch.randn(3))
    same_error(torch.mm, torch.randn(3), a)
    same_error(torch.mm, a, torch.randn(3, 4).long())
    same_error(torch.mm, a.bool(), torch.ones(3, 4).bool())
    same_error(torch.bmm, torch.randn(2, 2, 3), torch.randn(2, 4, 5))
    same_error(torch.bmm, torch.randn(2, 3), torch.randn(3, 3, 5))
    same_error(torch.bmm, torch.randn(2, 2, 3), torch.randn(2, 3, 5).long())
    same_error(torch.addmm, torch.randn(3), a, torch.randn(3, 4))
    same_error(torch.addmm, torch.randn(4), a, torch.randn(4, 4))
    same_error(torch.addmm, torch.randn(4), a, torch.randn(3))
    same_error(torch.addmm, torch.randn(4).long(), a, torch.randn(3, 4))
    same_error(torch.addmm, torch.randn(4), a.double(), torch.randn(3, 4))
    same_error(torch.baddbmm, torch.randn(3), torch.randn(2, 2, 3), torch.randn(2, 3, 4))
    same_error(
        torch.baddbmm, torch.randn(2, 2, 4).long(), torch.randn(2, 2, 3), torch.randn(2, 3, 4)
    )
    same_error(
        torch.baddbmm, torch.randn(2, 2, 4), torch.randn(2, 2, 3), torch.randn(2, 3, 4).long()
    )
    same_error(torch.addbmm, torch.randn(2, 4), torch.randn(2, 2, 3), torch.randn(2, 4, 4))
    same_error(torch.addbmm, torch.randn(2, 4), torch.randn(2, 2, 3), torch.randn(3, 3, 4))
    same_error(torch.addmv, torch.randn(2), a, torch.randn(4))
    same_error(torch.addmv, torch.randn(2), a, torch.randn(3, 1))
    same_error(torch.addmv, torch.randn(2).long(), a, torch.randn(3))
    same_error(torch.mv, a, torch.randn(3).long())
    same_error(torch.mv, torch.randn(3), torch.randn(3))
    same_error(torch.dot, torch.randn(3), torch.randn(4))
    same_error(torch.dot, torch.randn(3, 1), torch.randn(4))
    same_error(torch.dot, torch.randn(3), torch.randn(3).long())
    same_error(torch.dot, torch.ones(3).bool(), torch.ones(3).bool())
    same_error(torch.addr, torch.randn(3, 4), torch.randn(3, 1), torch.randn(4))
    same_error(lambda s, x, y: torch.addr(s, x, y, beta=0.5), torch.ones(3, 4).long(),
               torch.ones(3).long(), torch.ones(4).long())


@pytest.mark.parametrize("bias", [True, False])
def test_linear_grad(bias):
    b = torch.randn(5) if bias else None
    grads_close(F.linear, torch.randn(3, 4), torch.randn(5, 4), *([b] if bias else []))
    grads_close(F.linear, torch.randn(2, 3, 4), torch.randn(5, 4), *([b] if bias else []))


def test_matrix_product_grads():
    grads_close(torch.mm, torch.randn(3, 4), torch.randn(4, 5))
    grads_close(torch.bmm, torch.randn(2, 3, 4), torch.randn(2, 4, 5))
    grads_close(lambda s, x, y: torch.addmm(s, x, y, beta=0.5, alpha=2), torch.randn(5),
                torch.randn(3, 4), torch.randn(4, 5))
    grads_close(lambda s, x, y: torch.baddbmm(s, x, y, beta=0.5, alpha=2), torch.randn(3, 5),
                torch.randn(2, 3, 4), torch.randn(2, 4, 5))
    grads_close(torch.mv, torch.randn(3, 4), torch.randn(4))
    grads_close(torch.dot, torch.randn(4), torch.randn(4))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_products_round_once(dtype):
    # Found by the OpInfo sweep: CPU accumulates half-precision products (and the
    # bias of addmm) in float32 and rounds once; so must we.
    torch.manual_seed(0)
    a, w, b = torch.randn(8, 3), torch.randn(4, 3), torch.randn(4)
    a, w, b = a.to(dtype), w.to(dtype), b.to(dtype)
    expected = torch.nn.functional.linear(a, w, b)
    with no_fallback():
        out = torch.nn.functional.linear(a.to("tpu"), w.to("tpu"), b.to("tpu"))
    assert_close_cpu(out, expected, rtol=0, atol=0)
    x, y = torch.randn(2, 5, 7).to(dtype), torch.randn(2, 7, 3).to(dtype)
    assert_close_cpu(torch.bmm(x.to("tpu"), y.to("tpu")), torch.bmm(x, y), rtol=0, atol=0)


def test_linalg_cross():
    run_both(torch.linalg.cross, torch.randn(4, 3), torch.randn(4, 3))
    run_both(
        lambda a, b: torch.linalg.cross(a, b, dim=0), torch.randn(3, 1, 5), torch.randn(3, 4, 5)
    )
    run_both(lambda a, b: torch.cross(a, b, dim=1), torch.randint(-3, 3, (2, 3)),
             torch.randint(-3, 3, (2, 3)))
    run_both(torch.linalg.cross, torch.randn(3, 4).t(), torch.randn(4, 3))
    same_error(torch.linalg.cross, torch.randn(2, 2), torch.randn(2, 2))
    same_error(torch.linalg.cross, torch.randn(2, 3), torch.randn(3))
    same_error(torch.linalg.cross, torch.randn(2, 3), torch.randn(4, 3))
    same_error(torch.linalg.cross, torch.randn(2, 3), torch.randn(2, 3).double())


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist(p):
    a, b = torch.randn(2, 5, 3), torch.randn(2, 4, 3)
    grads_close(lambda x, y: torch.cdist(x, y, p=p), a, b)
    grads_close(
        lambda x, y: torch.cdist(x, y, p=p), a[0], torch.randn(3, 1, 6, 3)
    )  # broadcast batch
    grads_close(lambda x, y: torch.cdist(x, y, p=p, compute_mode="donot_use_mm_for_euclid_dist"),
                torch.randn(30, 3), torch.randn(27, 3))
    run_both(lambda x, y: torch.cdist(x, y, p=p), torch.randn(2, 3, 5).transpose(1, 2), b[:, ::2],
             **TOL)
    run_both(lambda x, y: torch.cdist(x, y, p=p), torch.randn(0, 3), torch.randn(4, 3), **TOL)


def test_cdist_mm_path_and_errors():
    a, b = torch.randn(30, 4), torch.randn(27, 4)
    run_both(lambda x, y: A._cdist_forward(x, y, 2.0, None), a, b, rtol=1e-4, atol=1e-4)
    run_both(lambda x, y: A._cdist_forward(x, y, 2.0, 1), a[:3], b[:4], rtol=1e-4, atol=1e-4)
    same_error(lambda x, y: torch.cdist(x, y), torch.randn(3, 4), torch.randn(3, 5))
    same_error(lambda x, y: torch.cdist(x, y, p=-1), torch.randn(3, 4), torch.randn(3, 4))
    same_error(lambda x, y: torch.cdist(x, y), torch.randn(3), torch.randn(3, 3))
    same_error(
        lambda x, y: torch.cdist(x, y), torch.ones(3, 4, dtype=torch.long), torch.randn(3, 4)
    )


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
def test_pdist(p):
    grads_close(lambda x: F.pdist(x, p=p), torch.randn(6, 3))
    grads_close(lambda x: F.pdist(x, p=p), torch.randn(2, 5))
    run_both(lambda x: F.pdist(x, p=p), torch.randn(1, 3), **TOL)
    run_both(lambda x: F.pdist(x, p=p), torch.randn(5, 4).t(), **TOL)
    same_error(lambda x: F.pdist(x), torch.randn(3))
    same_error(lambda x: F.pdist(x, p=-1.0), torch.randn(3, 3))

"""Matrix decompositions on tpu compared with CPU PyTorch (LAPACK) with no CPU
fallback: Cholesky, triangular solves, QR (geqrf, householder_product, ormqr),
LU with partial pivoting (lu_factor, lu, lu_unpack, lu_solve, solve, inv, det,
slogdet), eigh, the SVD, lstsq and matrix_exp.

Factors that are unique (Cholesky, QR with LAPACK's reflector convention, LU
with LAPACK's pivot rule) are compared entry by entry. Eigenvectors and
singular vectors are unique only up to sign: tpu's come from a Jacobi
eigensolver, so their signs may differ from LAPACK's; those tests compare
sign-normalised vectors and check the reconstruction instead."""

import pytest
import torch

import torchtpu

from _util import assert_close_cpu, no_fallback, run_both, same_error

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

BATCHES = [(), (2,), (2, 3)]


def spd(batch, n, dtype=torch.float32):
    a = torch.randn(*batch, n, n, dtype=dtype)
    return a @ a.mT + n * torch.eye(n, dtype=dtype)


def well_conditioned(batch, m, n, dtype=torch.float32):
    return torch.randn(*batch, m, n, dtype=dtype) + 3 * torch.eye(m, n, dtype=dtype)


# --------------------------------------------------------------------- Cholesky


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_family(batch, upper):
    a = spd(batch, 4)
    run_both(lambda x: torch.linalg.cholesky(x, upper=upper), a)
    run_both(lambda x: torch.linalg.cholesky_ex(x, upper=upper), a)
    run_both(lambda x: torch.cholesky(x, upper=upper), a)
    factor = torch.linalg.cholesky(a, upper=upper)
    run_both(lambda f: torch.cholesky_inverse(f, upper=upper), factor)
    b = torch.randn(*batch, 4, 2)
    run_both(lambda x, f: torch.cholesky_solve(x, f, upper=upper), b, factor)


def test_cholesky_reads_one_triangle_and_non_contiguous():
    a = spd((), 5)
    junk = a + torch.triu(torch.randn(5, 5), 1) * 10  # upper triangle ignored
    run_both(torch.linalg.cholesky, junk)
    run_both(lambda x: torch.linalg.cholesky(x.mT, upper=True), junk)
    run_both(torch.linalg.cholesky, torch.zeros(0, 0))


def test_cholesky_not_positive_definite():
    a = torch.tensor([[1.0, 2.0], [2.0, 1.0]])
    with no_fallback():
        info = torch.linalg.cholesky_ex(a.to("tpu")).info
    assert info.item() == 2
    same_error(torch.linalg.cholesky, a)
    same_error(torch.linalg.cholesky, torch.stack([torch.eye(2), -torch.eye(2)]))
    same_error(lambda x: torch.linalg.cholesky_ex(x, check_errors=True), a)
    same_error(torch.cholesky, a)


def _raises_at_call(fn, *inputs):
    """fn raises CPU's error type and message at the call itself on tpu (no sync
    after it): the APIs that promise to raise on a failed factorization."""
    with pytest.raises(Exception) as cpu:
        fn(*inputs)
    with pytest.raises(type(cpu.value)) as tpu:
        fn(*[x.to("tpu") for x in inputs])
    assert str(cpu.value) == str(tpu.value)


def test_check_errors_raise_at_the_call():
    not_pd = torch.tensor([[1.0, 2.0], [2.0, 1.0]])
    _raises_at_call(lambda x: torch.linalg.cholesky_ex(x, check_errors=True), not_pd)
    _raises_at_call(lambda x: torch.linalg.cholesky_ex(x, check_errors=True),
                    torch.stack([torch.eye(2), not_pd]))
    _raises_at_call(torch.linalg.cholesky, not_pd)
    singular = torch.zeros(3, 2, 2)
    _raises_at_call(lambda x: torch.linalg.inv_ex(x, check_errors=True), singular)
    _raises_at_call(lambda x: torch.linalg.inv_ex(x, check_errors=True), singular[0])
    _raises_at_call(torch.linalg.inv, singular[0])
    # Nothing is left pending for a later read to raise.
    assert torch.ones(2, device="tpu").sum().item() == 2


def test_cholesky_bad_inputs():
    same_error(torch.linalg.cholesky, torch.randn(2, 3))
    same_error(torch.linalg.cholesky, torch.randn(3))
    same_error(torch.linalg.cholesky, torch.ones(2, 2, dtype=torch.int64))
    same_error(torch.linalg.cholesky, torch.eye(2, dtype=torch.float16))


# ------------------------------------------------------------------ triangular


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(upper, left, unit):
    a = well_conditioned((2,), 4, 4)
    b = torch.randn(2, 4, 3) if left else torch.randn(2, 3, 4)
    run_both(lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left,
                                                        unitriangular=unit), a, b)


@pytest.mark.parametrize("transpose", [False, True])
def test_triangular_solve_broadcast(transpose):
    a = well_conditioned((), 4, 4)
    b = torch.randn(3, 4, 2)
    run_both(lambda y, x: torch.triangular_solve(y, x, upper=False, transpose=transpose), b, a)
    run_both(lambda y, x: torch.triangular_solve(y, x.mT), b, a)
    same_error(lambda x, y: torch.linalg.solve_triangular(x, y, upper=True),
               torch.randn(3, 3), torch.randn(2, 4))


# ------------------------------------------------------------------------- QR


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(shape, mode):
    a = torch.randn(shape)
    run_both(lambda x: torch.linalg.qr(x, mode=mode), a)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (0, 3)])
def test_geqrf_householder_ormqr(shape):
    a = torch.randn(shape)
    run_both(torch.geqrf, a)
    if shape[0] >= shape[1] and shape[0] > 0:
        packed, tau = torch.geqrf(a)
        run_both(torch.linalg.householder_product, packed, tau)
        c = torch.randn(shape[0], 2)
        for transpose in (False, True):
            run_both(lambda p, t, x: torch.ormqr(p, t, x, transpose=transpose), packed, tau, c)
            run_both(lambda p, t, x: torch.ormqr(p, t, x.mT, left=False, transpose=transpose),
                     packed, tau, c)


def test_householder_product_out_dtype_message():
    """An int out= is refused with checkLinalgCompatibleDtype's text under the
    public name, as on CPU (orgqr is the same op)."""
    packed, tau = torch.geqrf(torch.randn(4, 3))
    out = torch.empty(4, 3, dtype=torch.int)
    same_error(lambda p, t, o: torch.linalg.householder_product(p, t, out=o), packed, tau, out)
    same_error(lambda p, t, o: torch.orgqr(p, t, out=o), packed, tau, out)


# ------------------------------------------------------------------------- LU


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 4), (0, 0)])
def test_lu_factor_and_unpack(shape):
    a = torch.randn(shape)
    run_both(torch.linalg.lu_factor, a)
    run_both(torch.linalg.lu_factor_ex, a)
    run_both(torch.linalg.lu, a)
    lu, piv = torch.linalg.lu_factor(a)
    run_both(torch.lu_unpack, lu, piv)
    run_both(lambda x, p: torch.lu_unpack(x, p, unpack_data=False), lu, piv)


def test_lu_singular_and_pivot_ties():
    a = torch.tensor([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [1.0, 1.0, 1.0]])
    run_both(torch.linalg.lu_factor_ex, a)
    run_both(torch.linalg.lu_factor_ex, torch.zeros(2, 3, 3))
    same_error(lambda x: torch.linalg.lu_factor_ex(x, check_errors=True), torch.zeros(3, 3))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(left, adjoint):
    a = torch.randn(2, 4, 4)
    b = torch.randn(2, 4, 3) if left else torch.randn(2, 3, 4)
    lu, piv = torch.linalg.lu_factor(a)
    run_both(lambda x, p, y: torch.linalg.lu_solve(x, p, y, left=left, adjoint=adjoint), lu, piv, b)


@pytest.mark.parametrize("batch", BATCHES)
def test_det_slogdet_inv_solve(batch):
    a = torch.randn(*batch, 4, 4)
    run_both(torch.linalg.det, a)
    run_both(torch.linalg.det, a.mT)
    run_both(torch.linalg.slogdet, a)
    run_both(torch.logdet, a @ a.mT)
    run_both(torch.linalg.inv, a)
    run_both(torch.linalg.inv_ex, a)
    run_both(torch.linalg.solve, a, torch.randn(*batch, 4))
    run_both(torch.linalg.solve, a, torch.randn(*batch, 4, 2))
    run_both(lambda x, y: torch.linalg.solve(x, y, left=False), a, torch.randn(*batch, 2, 4))
    run_both(lambda x: torch.linalg.matrix_power(x, -2), a)


def test_singular_matrices():
    s = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    run_both(torch.linalg.det, s)
    run_both(torch.linalg.slogdet, s)
    same_error(torch.linalg.inv, s)
    same_error(torch.linalg.inv, torch.zeros(2, 3, 3))
    same_error(torch.linalg.solve, torch.zeros(3, 3), torch.ones(3))
    same_error(torch.linalg.det, torch.randn(2, 3))
    same_error(torch.linalg.inv, torch.eye(3, dtype=torch.float16))


def test_large_lu_falls_back_counted():
    # Above 64 columns the LU loop touches the whole matrix each column and
    # runs slower than the fallback's copies: these ops run through the counted
    # CPU fallback instead (kMaxOnDevice).
    a = torch.randn(80, 80) + 10 * torch.eye(80)
    b = torch.randn(80, 2)
    torchtpu.metrics.reset()
    for fn in (torch.linalg.det, torch.linalg.inv, lambda x: torch.linalg.solve(x, b.to(x.device)),
               lambda x: torch.linalg.lu_factor(x).LU):
        torch.testing.assert_close(fn(a.to("tpu")).cpu(), fn(a), rtol=1e-4, atol=1e-4)
    assert torchtpu.metrics.fallback_counts()


# ----------------------------------------------------------------- eigh / SVD


def normalise_columns(v):
    """Flips each column so that its largest-magnitude entry is positive."""
    idx = v.abs().argmax(dim=-2, keepdim=True)
    return v * torch.sign(torch.gather(v, -2, idx))


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(batch, uplo):
    a = torch.randn(*batch, 5, 5)
    run_both(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a)
    w, v = torch.linalg.eigh(a, UPLO=uplo)
    with no_fallback():
        tw, tv = torch.linalg.eigh(a.to("tpu"), UPLO=uplo)
        tw, tv = tw.cpu(), tv.cpu()
    torch.testing.assert_close(tw, w)
    torch.testing.assert_close(normalise_columns(tv), normalise_columns(v), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("spectrum", ["random", "cluster", "near_cluster", "repeated"])
def test_eigh_float64_as_accurate_as_lapack(spectrum):
    """XLA's Jacobi expander stops at an off-diagonal norm of ~1e-8 of the
    norm (A reconstructed to 1e-8); eigh refines it to LAPACK's 1e-15, near-
    degenerate groups of eigenvalues included (linalg_eigh_jacobi.cc)."""
    g = torch.Generator().manual_seed(0)
    n = 12
    q, _ = torch.linalg.qr(torch.randn(3, n, n, dtype=torch.float64, generator=g))
    head = {"random": [], "cluster": [1.0, 1.0, 1.0 + 1e-12],
            "near_cluster": [1.0, 1.0 + 1e-9, 1.0 + 2e-9], "repeated": [3.0, 3.0, 3.0]}[spectrum]
    tail = torch.randn(n - len(head), dtype=torch.float64, generator=g) * 4
    ev = torch.cat([torch.tensor(head, dtype=torch.float64), tail])
    a = q @ torch.diag(ev) @ q.mT
    a = torch.tril(a) + torch.tril(a, -1).mT  # exactly symmetric
    w, v = torch.linalg.eigh(a)
    with no_fallback():
        tw, tv = (t.cpu() for t in torch.linalg.eigh(a.to("tpu")))
    scale = a.abs().amax()
    residual = (tv @ torch.diag_embed(tw) @ tv.mT - a).abs().amax() / scale
    cpu_residual = (v @ torch.diag_embed(w) @ v.mT - a).abs().amax() / scale
    assert residual <= max(20 * cpu_residual, 1e-14), (residual, cpu_residual)
    eye = torch.eye(n, dtype=torch.float64)
    assert (tv.mT @ tv - eye).abs().amax() < 1e-14
    assert ((tw - w).abs() / ev.abs().amax()).amax() < 1e-14
    assert bool((tw[..., 1:] >= tw[..., :-1]).all())


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 4)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(shape, full):
    a = torch.randn(shape)
    run_both(torch.linalg.svdvals, a)
    u, s, vh = torch.linalg.svd(a, full_matrices=full)
    with no_fallback():
        tu, ts, tvh = (t.cpu() for t in torch.linalg.svd(a.to("tpu"), full_matrices=full))
    assert (tu.shape, ts.shape, tvh.shape) == (u.shape, s.shape, vh.shape)
    torch.testing.assert_close(ts, s)
    k = s.shape[-1]
    torch.testing.assert_close(tu[..., :k] * ts.unsqueeze(-2) @ tvh[..., :k, :], a,
                               atol=1e-5, rtol=1e-5)
    eye_u = torch.eye(tu.shape[-1]).expand(tu.mT.shape[:-2] + (tu.shape[-1],) * 2)
    torch.testing.assert_close(tu.mT @ tu, eye_u, atol=1e-5, rtol=0)
    torch.testing.assert_close(normalise_columns(tu[..., :k]), normalise_columns(u[..., :k]),
                               atol=1e-4, rtol=1e-4)


def test_svd_rank_deficient_and_derived():
    a = torch.randn(6, 2) @ torch.randn(2, 4)
    run_both(torch.linalg.matrix_rank, a)
    run_both(torch.linalg.pinv, a)
    run_both(lambda x: torch.linalg.matrix_norm(x, "nuc"), a)
    run_both(lambda x: torch.linalg.matrix_norm(x, 2), a)
    run_both(torch.linalg.cond, torch.randn(3, 4, 4))
    run_both(lambda x: torch.linalg.pinv(x, hermitian=True), spd((), 4))


def test_backward():
    a = spd((), 4).requires_grad_()
    ta = a.detach().to("tpu").requires_grad_()
    for fn in (torch.linalg.det, lambda x: torch.linalg.inv(x).sum(),
               lambda x: torch.linalg.cholesky(x).sum(), lambda x: torch.linalg.svdvals(x).sum(),
               lambda x: torch.linalg.eigvalsh(x).sum(), lambda x: torch.linalg.qr(x).R.sum()):
        (g,) = torch.autograd.grad(fn(a), a)
        with no_fallback():
            (tg,) = torch.autograd.grad(fn(ta), ta)
        assert_close_cpu(tg, g, atol=1e-4, rtol=1e-4)


# ---------------------------------------------------------------- lstsq / exp


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 3), (2, 5, 3)])
@pytest.mark.parametrize("driver", ["gels", "gelsy", "gelsd", "gelss"])
def test_lstsq(shape, driver):
    a = well_conditioned(shape[:-2], *shape[-2:])
    b = torch.randn(*shape[:-1], 2)
    run_both(lambda x, y: torch.linalg.lstsq(x, y, driver=driver), a, b)


def test_lstsq_rank_deficient_and_vector():
    a = torch.randn(5, 2) @ torch.randn(2, 3)
    run_both(lambda x, y: torch.linalg.lstsq(x, y, driver="gelsd"), a, torch.randn(5, 2))
    run_both(lambda x, y: torch.linalg.lstsq(x, y).solution, a, torch.randn(5, 2))
    run_both(torch.linalg.lstsq, torch.randn(4, 3), torch.randn(4))


@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (3, 5, 5), (0, 0)])
@pytest.mark.parametrize("scale", [0.01, 1.0, 20.0])
def test_matrix_exp(shape, scale):
    # Compared with CPU's float64 result: CPU's own float32 result for a batch
    # (degree-18 path) is up to 2e-3 off it, tpu's (float64 inside) ~1e-7.
    a = torch.randn(shape) * scale
    with no_fallback():
        actual = torch.linalg.matrix_exp(a.to("tpu")).cpu()
    expected = torch.linalg.matrix_exp(a.double()).float()
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_matrix_exp_of_large_norm_squares_as_often_as_cpu():
    # Rotation generators [[0, v], [-v, 0]]: v = 1e13 needs 44 squarings of
    # the Taylor polynomial; capped at 40, tpu returned another rotation
    # (cos -0.917 where CPU gives 0.957). Each squaring doubles the rounding
    # error, so CPU's own result is only ~2^44 eps = 2e-3 from the true one.
    # A batch mixes it with a matrix that needs no squaring.
    v = 1e13
    a = torch.tensor([[[0.0, v], [-v, 0.0]], [[0.1, 0.2], [0.3, 0.4]]], dtype=torch.float64)
    with no_fallback():
        actual = torch.linalg.matrix_exp(a.to("tpu")).cpu()
    expected = torch.linalg.matrix_exp(a)
    torch.testing.assert_close(actual[0], expected[0], rtol=0, atol=1e-2)
    torch.testing.assert_close(actual[1], expected[1], rtol=1e-12, atol=1e-12)
    # still a rotation: Q^T Q = I
    torch.testing.assert_close(actual[0].T @ actual[0], torch.eye(2, dtype=torch.float64),
                               rtol=0, atol=1e-2)

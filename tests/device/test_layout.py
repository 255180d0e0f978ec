"""Result layouts follow PyTorch's rules: a pointwise op's new output takes its
inputs' memory layout (TensorIterator), nonzero / argwhere are column-major.

Strides are compared with CPU PyTorch's for the same inputs, together with the
values, so a view() that CPU refuses is refused on tpu too.
"""

import pytest
import torch
import torch.nn.functional as F

from _util import assert_close_cpu, no_fallback

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md


def layouts():
    torch.manual_seed(0)
    base = torch.randn(2, 3, 4, 5)
    return {
        "transposed": torch.randn(3, 4).t(),
        "permuted": torch.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1),
        "channels_last": base.to(memory_format=torch.channels_last),
        "channels_last_3d": torch.randn(2, 3, 2, 3, 4).to(memory_format=torch.channels_last_3d),
        "sliced": base[:, 1:, ::2],              # not dense: TensorIterator's ordering
        "expanded": torch.randn(3, 1).expand(3, 4),
        "size_one_dims": torch.randn(4, 1, 3).permute(2, 1, 0),
        "contiguous": base,
    }


def to_tpu_keep(t):
    """The same view on tpu: same sizes, strides and offset over a tpu copy of its base."""
    src = t._base if t._base is not None else t
    dev = src.to("tpu")
    return dev.as_strided(t.size(), t.stride(), t.storage_offset())


UNARY = {
    "sin": torch.sin, "neg": torch.neg, "mul_scalar": lambda t: t * 2,
    "add_scalar": lambda t: t + 1, "relu": torch.relu, "exp": torch.exp,
    "to_double": lambda t: t.double(), "gt": lambda t: t > 0, "clone": torch.clone,
    "empty_like": lambda t: torch.empty_like(t), "abs": torch.abs,
    "where": lambda t: torch.where(t > 0, t, 0.0), "clamp": lambda t: t.clamp(-0.5, 0.5),
}


@pytest.mark.parametrize("layout", sorted(layouts()))
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_results_keep_the_input_layout(layout, op):
    t = layouts()[layout]
    dev = to_tpu_keep(t)
    assert dev.stride() == t.stride()
    expected = UNARY[op](t)
    with no_fallback():
        got = UNARY[op](dev)
    assert got.stride() == expected.stride(), (got.stride(), expected.stride())
    if op != "empty_like":
        assert_close_cpu(got, expected)


@pytest.mark.parametrize("layout", sorted(layouts()))
def test_binary_results_follow_tensor_iterator(layout):
    t = layouts()[layout]
    dev = to_tpu_keep(t)
    others = [t, t.contiguous(), torch.randn(t.shape[-1]), torch.tensor(2.0)]
    for o in others:
        od = to_tpu_keep(o) if o.dim() > 0 else o
        for f in (torch.add, torch.mul, torch.maximum):
            expected = f(t, o)
            with no_fallback():
                got = f(dev, od)
            assert got.stride() == expected.stride(), (f, o.shape, got.stride(),
                                                        expected.stride())
            assert_close_cpu(got, expected)
            # The other operand first: ties go to the first input's order.
            expected = f(o, t)
            with no_fallback():
                got = f(od, dev)
            assert got.stride() == expected.stride(), (f, o.shape, got.stride(),
                                                        expected.stride())


def test_handed_case_01_view_refused_reshape_copies():
    t = torch.arange(6.0, device="tpu").reshape(2, 3).t()
    for r in [t * 2, t + t, torch.sin(t), t.clone(), torch.empty_like(t)]:
        assert r.stride() == (1, 3)
    p = torch.arange(24.0).reshape(2, 3, 4).to("tpu").permute(2, 0, 1)
    assert (p + 1).stride() == p.stride() == (1, 12, 4)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        (t * 2).view(-1)
    assert (t * 2).reshape(-1).cpu().tolist() == [0.0, 6.0, 2.0, 8.0, 4.0, 10.0]
    # In-place writes into such a result land where CPU's would.
    r = t * 2
    r.view(torch.float32).as_strided((6,), (1,))[1] = -1.0
    ref = torch.arange(6.0).reshape(2, 3).t() * 2
    ref.as_strided((6,), (1,))[1] = -1.0
    assert_close_cpu(r, ref)


def test_out_and_inplace_keep_their_own_layout():
    t = torch.randn(3, 4).t()
    dev = to_tpu_keep(t)
    out = torch.empty(4, 3, device="tpu")
    torch.add(dev, 1, out=out)
    assert out.stride() == (3, 1)
    assert_close_cpu(out, t + 1)
    dev.mul_(2)
    assert dev.stride() == t.stride()
    assert_close_cpu(dev, t * 2)



@pytest.mark.parametrize("start", [(0,), (5,), (2, 3)])
@pytest.mark.parametrize("op", ["add", "exp", "mul_tensor"])
def test_a_resized_out_takes_tensor_iterators_layout(start, op):
    # TensorIterator restrides an out= tensor it has to resize to the result's
    # computed layout (here the transposed input's), warning as CPU does when
    # the out had elements; an out of the right shape keeps its own strides.
    t = torch.randn(2, 3).t()
    fns = {"add": lambda a, o: torch.add(a, 1, out=o), "exp": lambda a, o: torch.exp(a, out=o),
           "mul_tensor": lambda a, o: torch.mul(a, a, out=o)}
    expected = torch.empty(start)
    fns[op](t, expected)
    out = torch.empty(start, device="tpu")
    with no_fallback():
        fns[op](to_tpu_keep(t), out)
    assert out.stride() == expected.stride() == (1, 3)
    assert_close_cpu(out, expected)



def _long():
    return torch.empty(0, dtype=torch.long)


OUT_FORMS = {
    # CPU: sort, addr and glu restride a resized out; flip / index_put / put's
    # out= forms resize it row-major.
    "sort": lambda t, o: torch.sort(t, 1, out=(o, _long().to(t.device)))[0],
    "sort_stable": lambda t, o: torch.sort(t, dim=0, stable=True, out=(o, _long().to(t.device)))[1],
    "addr": lambda t, o: torch.addr(
        t, torch.ones(4, device=t.device), torch.ones(3, device=t.device), out=o
    ),
    "glu": lambda t, o: torch._C._nn.glu(t, 0, out=o),
    "flip": lambda t, o: torch.ops.aten.flip.out(t, [0], out=o),
    "index_put": lambda t, o: torch.ops.aten.index_put.out(
        t, (torch.tensor([0], device=t.device),), torch.tensor(1.0, device=t.device), out=o
    ),
}


@pytest.mark.parametrize("op", sorted(OUT_FORMS))
def test_resized_outs_of_non_pointwise_ops_take_cpus_layout(op):
    t = torch.arange(12.0).reshape(3, 4).t()
    expected = OUT_FORMS[op](t, torch.empty(0))
    with no_fallback():
        got = OUT_FORMS[op](to_tpu_keep(t), torch.empty(0, device="tpu"))
    assert got.stride() == expected.stride(), (got.stride(), expected.stride())
    assert_close_cpu(got, expected)

def test_resizing_an_out_with_elements_warns_as_on_cpu():
    t = to_tpu_keep(torch.randn(2, 3).t())
    with pytest.warns(UserWarning, match="was resized"):
        torch.sin(t, out=torch.empty(5, device="tpu"))

@pytest.mark.parametrize("shape", [(2, 3), (0, 2), (5,), (), (2, 1, 3)])
def test_nonzero_and_argwhere_are_column_major(shape):
    x = (torch.arange(int(torch.tensor(shape).prod().item()) if shape else 1) % 3)
    x = x.reshape(shape)
    for f in (torch.nonzero, torch.argwhere):
        expected = f(x)
        with no_fallback():
            got = f(x.to("tpu"))
        assert got.shape == expected.shape and got.stride() == expected.stride(), (
            f, got.stride(), expected.stride())
        assert_close_cpu(got, expected)


# Ops whose CPU layout is not what their `pointwise` tag says: TensorIterator
# kernels ATen leaves untagged, empty_like(self)'s Preserve (flip, sort), and
# masked_fill, tagged pointwise but computed on a contiguous clone. The
# fuzzer found floor_divide, flip and sort (seed 0 programs 151, 351, 1431).
UNTAGGED = {
    "floor_divide_scalar": lambda t: torch.floor_divide(t, 2.0),
    "floor_divide_tensor": lambda t: torch.floor_divide(t, t + 3),
    "div_floor": lambda t: torch.div(t, 2.0, rounding_mode="floor"),
    "remainder": lambda t: torch.remainder(t, 2.0),
    "hardswish": torch.nn.functional.hardswish,
    "prelu": lambda t: torch.nn.functional.prelu(t, torch.tensor([0.25], device=t.device)),
    "dropout_mask": lambda t: torch.native_dropout(t, 0.0, True)[1],
    "flip": lambda t: torch.flip(t, [0]),
    "sort_values": lambda t: torch.sort(t, 0).values,
    "sort_indices": lambda t: torch.sort(t, dim=0, stable=True).indices,
    "argsort": lambda t: torch.argsort(t, dim=0, stable=True),
    "masked_fill": lambda t: t.masked_fill(t > 0, 1.0),
    "rsub": lambda t: torch.rsub(t, t * 2),
    # CPU runs sub(other, self): other's strides decide (found by the dispatch
    # cache's test, rsub(x, x.t()) on a square x).
    "rsub_other_decides": lambda t: torch.rsub(t.contiguous(), t * 2),
    "huber_loss": lambda t: torch.nn.functional.huber_loss(t, t * 0.5, reduction="none"),
    "index_put": lambda t: t.index_put((torch.tensor([0, 1], device=t.device),),
                                       torch.tensor(5.0, device=t.device)),
    "put": lambda t: t.put(torch.tensor([0, 2], device=t.device),
                           torch.tensor([1.0, 2.0], device=t.device)),
    "polar": lambda t: torch.polar(t.abs(), t),
}


@pytest.mark.parametrize("layout", ["transposed", "permuted", "sliced", "channels_last"])
@pytest.mark.parametrize("op", sorted(UNTAGGED))
def test_untagged_ops_take_cpus_layout(layout, op):
    t = layouts()[layout]
    expected = UNTAGGED[op](t)
    with no_fallback():
        got = UNTAGGED[op](to_tpu_keep(t))
    assert got.stride() == expected.stride(), (got.stride(), expected.stride())
    assert_close_cpu(got, expected)


def test_mixed_layout_program_of_the_fuzzer():
    # seed 0 program 1431: a flipped permuted bool against a broadcast row.
    a = torch.tensor([[True, False, True, True], [False, False, True, False]]).t().contiguous().t()
    b = torch.randn(1, 4)
    expected = torch.flip(a, [1]) < b
    got = torch.flip(to_tpu_keep(a), [1]) < b.to("tpu")
    assert got.stride() == expected.stride()
    assert_close_cpu(got, expected)


def _spd(*shape):
    torch.manual_seed(1)
    a = torch.randn(*shape, dtype=torch.float64)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)


# LAPACK writes these results in place in Fortran order, so CPU returns them
# column-major whatever the input's layout; pivots, info, tau, eigenvalues and
# linalg.lu's P, L, U stay row-major. `exact` compares values too (the others
# are defined up to signs and are compared by test_ops_linalg).
LINALG = {
    "cholesky": (lambda a: torch.linalg.cholesky(a), True),
    "cholesky_ex_upper": (lambda a: torch.linalg.cholesky_ex(a, upper=True), True),
    "cholesky_inverse": (lambda a: torch.cholesky_inverse(torch.linalg.cholesky(a)), True),
    "cholesky_solve": (lambda a: torch.cholesky_solve(a[..., :2], torch.linalg.cholesky(a)), True),
    "qr": (lambda a: torch.linalg.qr(a), False),
    "qr_wide": (lambda a: torch.linalg.qr(a[..., :2, :]), False),
    "geqrf": (lambda a: torch.geqrf(a), False),
    "lu_factor": (lambda a: torch.linalg.lu_factor(a), True),
    "lu": (lambda a: torch.linalg.lu(a), True),
    "lu_solve": (lambda a: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), a[..., :2]), True),
    "lu_solve_right": (lambda a: torch.linalg.lu_solve(*torch.linalg.lu_factor(a),
                                                       a[..., :2, :], left=False), True),
    "inv": (lambda a: torch.linalg.inv(a), True),
    "inv_ex": (lambda a: torch.linalg.inv_ex(a), True),
    "solve": (lambda a: torch.linalg.solve(a, a[..., :2]), True),
    "solve_vector": (lambda a: torch.linalg.solve(a, a[..., 0]), True),
    "solve_right": (lambda a: torch.linalg.solve(a, a[..., :2, :], left=False), True),
    "eigh": (lambda a: torch.linalg.eigh(a), False),
    "lstsq": (lambda a: torch.linalg.lstsq(a, a[..., :2]).solution, True),
    "triangular_solve": (lambda a: torch.triangular_solve(a[..., :2], a), True),
    "solve_triangular": (lambda a: torch.linalg.solve_triangular(a, a[..., :2], upper=True), True),
    "solve_triangular_right": (lambda a: torch.linalg.solve_triangular(
        a, a[..., :2, :], upper=True, left=False), True),
    "svd": (lambda a: torch.linalg.svd(a), False),
    "slogdet": (lambda a: torch.linalg.slogdet(a), True),
}


def _strides(r):
    return [t.stride() for t in (r if isinstance(r, (tuple, list)) else [r])]


@pytest.mark.parametrize("order", ["row_major", "column_major"])
@pytest.mark.parametrize("op", sorted(LINALG))
def test_linalg_results_take_cpus_column_major_layout(op, order):
    # Batched: the batch strides are checked too (unbatched is the same rule).
    a = _spd(2, 4, 4)
    if order == "column_major":
        a = a.mT.contiguous().mT
    f, exact = LINALG[op]
    expected = f(a)
    with no_fallback():
        got = f(to_tpu_keep(a))
    assert _strides(got) == _strides(expected), (_strides(got), _strides(expected))
    if exact:
        assert_close_cpu(got, expected)



@pytest.mark.parametrize("a_shape, k, driver", [((6, 3), 2, "gels"), ((2, 5, 3), 4, "gels"),
                                                ((3, 5), 2, "gels"), ((7, 2), 1, "gelsd"),
                                                ((5, 1), 3, "gels"), ((2, 5, 1), 3, "gels"),
                                                ((5, 1), 1, "gels")])
def test_lstsq_solution_of_a_tall_a_is_a_view_of_the_taller_buffer(a_shape, k, driver):
    # LAPACK solves in B's column-major buffer of max(m, n) rows; a tall A's
    # solution is its first n rows, so its column stride is m (CPU: (1, 6)
    # for A 6x3), and its storage is the whole buffer.
    torch.manual_seed(0)
    a = torch.randn(*a_shape, dtype=torch.float64)
    b = torch.randn(*a_shape[:-1], k, dtype=torch.float64)
    expected = torch.linalg.lstsq(a, b, driver=driver).solution
    with no_fallback():
        got = torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), driver=driver).solution
    assert got.stride() == expected.stride(), (got.stride(), expected.stride())
    if k > 1:  # (a size-1 column's stride addresses nothing past the rows)
        assert got.untyped_storage().nbytes() == expected.untyped_storage().nbytes()
    assert got.is_contiguous() == expected.is_contiguous()
    assert_close_cpu(got, expected)
    assert_close_cpu(got * 2, expected * 2)


def _fft_inputs():
    torch.manual_seed(2)
    x = torch.randn(3, 4, 6)
    return {"contiguous": x, "column_major": x.permute(2, 1, 0).contiguous().permute(2, 1, 0),
            "permuted": x.transpose(0, 1).contiguous().transpose(0, 1)}


FFT = {
    "fft_dim0": lambda t: torch.fft.fft(t, dim=0),
    "fft_last": lambda t: torch.fft.fft(t),
    "fft_complex_dim1": lambda t: torch.fft.fft(t.to(torch.complex64), dim=1),
    "ifft_complex": lambda t: torch.fft.ifft(t.to(torch.complex64), dim=0),
    "fft2": lambda t: torch.fft.fft2(t.to(torch.complex64), dim=(0, 2)),
    "fftn": lambda t: torch.fft.fftn(t.to(torch.complex64)),
    "rfft_dim0": lambda t: torch.fft.rfft(t, dim=0),
    "rfft_last": lambda t: torch.fft.rfft(t),
    "rfft2": lambda t: torch.fft.rfft2(t),
    "rfftn_02": lambda t: torch.fft.rfftn(t, dim=(2, 0)),
    "irfft_dim1": lambda t: torch.fft.irfft(t.to(torch.complex64), dim=1),
    "irfft2": lambda t: torch.fft.irfft2(t.to(torch.complex64), dim=(0, 1)),
    "irfftn": lambda t: torch.fft.irfftn(t.to(torch.complex64)),
    "hfft_dim0": lambda t: torch.fft.hfft(t.to(torch.complex64), dim=0),
}


@pytest.mark.parametrize("layout", sorted(_fft_inputs()))
@pytest.mark.parametrize("op", sorted(FFT))
def test_fft_results_take_cpus_layout(op, layout):
    t = _fft_inputs()[layout]
    expected = FFT[op](t)
    with no_fallback():
        got = FFT[op](to_tpu_keep(t))
    assert got.stride() == expected.stride(), (got.stride(), expected.stride())
    assert_close_cpu(got, expected, rtol=1e-4, atol=1e-4)


def _cl1d(t):
    return t.transpose(1, 2).contiguous().transpose(1, 2)


def _cl(t):
    return t.to(memory_format=torch.channels_last)


# Convolutions and pools: channels-last in, channels-last out (the input or,
# for a convolution, the weight suggesting it); a 1d conv reads the weight's
# layout only, a 1d pool runs as a 2d pool over [N, C, 1, L].
NN = {
    "conv1d_weight_cl": (lambda: torch.randn(2, 3, 8), lambda x, w: F.conv1d(x, w),
                         lambda: _cl1d(torch.randn(4, 3, 3))),
    "conv1d_input_cl": (lambda: _cl1d(torch.randn(2, 3, 8)), lambda x, w: F.conv1d(x, w),
                        lambda: torch.randn(4, 3, 3)),
    "conv_transpose1d_weight_cl": (lambda: torch.randn(2, 3, 8),
                                   lambda x, w: F.conv_transpose1d(x, w),
                                   lambda: _cl1d(torch.randn(3, 4, 3))),
    "conv2d_input_cl": (lambda: _cl(torch.randn(2, 3, 6, 8)), lambda x, w: F.conv2d(x, w),
                        lambda: torch.randn(4, 3, 3, 3)),
    "conv2d_weight_cl": (lambda: torch.randn(2, 3, 6, 8), lambda x, w: F.conv2d(x, w, padding=1),
                         lambda: _cl(torch.randn(4, 3, 3, 3))),
    "conv_transpose2d_input_cl": (lambda: _cl(torch.randn(2, 3, 6, 8)),
                                  lambda x, w: F.conv_transpose2d(x, w),
                                  lambda: torch.randn(3, 4, 3, 3)),
    "avg_pool1d": (lambda: _cl1d(torch.randn(2, 3, 8)), lambda x, w: F.avg_pool1d(x, 2), None),
    "avg_pool2d": (lambda: _cl(torch.randn(2, 3, 6, 8)), lambda x, w: F.avg_pool2d(x, 2), None),
    "adaptive_avg_pool1d": (lambda: _cl1d(torch.randn(2, 3, 8)),
                            lambda x, w: F.adaptive_avg_pool1d(x, 3), None),
    "adaptive_avg_pool2d": (lambda: _cl(torch.randn(2, 3, 6, 8)),
                            lambda x, w: F.adaptive_avg_pool2d(x, (3, 5)), None),
    "adaptive_max_pool2d": (lambda: _cl(torch.randn(2, 3, 6, 8)),
                            lambda x, w: F.adaptive_max_pool2d(x, (3, 5), return_indices=True),
                            None),
    "max_pool2d": (lambda: _cl(torch.randn(2, 3, 6, 8)),
                   lambda x, w: F.max_pool2d(x, 2, return_indices=True), None),
    "max_pool3d": (lambda: torch.randn(2, 3, 4, 4, 4).to(memory_format=torch.channels_last_3d),
                   lambda x, w: F.max_pool3d(x, 2), None),
    "area_2d": (lambda: _cl(torch.randn(2, 3, 6, 8)),
                lambda x, w: F.interpolate(x, size=(3, 5), mode="area"), None),
    "area_1d": (lambda: _cl1d(torch.randn(2, 3, 8)),
                lambda x, w: F.interpolate(x, size=5, mode="area"), None),
    "avg_pool2d_contiguous": (lambda: torch.randn(2, 3, 6, 8), lambda x, w: F.avg_pool2d(x, 2),
                              None),
    "nearest_2d": (lambda: _cl(torch.randn(2, 3, 6, 8)),
                   lambda x, w: F.interpolate(x, scale_factor=2, mode="nearest"), None),
    "bilinear_2d": (lambda: _cl(torch.randn(2, 3, 6, 8)),
                    lambda x, w: F.interpolate(x, scale_factor=2, mode="bilinear"), None),
    "trilinear_3d": (lambda: torch.randn(2, 3, 4, 4, 4).to(memory_format=torch.channels_last_3d),
                     lambda x, w: F.interpolate(x, scale_factor=2, mode="trilinear"), None),
    "constant_pad": (lambda: _cl(torch.randn(2, 3, 6, 8)), lambda x, w: F.pad(x, (1, 1, 2, 0)),
                     None),
    "reflect_pad": (lambda: _cl(torch.randn(2, 3, 6, 8)),
                    lambda x, w: F.pad(x, (1, 1, 1, 1), mode="reflect"), None),
    "batch_norm": (lambda: _cl(torch.randn(2, 3, 6, 8)),
                   lambda x, w: F.batch_norm(x, None, None, training=True), None),
}


@pytest.mark.parametrize("op", sorted(NN))
def test_conv_and_pool_results_take_cpus_layout(op):
    torch.manual_seed(3)
    make_x, f, make_w = NN[op]
    x = make_x()
    w = make_w() if make_w else None
    expected = f(x, w)
    with no_fallback():
        got = f(to_tpu_keep(x), to_tpu_keep(w) if w is not None else None)
    assert _strides(got) == _strides(expected), (_strides(got), _strides(expected))
    assert_close_cpu(got, expected, rtol=1e-4, atol=1e-4)


def test_max_pool1d_takes_the_with_indices_path_layout():
    # CPU's max_pool1d has a contiguous fast path for inputs without grad;
    # off CPU (CUDA too) and with grad it runs max_pool2d_with_indices over
    # [N, C, 1, L], whose result keeps a channels-last input's layout.
    x = _cl1d(torch.randn(2, 3, 8)).requires_grad_()
    expected = F.max_pool1d(x, 2)
    with no_fallback():
        got = F.max_pool1d(to_tpu_keep(x.detach()).requires_grad_(), 2)
    assert got.stride() == expected.stride() == (12, 1, 3)
    assert_close_cpu(got, expected)


def _layouts_2d():
    torch.manual_seed(4)
    t = torch.randn(4, 6)
    return {"contiguous": t, "column_major": t.t().contiguous().t(),
            "permuted_3d": torch.randn(4, 6, 2).permute(2, 0, 1)}


# TensorIterator over the operands the CPU kernel builds: addr over self,
# vec1[:, None], vec2[None]; glu over its two halves; indexing over the source
# restrided to the index shape and the broadcast indices.
def _index(t, *index):
    return t[tuple(i.to(t.device) if isinstance(i, torch.Tensor) else i for i in index)]


ITER_BUILT = {
    "addr": lambda t: torch.addr(
        t[..., :4, :5] if t.dim() == 2 else t[0, :4, :5],
        torch.arange(4.0, device=t.device),
        torch.arange(5.0, device=t.device),
    ),
    "addr_broadcast_self": lambda t: torch.addr(
        t[0, :5] if t.dim() == 2 else t[0, 0, :5],
        torch.arange(4.0, device=t.device),
        torch.arange(5.0, device=t.device),
    ),
    "glu_last": lambda t: F.glu(t, -1),
    "glu_first": lambda t: F.glu(t, 0) if t.shape[0] % 2 == 0 else F.glu(t, 1),
    "index_first": lambda t: _index(t, torch.tensor([1, 0, 1])),
    "index_last": lambda t: _index(t, Ellipsis, torch.tensor([0, 2])),
    "index_2d_index": lambda t: _index(t, slice(None), torch.tensor([[0, 1], [2, 0]]).t()),
    "index_non_adjacent": lambda t: (
        _index(t, torch.tensor([0, 1]), slice(None), torch.tensor([1, 0]))
        if t.dim() == 3
        else _index(t, torch.tensor([0, 1]), torch.tensor([1, 0]))
    ),
}


@pytest.mark.parametrize("layout", sorted(_layouts_2d()))
@pytest.mark.parametrize("op", sorted(ITER_BUILT))
def test_ops_built_on_tensor_iterator_take_cpus_layout(op, layout):
    t = _layouts_2d()[layout]
    expected = ITER_BUILT[op](t)
    with no_fallback():
        got = ITER_BUILT[op](to_tpu_keep(t))
    assert got.stride() == expected.stride(), (got.stride(), expected.stride())
    assert_close_cpu(got, expected)


@pytest.mark.parametrize("memory_format", [None, torch.contiguous_format, torch.preserve_format])
def test_resize_as_to_the_same_shape_keeps_strides(memory_format):
    # CPU's resize_ leaves an unchanged shape's strides alone; only an asked-for
    # memory format restrides.
    kw = {} if memory_format is None else {"memory_format": memory_format}
    for self_, template in [(torch.zeros(6, 4).t(), torch.randn(4, 6)),
                            (torch.zeros(2, 3, 4, 5).to(memory_format=torch.channels_last),
                             torch.randn(2, 3, 4, 5)),
                            (torch.zeros(2, 3), torch.randn(6, 4).t())]:
        expected = self_.clone().resize_as_(template, **kw)
        with no_fallback():
            got = to_tpu_keep(self_).resize_as_(to_tpu_keep(template), **kw)
        assert got.shape == expected.shape and got.stride() == expected.stride(), (
            got.stride(), expected.stride())


@pytest.mark.parametrize("formats", [("cl", "cl"), ("cl", "c"), ("cl3d", "cl3d"), ("c", "cl")])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_takes_the_memory_format_its_inputs_agree_on(formats, dim):
    # TensorShape.cpp's cat_compute_output_memory_format: channels-last when
    # every input suggests it, else contiguous.
    def make(kind):
        if kind == "cl3d":
            return torch.randn(2, 3, 2, 3, 4).to(memory_format=torch.channels_last_3d)
        t = torch.randn(2, 3, 4, 5)
        return t.to(memory_format=torch.channels_last) if kind == "cl" else t

    parts = [make(k) for k in formats]
    want = torch.cat(parts, dim)
    want_out = torch.cat(parts, dim, out=torch.empty(0))  # resized: restrided too
    with no_fallback():
        got = torch.cat([p.to("tpu") for p in parts], dim)
        got_out = torch.cat([p.to("tpu") for p in parts], dim, out=torch.empty(0, device="tpu"))
    for g, w in ((got, want), (got_out, want_out)):
        assert g.stride() == w.stride(), (g.stride(), w.stride())
        assert torch.equal(g.cpu(), w)



MIXED = {  # (op, dtype of the first input, of the second)
    "atan2_int": (torch.atan2, torch.int32, torch.int32),
    "div_int": (torch.div, torch.int64, torch.int64),
    "pow_int_double": (torch.pow, torch.int32, torch.float64),
    "eq_int_float": (torch.eq, torch.int32, torch.float32),
    "add_bool_float": (torch.add, torch.bool, torch.float32),
    "where_int_int": (lambda a, b: torch.where(b > 0, a, b), torch.int32, torch.int32),
    "where_int_float": (lambda a, b: torch.where(b > 0, a, b), torch.int32, torch.float32),
}


@pytest.mark.parametrize("op", sorted(MIXED))
@pytest.mark.parametrize("pair", ["expanded_transposed", "sliced_permuted"])
def test_inputs_of_another_dtype_order_the_dims_as_their_cast_copies(op, pair):
    # CPU's TensorIterator orders the dims over each input's .to(common) copy,
    # which is dense: atan2(int expanded, int transposed) is row-major on CPU
    # (tpu followed the transposed input: strides (1, 5) for CPU's (3, 1)).
    fn, da, db = MIXED[op]
    if pair == "expanded_transposed":
        a = torch.arange(3).to(da).expand(5, 3)
        b = (torch.arange(15).reshape(3, 5) - 7).to(db).t()
    else:
        a = torch.arange(60).reshape(3, 4, 5).to(da).permute(2, 0, 1)[:, :, ::2]
        b = (torch.arange(60).reshape(4, 5, 3) - 30).to(db).permute(1, 2, 0)[:, :, ::2]
    expected = fn(a, b)
    with no_fallback():
        got = fn(to_tpu_keep(a), to_tpu_keep(b))
    assert got.stride() == expected.stride(), (got.stride(), expected.stride())
    assert_close_cpu(got, expected)

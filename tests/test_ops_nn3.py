"""Histograms (histc, histogram), glu's backward, embedding max_norm, the
antialiased bilinear and bicubic resize, segment_reduce, nonzero_static, uint8 linear
upsampling (through the CPU fallback), grid_sample, fractional max pooling and rrelu on tpu
compared with CPU PyTorch: values, dtype and shape with no CPU fallback,
gradients, and the CPU kernels' errors (the rest of test_ops_nn2.py's ops)."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from _nn_util import close, grads_close
from _util import assert_close_cpu, no_fallback, same_error

A = torch.ops.aten


# ------------------------------------------------------------------ histc, glu backward, embedding max_norm

def test_histc():
    x = torch.randn(50)
    close(lambda t: torch.histc(t), x)
    close(lambda t: torch.histc(t, bins=7, min=-1, max=1), x)
    close(lambda t: torch.histc(t, bins=4, min=-1, max=1), torch.tensor([-1.0, 1.0, 0.0, 2.0, float("nan"), 0.5]))
    close(lambda t: torch.histc(t, bins=5), torch.ones(4))
    close(lambda t: torch.histc(t, bins=5), torch.randn(3, 4)[:, ::2])
    close(lambda t: torch.histc(t, bins=3), torch.randn(0))
    same_error(lambda t: torch.histc(t, bins=0), torch.ones(3))
    same_error(lambda t: torch.histc(t, min=2, max=1), torch.ones(3))
    same_error(lambda t: torch.histc(t), torch.tensor([1.0, float("inf")]))
    # Integers: CPU refuses them; tpu counts them as CUDA does (int64
    # arithmetic, counts in the input's dtype), here equal to the float counts.
    with pytest.raises(NotImplementedError):  # CPU and CUDA refuse bool (messages differ)
        torch.histc(torch.ones(3, dtype=torch.bool, device="tpu"))
    for dtype in (torch.int32, torch.int64, torch.uint8):
        x = torch.randint(0, 100, (500,), dtype=dtype)
        for bins, lo, hi in ((7, 0, 99), (16, 10, 60), (4, 0, 0)):
            with no_fallback():
                got = torch.histc(x.to("tpu"), bins=bins, min=lo, max=hi)
            assert got.dtype == dtype
            assert got.cpu().tolist() == torch.histc(x.float(), bins=bins, min=lo, max=hi).long().tolist()


def test_glu_backward():
    grads_close(lambda t: F.glu(t), torch.randn(3, 4))
    grads_close(lambda t: F.glu(t, 0), torch.randn(6, 5))
    grads_close(lambda t: F.glu(t, 1), torch.randn(2, 4, 3).transpose(1, 2)[:, :2])
    same_error(lambda g, s: A.glu_backward(g, s, 1), torch.randn(3, 2), torch.randn(3, 5))


def test_embedding_max_norm():
    for norm_type in [2.0, 1.0, 3.0, float("inf")]:
        w = torch.randn(10, 4) * 2
        idx = torch.tensor([[1, 3, 3], [9, 0, 3]])
        close(lambda a, i: (F.embedding(i, a, max_norm=1.5, norm_type=norm_type), a), w, idx)
    w = torch.randn(10, 4) * 2
    close(lambda a, i: (torch.embedding_renorm_(a, i, 1.0, 2.0), a), w, torch.tensor([0, -1, 4]))
    same_error(lambda a, i: torch.embedding_renorm_(a, i, 1.0, 2.0), torch.randn(10, 4), torch.tensor([10]))
    same_error(lambda a, i: torch.embedding_renorm_(a, i, 1.0, 2.0), torch.randn(10, 4), torch.tensor([1.0]))


# ------------------------------------------------------------------ antialiased bilinear, segment_reduce, nonzero_static

@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_bilinear_antialias(align_corners, mode):
    cases = [((2, 3, 9, 8), dict(size=(4, 3))), ((1, 2, 8, 8), dict(size=(5, 12))),
             ((1, 1, 5, 7), dict(scale_factor=(0.4, 0.6))), ((1, 1, 6, 6), dict(size=(6, 3))),
             ((1, 2, 4, 4), dict(size=(1, 1))), ((2, 2, 9, 7), dict(size=(20, 4)))]
    for shape, kw in cases:
        grads_close(lambda t: F.interpolate(t, mode=mode, antialias=True, align_corners=align_corners, **kw),
                    torch.randn(shape))
    close(lambda t: A._upsample_bilinear2d_aa(t, [3, 5], False), torch.randn(1, 4, 7, 6).transpose(2, 3))
    same_error(lambda t: A._upsample_bilinear2d_aa(t, [3, 3], False), torch.ones(1, 2, 4, 4, dtype=torch.long))
    same_error(lambda t: A._upsample_bilinear2d_aa(t, [3, 3], False), torch.randn(1, 0, 4, 4))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce(reduce):
    x = torch.randn(6)
    x[2] = x[3]  # a tie in a segment
    for initial in [None, 2.0]:
        kw = {} if initial is None else dict(initial=initial)
        lengths = torch.tensor([2, 0, 3, 1])
        grads_close(lambda d, n: torch.segment_reduce(d, reduce, lengths=n, **kw), x, lengths)
        offsets = torch.tensor([0, 2, 2, 5, 6])
        grads_close(lambda d, o: torch.segment_reduce(d, reduce, offsets=o, **kw), x, offsets)
        x2 = torch.randn(3, 5, 2)
        l2 = torch.tensor([[2, 0, 3], [1, 1, 3], [0, 5, 0]])
        grads_close(lambda d, n: torch.segment_reduce(d, reduce, lengths=n, axis=1, **kw), x2, l2)
    z = torch.tensor([1.0, 0.0, 2.0, 0.0, 3.0, 4.0])  # zeros in prod's gradient
    grads_close(lambda d, n: torch.segment_reduce(d, reduce, lengths=n), z, torch.tensor([2, 2, 2]))


def test_segment_reduce_errors():
    x = torch.randn(5)
    same_error(lambda d, n: torch.segment_reduce(d, "max", lengths=n), x, torch.tensor([2, 0, 2]))
    same_error(lambda d, n: torch.segment_reduce(d, "max", lengths=n), x, torch.tensor([2, -1, 4]))
    same_error(lambda d, n: torch.segment_reduce(d, "foo", lengths=n), x, torch.tensor([2, 0, 3]))
    same_error(lambda d: torch.segment_reduce(d, "max"), x)
    same_error(lambda d, n: torch.segment_reduce(d, "max", lengths=n), x.long(), torch.tensor([2, 0, 3]))
    same_error(lambda d, n: torch.segment_reduce(d, "max", lengths=n, axis=1), torch.randn(2, 5),
               torch.tensor([2, 0, 3]))


def test_nonzero_static():
    x = torch.tensor([[0, 1, 3], [2, 0, 0]])
    for size in [0, 1, 3, 7]:
        close(lambda t: torch.nonzero_static(t, size=size), x)
        close(lambda t: torch.nonzero_static(t, size=size, fill_value=9), x.t())
    close(lambda t: torch.nonzero_static(t, size=3), torch.tensor([float("nan"), 0.0, -0.0, 2.0]))
    close(lambda t: torch.nonzero_static(t, size=3), torch.rand(2, 3, 4) > 0.5)
    close(lambda t: torch.nonzero_static(t, size=2), torch.tensor(3.0))
    close(lambda t: torch.nonzero_static(t, size=2), torch.zeros(0, 3))
    same_error(lambda t: torch.nonzero_static(t, size=-1), x)


def test_upsample_uint8_linear_runs_through_the_cpu_fallback():
    # CPU resizes uint8 with Pillow's fixed-point arithmetic, which the float
    # lowering does not repeat: the rule hands such calls to the counted fallback.
    x = torch.randint(0, 255, (1, 2, 5, 5), dtype=torch.uint8)
    for mode in ("bilinear", "bicubic"):
        torchtpu.metrics.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fallback warns once per op and process
            out = F.interpolate(x.to("tpu"), size=(3, 4), mode=mode)
        assert sum(torchtpu.metrics.fallback_counts().values()) == 1
        assert out.device.type == "tpu"
        assert_close_cpu(out, F.interpolate(x, size=(3, 4), mode=mode))


# ------------------------------------------------------------------ grid_sample

@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(mode, padding_mode, align_corners):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 6)
    grid = torch.rand(2, 4, 7, 2) * 2.6 - 1.3  # some points outside [-1, 1]
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    tol = dict(rtol=1e-4, atol=1e-4)
    grads_close(lambda a, b: F.grid_sample(a, b, **kw), x, grid, **tol)
    close(lambda a, b: F.grid_sample(a, b, **kw), torch.randn(2, 6, 5, 3).transpose(1, 3), grid[:, :, :5], **tol)
    close(lambda a, b: F.grid_sample(a, b, **kw), torch.randn(1, 2, 1, 1), grid[:1], **tol)


def test_grid_sample_errors():
    same_error(lambda a, b: F.grid_sample(a, b, align_corners=False), torch.randn(2, 3, 4, 4), torch.rand(1, 2, 2, 2))
    same_error(lambda a, b: F.grid_sample(a, b, align_corners=False), torch.randn(2, 3, 4, 4), torch.rand(2, 2, 2, 3))
    same_error(lambda a, b: F.grid_sample(a, b, align_corners=False), torch.randn(2, 3, 0, 4), torch.rand(2, 2, 2, 2))
    same_error(lambda a, b: A.grid_sampler_2d(a, b, 0, 0, False), torch.randn(2, 3, 4, 4), torch.rand(2, 2, 2, 2).double())


# ------------------------------------------------------------------ histogram

def test_histogram():
    x = torch.randn(40)
    w = torch.rand(40)
    for kw in [dict(bins=5), dict(bins=7, range=(-1.0, 1.5)), dict(bins=4, weight=w), dict(bins=6, density=True),
               dict(bins=3, range=(-2.0, 2.0), weight=w, density=True)]:
        expected = torch.histogram(x, **kw)
        kw_tpu = {k: (v.to("tpu") if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        with no_fallback():
            actual = torch.histogram(x.to("tpu"), **kw_tpu)
        assert_close_cpu(tuple(actual), tuple(expected))
    edges = torch.tensor([-2.0, -0.5, 0.0, 0.0, 1.0, 3.0])
    close(lambda t, b: torch.histogram(t, bins=b), x, edges)
    close(lambda t, b: torch.histogram(t, bins=b, density=True), x, edges[:3])
    close(lambda t: torch.histogram(t, bins=4), torch.ones(3))
    close(lambda t: torch.histogram(t, bins=4), torch.empty(0))
    close(lambda t: torch.histogram(t, bins=3), torch.randn(3, 4)[:, ::2])
    same_error(lambda t: torch.histogram(t, bins=0), torch.ones(3))
    same_error(lambda t: torch.histogram(t, bins=4, range=(2.0, 1.0)), torch.ones(3))
    same_error(lambda t: torch.histogram(t, bins=4), torch.tensor([1.0, float("nan")]))
    same_error(lambda t: torch.histogram(t, bins=3), torch.ones(3).long())
    same_error(lambda t, b: torch.histogram(t, bins=b), torch.ones(3), torch.tensor([[0.0, 1.0]]))


# ------------------------------------------------------------------ fractional max pooling

@pytest.mark.parametrize("k", [2, 3])
def test_fractional_max_pool(k):
    torch.manual_seed(0)
    fn = F.fractional_max_pool2d if k == 2 else F.fractional_max_pool3d
    shape = (2, 3, 9, 8) if k == 2 else (2, 2, 7, 8, 7)
    x = torch.randn(shape)
    for kernel, out in [(2, 4), (3, (5,) * k if k == 2 else (4, 5, 4)), ((2,) * (k - 1) + (1,), (3,) * k), (1, 1)]:
        samples = torch.rand(2, shape[1], k)
        grads_close(lambda t: fn(t, kernel, output_size=out, _random_samples=samples.to(t.device)), x)
        close(lambda t: fn(t, kernel, output_size=out, return_indices=True, _random_samples=samples[:1].to(t.device)),
              x[0])
    # Ties pick the first maximum, as on CPU.
    samples = torch.rand(1, 2, k)
    close(lambda t: fn(t, 2, output_size=3, return_indices=True, _random_samples=samples.to(t.device)),
          torch.randint(0, 2, (1, 2) + shape[2:]).float())
    # Random samples drawn on tpu: shapes and dtypes (the values follow tpu's generator).
    with no_fallback():
        y, i = fn(x.to("tpu"), 2, output_size=3, return_indices=True)
    assert y.shape == (2, shape[1]) + (3,) * k and i.dtype == torch.int64


def test_fractional_max_pool_errors():
    s = torch.rand(1, 2, 2)
    same_error(lambda t, r: A.fractional_max_pool2d(t, [4, 2], [3, 3], r), torch.ones(1, 2, 5, 5), s)
    same_error(lambda t, r: A.fractional_max_pool2d(t, [2, 2], [3, 3], r), torch.ones(5, 5), s)
    same_error(lambda t, r: A.fractional_max_pool2d(t, [2, 2], [3, 3], r), torch.ones(1, 2, 5, 5), s.double())
    same_error(lambda t, r: A.fractional_max_pool2d(t, [2, 2], [3, 3], r), torch.ones(1, 2, 5, 5), s[0])
    same_error(lambda t, r: A.fractional_max_pool2d(t, [2, 2], [3, 3], r), torch.ones(1, 2, 5, 5).long(), s.long())
    same_error(lambda t, r: A.fractional_max_pool3d(t, [4, 2, 2], [3, 3, 3], r), torch.ones(1, 2, 5, 5, 5),
               torch.rand(1, 2, 3))
    same_error(lambda t, r: A.fractional_max_pool3d(t, [3, 3, 3], [5, 4, 4], r), torch.ones(1, 2, 7, 7, 7),
               torch.rand(1, 2, 3))


# ------------------------------------------------------------------ rrelu

def test_rrelu_eval_and_train():
    x = torch.randn(4, 5)
    grads_close(lambda t: F.rrelu(t, 0.1, 0.3, training=False), x)
    close(lambda t: F.rrelu(t, training=False), x.t())
    torch.manual_seed(0)
    xt = x.to("tpu").requires_grad_()
    with no_fallback():
        y = F.rrelu(xt, 0.1, 0.3, training=True)
        y.sum().backward()
    y, grad = y.detach().cpu(), xt.grad.cpu()
    neg = x <= 0
    slope = y[neg] / x[neg]
    assert torch.all((slope >= 0.1) & (slope <= 0.3))
    torch.testing.assert_close(y[~neg], x[~neg])
    torch.testing.assert_close(grad[neg], slope)  # the recorded noise is the slope
    torch.testing.assert_close(grad[~neg], torch.ones_like(grad[~neg]))
    noise = torch.empty(4, 5)
    same_error(lambda t, n: A.rrelu_with_noise(t, n, 0.1, 0.3, True), x, noise[:3])
    same_error(lambda t, n: A.rrelu_with_noise(t, n, 0.5, 0.3, True), x, noise)
    same_error(lambda t, n: A.rrelu_with_noise(t, n, 0.1, 0.3, False), x.long(), noise.long())

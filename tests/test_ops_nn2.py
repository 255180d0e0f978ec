"""Upsampling (linear, bilinear, bicubic, trilinear, nearest-exact), padding
and upsampling backward, 3-D and adaptive max pooling, unfold/fold, the margin
losses and pairwise distances on tpu compared with CPU PyTorch: values, dtype
and shape with no CPU fallback, gradients, and the CPU kernels' errors."""

import pytest
import torch
import torch.nn.functional as F

from _nn_util import close, grads_close
from _util import same_error

A = torch.ops.aten


# ------------------------------------------------------------------ upsampling

# (input shape, interpolate kwargs) per mode.
INTERP = {
    "linear": [((2, 3, 5), dict(size=8)), ((1, 2, 7), dict(size=3)), ((2, 3, 5), dict(scale_factor=1.7)),
               ((2, 3, 5), dict(size=5)), ((2, 1, 1), dict(size=4)), ((2, 3, 6), dict(size=1)),
               ((2, 3, 5), dict(scale_factor=0.6, recompute_scale_factor=True))],
    "bilinear": [((2, 3, 5, 4), dict(size=(7, 9))), ((1, 2, 8, 8), dict(size=(3, 5))),
                 ((2, 3, 4, 5), dict(scale_factor=(2.3, 0.7))), ((1, 1, 4, 4), dict(size=(4, 6))),
                 ((1, 5, 3, 3), dict(size=(6, 6)))],
    "bicubic": [((2, 3, 5, 4), dict(size=(7, 9))), ((1, 2, 8, 8), dict(size=(3, 5))),
                ((2, 3, 4, 5), dict(scale_factor=(2.3, 0.7))), ((1, 1, 1, 4), dict(size=(3, 6)))],
    "trilinear": [((1, 2, 3, 4, 5), dict(size=(5, 3, 7))), ((2, 1, 4, 4, 4), dict(scale_factor=1.5)),
                  ((1, 1, 2, 3, 2), dict(size=(1, 6, 2)))],
}


@pytest.mark.parametrize("mode", list(INTERP))
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_modes(mode, align_corners):
    for shape, kw in INTERP[mode]:
        x = torch.randn(shape)
        grads_close(lambda t: F.interpolate(t, mode=mode, align_corners=align_corners, **kw), x)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_interpolate_nearest_and_exact(mode):
    cases = [((2, 3, 5), dict(size=8)), ((2, 3, 7), dict(size=3)), ((2, 3, 5), dict(scale_factor=2)),
             ((2, 3, 5), dict(scale_factor=1.3)), ((1, 2, 4, 5), dict(size=(7, 3))),
             ((1, 2, 4, 5), dict(scale_factor=(0.6, 2.5))), ((1, 1, 2, 3, 4), dict(size=(3, 5, 2)))]
    for shape, kw in cases:
        grads_close(lambda t: F.interpolate(t, mode=mode, **kw), torch.randn(shape))


def test_upsample_non_contiguous_empty_and_dtypes():
    x = torch.randn(3, 2, 6, 5).transpose(2, 3)  # non-contiguous
    close(lambda t: F.interpolate(t, size=(4, 9), mode="bilinear"), x)
    close(lambda t: F.interpolate(t, size=(4, 9), mode="bicubic", align_corners=True), x)
    close(lambda t: F.interpolate(t, size=(4, 9), mode="nearest-exact"), x)
    close(lambda t: F.interpolate(t, size=7, mode="linear"), torch.randn(2, 8, 3)[:, ::2])
    close(lambda t: F.interpolate(t, size=(3, 4), mode="bilinear"), torch.randn(0, 2, 5, 5))
    close(lambda t: F.interpolate(t, size=(3, 4), mode="bilinear"), torch.randn(2, 3, 5, 5, dtype=torch.float64))
    close(lambda t: F.interpolate(t, size=(3, 4), mode="nearest-exact"),
          torch.randint(0, 255, (1, 2, 5, 5), dtype=torch.uint8))
    close(lambda t: F.upsample_bilinear(t, size=(7, 7)), torch.randn(1, 2, 3, 3))
    # Values at the edges (NaN and inf propagate as on CPU's two-tap sums).
    close(lambda t: F.interpolate(t, size=9, mode="linear"), torch.tensor([[[1.0, float("nan"), 3.0, 4.0]]]))


def test_upsample_direct_ops_and_errors():
    x = torch.randn(2, 3, 5)
    close(lambda t: A.upsample_linear1d(t, [9], True, 2.0), x)
    close(lambda t: A.upsample_linear1d(t, [9], False, 2.0), x)
    close(lambda t: A.upsample_bilinear2d(t, [9, 4], False, 1.9, None), torch.randn(1, 2, 5, 5))
    close(lambda t: A._upsample_nearest_exact1d(t, [7], 1.5), x)
    same_error(lambda t: A.upsample_linear1d(t, [5], False), torch.randn(2, 0, 4))
    same_error(lambda t: A.upsample_linear1d(t, [5], False), torch.randn(3, 4))
    same_error(lambda t: A.upsample_linear1d(t, [0], False), torch.randn(2, 3, 4))
    same_error(lambda t: A.upsample_bilinear2d(t, [5, 5], False), torch.randn(2, 0, 4, 4))
    same_error(lambda t: A.upsample_bilinear2d(t, [5], False), torch.randn(2, 3, 4, 4))
    same_error(lambda t: A.upsample_bicubic2d(t, [5, 5], False), torch.ones(2, 3, 4, 4, dtype=torch.long))
    same_error(lambda t: A.upsample_trilinear3d(t, [5, 5, 5], False), torch.ones(1, 1, 2, 2, 2, dtype=torch.long))
    same_error(lambda t: A._upsample_nearest_exact1d(t, [5]), torch.ones(2, 3, 4, dtype=torch.long))
    same_error(lambda g: A.upsample_linear1d_backward(g, [5], [2, 3, 7], False), torch.randn(2, 3, 4))
    same_error(lambda g: A.upsample_bilinear2d_backward(g, [5, 5], [2, 3, 7, 7], False), torch.randn(2, 3, 4, 4))
    same_error(lambda g: A.upsample_bilinear2d_backward(g, [5, 5], [2, 3, 7, 7], False), torch.randn(2, 3, 4))
    same_error(lambda g: A.upsample_nearest1d_backward(g, [5], [2, 3, 7]), torch.ones(2, 3, 5, dtype=torch.long))
    same_error(lambda g: A.upsample_nearest3d_backward(g, [5, 5, 5], [2, 3, 7, 7, 7]), torch.randn(2, 3, 5, 5, 4))


# ------------------------------------------------------------------ padding backward

@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_backward(mode):
    cases = [((2, 3, 6), (2, 3)), ((3, 6), (1, 0)), ((2, 3, 5, 6), (1, 2, 3, 1)), ((3, 5, 6), (2, 2, 0, 1)),
             ((1, 2, 4, 5, 3), (1, 1, 2, 0, 1, 2)), ((2, 4, 5, 3), (0, 1, 1, 2, 2, 1))]
    if mode == "replicate":
        cases.append(((2, 3, 6, 5), (-1, 2, 3, -2)))
    for shape, pad in cases:
        grads_close(lambda t: F.pad(t, pad, mode=mode), torch.randn(shape))
    grads_close(lambda t: F.pad(t, (1, 2), mode=mode), torch.randn(2, 6, 3).transpose(1, 2))


def test_pad_backward_errors():
    x = torch.randn(2, 3, 5)
    same_error(lambda g, s: A.reflection_pad1d_backward(g, s, [1, 1]), torch.randn(2, 3, 8), x)
    same_error(lambda g, s: A.replication_pad1d_backward(g, s, [1, 1]), torch.randn(2, 3, 8), x)
    same_error(lambda g, s: A.replication_pad1d_backward(g, s, [1]), torch.randn(2, 3, 7), x)
    x2 = torch.randn(2, 3, 5, 5)
    same_error(lambda g, s: A.reflection_pad2d_backward(g, s, [1, 1, 1, 1]), torch.randn(2, 3, 7, 8), x2)
    same_error(lambda g, s: A.replication_pad2d_backward(g, s, [1, 1, 1, 1]), torch.randn(2, 3, 8, 7), x2)
    x3 = torch.randn(2, 3, 5, 5, 5)
    same_error(lambda g, s: A.reflection_pad3d_backward(g, s, [1] * 6), torch.randn(2, 3, 8, 7, 7), x3)
    same_error(lambda g, s: A.reflection_pad3d_backward(g, s, [1] * 4), torch.randn(2, 3, 7, 7, 7), x3)
    same_error(lambda g, s: A.replication_pad3d_backward(g, s, [1] * 6), torch.randn(2, 3, 7, 7, 8), x3)
    same_error(lambda g, s: A.replication_pad2d_backward(g, s, [1, 1, 1, 1]),
               torch.ones(2, 3, 7, 7, dtype=torch.long), x2.long())


# ------------------------------------------------------------------ 3-D and adaptive pooling

@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 0)),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=2, dilation=(2, 1, 1))])
def test_max_pool3d(kw):
    x = torch.randn(2, 3, 6, 5, 7)
    grads_close(lambda t: F.max_pool3d(t, **kw), x)
    close(lambda t: F.max_pool3d(t, return_indices=True, **kw), x)
    close(lambda t: F.max_pool3d(t, return_indices=True, **kw), x[0])  # batch-less
    # Ties and -inf: the first maximum wins, as on CPU.
    close(lambda t: F.max_pool3d(t, return_indices=True, **kw), torch.randint(0, 3, (1, 2, 6, 5, 7)).float())


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 0)),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                                dict(kernel_size=2, divisor_override=3)])
def test_avg_pool3d(kw):
    x = torch.randn(2, 3, 6, 5, 7)
    grads_close(lambda t: F.avg_pool3d(t, **kw), x)
    grads_close(lambda t: F.avg_pool3d(t, **kw), x[1])
    close(lambda t: F.avg_pool3d(t, **kw), torch.randn(2, 7, 6, 5, 3).transpose(1, 4))


def test_pool3d_dtypes_and_errors():
    close(lambda t: F.max_pool3d(t, 2), torch.randint(-9, 9, (1, 2, 4, 4, 4)))
    close(lambda t: F.avg_pool3d(t, 2), torch.randint(-9, 9, (1, 2, 4, 4, 4)))
    same_error(lambda t: F.max_pool3d(t, 2), torch.randn(4, 4, 4))
    same_error(lambda t: F.max_pool3d(t, 5), torch.randn(1, 2, 4, 4, 4))
    same_error(lambda t: F.max_pool3d(t, 2, padding=2), torch.randn(1, 2, 4, 4, 4))
    same_error(lambda t: F.avg_pool3d(t, 2), torch.randn(4, 4, 4))
    same_error(lambda t: F.avg_pool3d(t, 2, divisor_override=0), torch.randn(1, 4, 4, 4))
    same_error(lambda t: A.max_pool3d_with_indices(t, [2, 2], [], [0], [1], False), torch.randn(1, 4, 4, 4))
    same_error(lambda t: A.avg_pool3d(t, [2, 2]), torch.randn(1, 4, 4, 4))


@pytest.mark.parametrize("out", [(3, 2), (1, 1), (4, 5), (7, 3), (2, None)])
def test_adaptive_max_pool2d(out):
    x = torch.randn(2, 3, 7, 5)
    grads_close(lambda t: F.adaptive_max_pool2d(t, out), x)
    close(lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), x[0])
    close(lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), torch.randint(0, 2, (1, 2, 7, 5)).float())


def test_adaptive_max_pool1d_3d():
    grads_close(lambda t: F.adaptive_max_pool1d(t, 3), torch.randn(2, 3, 8))
    grads_close(lambda t: F.adaptive_max_pool1d(t, 5), torch.randn(3, 7))
    x = torch.randn(2, 2, 5, 6, 7)
    for out in [(2, 3, 4), (5, 1, 7), (1, 1, 1)]:
        grads_close(lambda t: F.adaptive_max_pool3d(t, out), x)
        close(lambda t: F.adaptive_max_pool3d(t, out, return_indices=True), x[1])
    nan = torch.randn(1, 1, 4, 4)
    nan[0, 0, 1, 2] = float("nan")
    close(lambda t: F.adaptive_max_pool2d(t, 2, return_indices=True), nan)


def test_adaptive_avg_pool3d():
    x = torch.randn(2, 3, 5, 6, 7)
    for out in [(2, 3, 4), (5, 6, 7), (1, 1, 1), (3, 4, 7)]:
        grads_close(lambda t: F.adaptive_avg_pool3d(t, out), x)
        grads_close(lambda t: F.adaptive_avg_pool3d(t, out), x[0])
    close(lambda t: F.adaptive_avg_pool3d(t, 2), torch.randn(1, 7, 5, 6, 3).transpose(1, 4))


def test_adaptive_pool_errors():
    same_error(lambda t: F.adaptive_max_pool2d(t, 2), torch.randn(4, 4))
    same_error(lambda t: F.adaptive_max_pool2d(t, 2), torch.randn(3, 0, 4))
    same_error(lambda t: F.adaptive_max_pool2d(t, 2), torch.ones(1, 3, 4, 4, dtype=torch.long))
    same_error(lambda t: F.adaptive_max_pool3d(t, 2), torch.ones(1, 3, 4, 4, 4, dtype=torch.long))
    same_error(lambda t: F.adaptive_avg_pool3d(t, 2), torch.randn(4, 4))
    same_error(lambda t: A._adaptive_avg_pool3d(t, [2, 2, 2]), torch.ones(1, 3, 4, 4, 4, dtype=torch.long))
    same_error(lambda t: A.adaptive_max_pool2d(t, [2]), torch.randn(3, 4, 4))


# ------------------------------------------------------------------ unfold / fold

@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0)),
                                dict(kernel_size=3, dilation=2, padding=2, stride=2), dict(kernel_size=1)])
def test_unfold_fold(kw):
    x = torch.randn(2, 3, 6, 7)
    grads_close(lambda t: F.unfold(t, **kw), x)
    grads_close(lambda t: F.unfold(t, **kw), x[0])
    cols = F.unfold(x, **kw)
    grads_close(lambda t: F.fold(t, (6, 7), **kw), cols)
    grads_close(lambda t: F.fold(t, (6, 7), **kw), cols[1])
    close(lambda t: F.unfold(t, **kw), torch.randn(2, 7, 6, 3).transpose(1, 3))
    close(lambda t: F.unfold(t, **kw), torch.rand(2, 3, 6, 7) > 0.5)
    close(lambda t: F.fold(t, (6, 7), **kw), cols > 0.5)


def test_unfold_fold_errors():
    same_error(lambda t: F.unfold(t, 2), torch.randn(2, 3))
    same_error(lambda t: F.unfold(t, 5), torch.randn(1, 2, 3, 3))
    same_error(lambda t: F.unfold(t, 2, stride=0), torch.randn(1, 2, 3, 3))
    same_error(lambda t: F.unfold(t, 2), torch.ones(1, 2, 3, 3, dtype=torch.long))
    same_error(lambda t: F.fold(t, (4, 4), 2), torch.randn(1, 8, 8))
    same_error(lambda t: F.fold(t, (4, 4), 2), torch.randn(1, 7, 9))
    same_error(lambda t: F.fold(t, (4, 4), 2), torch.ones(1, 8, 9, dtype=torch.long))


# ------------------------------------------------------------------ margin losses

@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multi_margin_loss(p, reduction):
    x, t, w = torch.randn(5, 4), torch.tensor([0, 3, 1, 1, 2]), torch.rand(4)
    grads_close(lambda a, b: F.multi_margin_loss(a, b, p=p, reduction=reduction), x, t)
    grads_close(lambda a, b: F.multi_margin_loss(a, b, p=p, margin=0.7, weight=w.to(a.device), reduction=reduction),
                x, t)
    grads_close(lambda a, b: F.multi_margin_loss(a, b, p=p, reduction=reduction), x[1], t[1:2])
    grads_close(lambda a, b: F.multi_margin_loss(a, b, p=p, reduction=reduction), x[1], t[1])
    grads_close(lambda a, b: F.multi_margin_loss(a, b, p=p, reduction=reduction), x.t()[:, :4], t[:4])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    x = torch.randn(3, 4)
    t = torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 0, 0, 0]])
    grads_close(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), x, t)
    grads_close(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), x[0], t[0])
    grads_close(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), torch.randn(4, 3).t(), t)
    close(lambda a, b: A.multilabel_margin_loss_forward(a, b, 0), x, t)


def test_margin_loss_errors():
    x, t = torch.randn(3, 4), torch.tensor([0, 3, 1])
    same_error(lambda a, b: F.multi_margin_loss(a, b, p=3), x, t)
    same_error(lambda a, b: F.multi_margin_loss(a, b), x, t[:2])
    same_error(lambda a, b: F.multi_margin_loss(a, b, weight=torch.ones(3, device=a.device)), x, t)
    same_error(lambda a, b: F.multi_margin_loss(a, b), x, torch.tensor([0, 4, 1]))
    same_error(lambda a, b: F.multi_margin_loss(a, b), x.long(), t)
    T = torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 0, 0, 0]])
    same_error(lambda a, b: F.multilabel_margin_loss(a, b), x, T + 2)
    same_error(lambda a, b: F.multilabel_margin_loss(a, b), x, T - 1)
    same_error(lambda a, b: F.multilabel_margin_loss(a, b), x, T[:2])
    same_error(lambda a, b: F.multilabel_margin_loss(a, b), x.long(), T)


# ------------------------------------------------------------------ distances

@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist(p):
    a, b = torch.randn(2, 5, 3), torch.randn(2, 4, 3)
    grads_close(lambda x, y: torch.cdist(x, y, p=p), a, b)
    grads_close(lambda x, y: torch.cdist(x, y, p=p), a[0], torch.randn(3, 1, 6, 3))  # broadcast batch
    grads_close(lambda x, y: torch.cdist(x, y, p=p, compute_mode="donot_use_mm_for_euclid_dist"),
                torch.randn(30, 3), torch.randn(27, 3))
    close(lambda x, y: torch.cdist(x, y, p=p), torch.randn(2, 3, 5).transpose(1, 2), b[:, ::2])
    close(lambda x, y: torch.cdist(x, y, p=p), torch.randn(0, 3), torch.randn(4, 3))


def test_cdist_mm_path_and_errors():
    a, b = torch.randn(30, 4), torch.randn(27, 4)
    close(lambda x, y: A._cdist_forward(x, y, 2.0, None), a, b, rtol=1e-4, atol=1e-4)
    close(lambda x, y: A._cdist_forward(x, y, 2.0, 1), a[:3], b[:4], rtol=1e-4, atol=1e-4)
    same_error(lambda x, y: torch.cdist(x, y), torch.randn(3, 4), torch.randn(3, 5))
    same_error(lambda x, y: torch.cdist(x, y, p=-1), torch.randn(3, 4), torch.randn(3, 4))
    same_error(lambda x, y: torch.cdist(x, y), torch.randn(3), torch.randn(3, 3))
    same_error(lambda x, y: torch.cdist(x, y), torch.ones(3, 4, dtype=torch.long), torch.randn(3, 4))


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
def test_pdist(p):
    grads_close(lambda x: F.pdist(x, p=p), torch.randn(6, 3))
    grads_close(lambda x: F.pdist(x, p=p), torch.randn(2, 5))
    close(lambda x: F.pdist(x, p=p), torch.randn(1, 3))
    close(lambda x: F.pdist(x, p=p), torch.randn(5, 4).t())
    same_error(lambda x: F.pdist(x), torch.randn(3))
    same_error(lambda x: F.pdist(x, p=-1.0), torch.randn(3, 3))

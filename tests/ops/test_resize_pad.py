"""Resizing and padding on tpu compared with CPU PyTorch: interpolate in every
mode (nearest, nearest-exact, linear, bilinear, bicubic, trilinear, antialiased),
the upsample ops and their backward, reflection/replication padding and its
backward, grid_sample; values, dtype and shape with no CPU fallback (uint8
linear upsampling excepted, named), and the CPU kernels' errors."""

import warnings

import pytest
import torch
import torch.nn.functional as F
import torchtpu

from _nn_util import TOL, grads_close
from _util import assert_close_cpu, no_fallback, run_both, same_error

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md

A = torch.ops.aten


# (input shape, interpolate kwargs) per mode.
INTERP = {
    "linear": [
        ((2, 3, 5), dict(size=8)),
        ((1, 2, 7), dict(size=3)),
        ((2, 3, 5), dict(scale_factor=1.7)),
        ((2, 3, 5), dict(size=5)),
        ((2, 1, 1), dict(size=4)),
        ((2, 3, 6), dict(size=1)),
        ((2, 3, 5), dict(scale_factor=0.6, recompute_scale_factor=True)),
    ],
    "bilinear": [
        ((2, 3, 5, 4), dict(size=(7, 9))),
        ((1, 2, 8, 8), dict(size=(3, 5))),
        ((2, 3, 4, 5), dict(scale_factor=(2.3, 0.7))),
        ((1, 1, 4, 4), dict(size=(4, 6))),
        ((1, 5, 3, 3), dict(size=(6, 6))),
    ],
    "bicubic": [
        ((2, 3, 5, 4), dict(size=(7, 9))),
        ((1, 2, 8, 8), dict(size=(3, 5))),
        ((2, 3, 4, 5), dict(scale_factor=(2.3, 0.7))),
        ((1, 1, 1, 4), dict(size=(3, 6))),
    ],
    "trilinear": [
        ((1, 2, 3, 4, 5), dict(size=(5, 3, 7))),
        ((2, 1, 4, 4, 4), dict(scale_factor=1.5)),
        ((1, 1, 2, 3, 2), dict(size=(1, 6, 2))),
    ],
}


@pytest.mark.parametrize(
    "shape,padding,mode",
    [
        ((1, 2, 5), (2, 1), "reflect"),
        ((1, 2, 5), (2, -1), "reflect"),
        ((2, 5), (0, 3), "replicate"),
        ((2, 3, 4, 5), (1, 2, 3, 1), "replicate"),
        ((2, 3, 4, 5), (1, 2, 3, 1), "reflect"),
        ((1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2), "reflect"),
        ((1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2), "replicate"),
        ((0, 2, 5), (1, 1), "reflect"),
        ((1, 2, 5), (-4, 1), "replicate"),
    ],
)
def test_reflection_and_replication_pad(shape, padding, mode):
    x = torch.randn(shape)
    with no_fallback():
        got = F.pad(x.to("tpu"), padding, mode=mode).cpu()
    torch.testing.assert_close(got, F.pad(x, padding, mode=mode))


def test_pad_errors_match_cpu():
    same_error(lambda x: F.pad(x, (3, 3), mode="reflect"), torch.randn(1, 2, 3))
    same_error(lambda x: F.pad(x, (-4, 1), mode="replicate"), torch.randn(1, 2, 3))
    same_error(lambda x: F.pad(x, (1, 1), mode="reflect"), torch.randn(2, 0, 3))
    same_error(lambda x: F.pad(x, (1, 1), mode="replicate"), torch.randn(2, 3, 0))


@pytest.mark.parametrize(
    "shape,kwargs",
    [
        ((1, 2, 5), dict(size=7)),
        ((1, 2, 5), dict(size=10)),
        ((1, 2, 5), dict(scale_factor=1.7)),
        ((2, 3, 4, 5), dict(size=(9, 3))),
        ((2, 3, 4, 5), dict(scale_factor=(2.0, 0.5))),
        ((1, 2, 3, 4, 5), dict(size=(5, 5, 2))),
        ((1, 1, 7), dict(size=3)),
        ((0, 2, 4, 4), dict(size=(8, 8))),
    ],
)
def test_upsample_nearest(shape, kwargs):
    x = torch.randn(shape)
    with no_fallback():
        got = F.interpolate(x.to("tpu"), mode="nearest", **kwargs).cpu()
    torch.testing.assert_close(got, F.interpolate(x, mode="nearest", **kwargs), rtol=0, atol=0)


def test_upsample_nearest_errors_match_cpu():
    same_error(lambda x: torch.ops.aten.upsample_nearest1d(x, [0]), torch.randn(1, 2, 3))
    same_error(lambda x: torch.ops.aten.upsample_nearest1d(x, [2, 2]), torch.randn(1, 2, 3))
    same_error(lambda x: torch.ops.aten.upsample_nearest1d(x, [4]), torch.randn(2, 3))
    same_error(lambda x: torch.ops.aten.upsample_nearest2d(x, [4, 4]), torch.randn(1, 2, 0, 3))


@pytest.mark.parametrize("mode", list(INTERP))
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_modes(mode, align_corners):
    for shape, kw in INTERP[mode]:
        x = torch.randn(shape)
        grads_close(lambda t: F.interpolate(t, mode=mode, align_corners=align_corners, **kw), x)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_interpolate_nearest_and_exact(mode):
    cases = [
        ((2, 3, 5), dict(size=8)),
        ((2, 3, 7), dict(size=3)),
        ((2, 3, 5), dict(scale_factor=2)),
        ((2, 3, 5), dict(scale_factor=1.3)),
        ((1, 2, 4, 5), dict(size=(7, 3))),
        ((1, 2, 4, 5), dict(scale_factor=(0.6, 2.5))),
        ((1, 1, 2, 3, 4), dict(size=(3, 5, 2))),
    ]
    for shape, kw in cases:
        grads_close(lambda t: F.interpolate(t, mode=mode, **kw), torch.randn(shape))


def test_upsample_non_contiguous_empty_and_dtypes():
    x = torch.randn(3, 2, 6, 5).transpose(2, 3)  # non-contiguous
    run_both(lambda t: F.interpolate(t, size=(4, 9), mode="bilinear"), x, **TOL)
    run_both(lambda t: F.interpolate(t, size=(4, 9), mode="bicubic", align_corners=True), x, **TOL)
    run_both(lambda t: F.interpolate(t, size=(4, 9), mode="nearest-exact"), x, **TOL)
    run_both(lambda t: F.interpolate(t, size=7, mode="linear"), torch.randn(2, 8, 3)[:, ::2], **TOL)
    run_both(lambda t: F.interpolate(t, size=(3, 4), mode="bilinear"), torch.randn(0, 2, 5, 5),
             **TOL)
    run_both(
        lambda t: F.interpolate(t, size=(3, 4), mode="bilinear"),
        torch.randn(2, 3, 5, 5, dtype=torch.float64),
        **TOL,
    )
    run_both(lambda t: F.interpolate(t, size=(3, 4), mode="nearest-exact"),
             torch.randint(0, 255, (1, 2, 5, 5), dtype=torch.uint8), **TOL)
    run_both(lambda t: F.upsample_bilinear(t, size=(7, 7)), torch.randn(1, 2, 3, 3), **TOL)
    # Values at the edges (NaN and inf propagate as on CPU's two-tap sums).
    run_both(
        lambda t: F.interpolate(t, size=9, mode="linear"),
        torch.tensor([[[1.0, float("nan"), 3.0, 4.0]]]),
        **TOL,
    )


def test_upsample_direct_ops_and_errors():
    x = torch.randn(2, 3, 5)
    run_both(lambda t: A.upsample_linear1d(t, [9], True, 2.0), x, **TOL)
    run_both(lambda t: A.upsample_linear1d(t, [9], False, 2.0), x, **TOL)
    run_both(lambda t: A.upsample_bilinear2d(t, [9, 4], False, 1.9, None), torch.randn(1, 2, 5, 5),
             **TOL)
    run_both(lambda t: A._upsample_nearest_exact1d(t, [7], 1.5), x, **TOL)
    same_error(lambda t: A.upsample_linear1d(t, [5], False), torch.randn(2, 0, 4))
    same_error(lambda t: A.upsample_linear1d(t, [5], False), torch.randn(3, 4))
    same_error(lambda t: A.upsample_linear1d(t, [0], False), torch.randn(2, 3, 4))
    same_error(lambda t: A.upsample_bilinear2d(t, [5, 5], False), torch.randn(2, 0, 4, 4))
    same_error(lambda t: A.upsample_bilinear2d(t, [5], False), torch.randn(2, 3, 4, 4))
    same_error(
        lambda t: A.upsample_bicubic2d(t, [5, 5], False), torch.ones(2, 3, 4, 4, dtype=torch.long)
    )
    same_error(
        lambda t: A.upsample_trilinear3d(t, [5, 5, 5], False),
        torch.ones(1, 1, 2, 2, 2, dtype=torch.long),
    )
    same_error(lambda t: A._upsample_nearest_exact1d(t, [5]), torch.ones(2, 3, 4, dtype=torch.long))
    same_error(
        lambda g: A.upsample_linear1d_backward(g, [5], [2, 3, 7], False), torch.randn(2, 3, 4)
    )
    same_error(
        lambda g: A.upsample_bilinear2d_backward(g, [5, 5], [2, 3, 7, 7], False),
        torch.randn(2, 3, 4, 4),
    )
    same_error(
        lambda g: A.upsample_bilinear2d_backward(g, [5, 5], [2, 3, 7, 7], False),
        torch.randn(2, 3, 4),
    )
    same_error(
        lambda g: A.upsample_nearest1d_backward(g, [5], [2, 3, 7]),
        torch.ones(2, 3, 5, dtype=torch.long),
    )
    same_error(
        lambda g: A.upsample_nearest3d_backward(g, [5, 5, 5], [2, 3, 7, 7, 7]),
        torch.randn(2, 3, 5, 5, 4),
    )


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_backward(mode):
    cases = [
        ((2, 3, 6), (2, 3)),
        ((3, 6), (1, 0)),
        ((2, 3, 5, 6), (1, 2, 3, 1)),
        ((3, 5, 6), (2, 2, 0, 1)),
        ((1, 2, 4, 5, 3), (1, 1, 2, 0, 1, 2)),
        ((2, 4, 5, 3), (0, 1, 1, 2, 2, 1)),
    ]
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
    same_error(
        lambda g, s: A.reflection_pad2d_backward(g, s, [1, 1, 1, 1]), torch.randn(2, 3, 7, 8), x2
    )
    same_error(
        lambda g, s: A.replication_pad2d_backward(g, s, [1, 1, 1, 1]), torch.randn(2, 3, 8, 7), x2
    )
    x3 = torch.randn(2, 3, 5, 5, 5)
    same_error(
        lambda g, s: A.reflection_pad3d_backward(g, s, [1] * 6), torch.randn(2, 3, 8, 7, 7), x3
    )
    same_error(
        lambda g, s: A.reflection_pad3d_backward(g, s, [1] * 4), torch.randn(2, 3, 7, 7, 7), x3
    )
    same_error(
        lambda g, s: A.replication_pad3d_backward(g, s, [1] * 6), torch.randn(2, 3, 7, 7, 8), x3
    )
    same_error(lambda g, s: A.replication_pad2d_backward(g, s, [1, 1, 1, 1]),
               torch.ones(2, 3, 7, 7, dtype=torch.long), x2.long())


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_bilinear_antialias(align_corners, mode):
    cases = [((2, 3, 9, 8), dict(size=(4, 3))), ((1, 2, 8, 8), dict(size=(5, 12))),
             ((1, 1, 5, 7), dict(scale_factor=(0.4, 0.6))), ((1, 1, 6, 6), dict(size=(6, 3))),
             ((1, 2, 4, 4), dict(size=(1, 1))), ((2, 2, 9, 7), dict(size=(20, 4)))]
    for shape, kw in cases:
        grads_close(
            lambda t: F.interpolate(
                t, mode=mode, antialias=True, align_corners=align_corners, **kw
            ),
            torch.randn(shape),
        )
    run_both(
        lambda t: A._upsample_bilinear2d_aa(t, [3, 5], False),
        torch.randn(1, 4, 7, 6).transpose(2, 3),
        **TOL,
    )
    same_error(
        lambda t: A._upsample_bilinear2d_aa(t, [3, 3], False),
        torch.ones(1, 2, 4, 4, dtype=torch.long),
    )
    same_error(lambda t: A._upsample_bilinear2d_aa(t, [3, 3], False), torch.randn(1, 0, 4, 4))
    # A channels_last input gives a channels_last output, as on CPU (PyTorch's
    # test_upsamplingBiMode2d_consistency checks it; bicubic lacked it).
    run_both(
        lambda t: F.interpolate(t, size=(5, 4), mode=mode, antialias=True,
                                align_corners=align_corners),
        torch.randn(2, 3, 9, 8).contiguous(memory_format=torch.channels_last),
        check_stride=True,
        **TOL,
    )


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
    run_both(
        lambda a, b: F.grid_sample(a, b, **kw),
        torch.randn(2, 6, 5, 3).transpose(1, 3),
        grid[:, :, :5],
        **tol,
    )
    run_both(lambda a, b: F.grid_sample(a, b, **kw), torch.randn(1, 2, 1, 1), grid[:1], **tol)


def test_grid_sample_errors():
    same_error(
        lambda a, b: F.grid_sample(a, b, align_corners=False),
        torch.randn(2, 3, 4, 4),
        torch.rand(1, 2, 2, 2),
    )
    same_error(
        lambda a, b: F.grid_sample(a, b, align_corners=False),
        torch.randn(2, 3, 4, 4),
        torch.rand(2, 2, 2, 3),
    )
    same_error(
        lambda a, b: F.grid_sample(a, b, align_corners=False),
        torch.randn(2, 3, 0, 4),
        torch.rand(2, 2, 2, 2),
    )
    same_error(
        lambda a, b: A.grid_sampler_2d(a, b, 0, 0, False),
        torch.randn(2, 3, 4, 4),
        torch.rand(2, 2, 2, 2).double(),
    )

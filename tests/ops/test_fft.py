"""torch.fft on tpu against CPU: every transform reaches _fft_r2c, _fft_c2r or
_fft_c2c (SpectralOps.cpp), lowered to stablehlo.fft with PyTorch's
normalization; no CPU fallback allowed."""

import pytest
import torch

from _util import run_both, same_error

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md

NORMS = [None, "forward", "ortho"]
FLOATS = [torch.float32, torch.float64]


def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "fn", [torch.fft.fft, torch.fft.ifft, torch.fft.rfft, torch.fft.ihfft],
    ids=["fft", "ifft", "rfft", "ihfft"])
def test_one_dim_real_input(fn, dtype, norm):
    x = rand(4, 7, dtype=dtype)
    run_both(lambda a: fn(a, norm=norm), x)
    run_both(lambda a: fn(a, n=10, dim=0, norm=norm), x)  # zero-padded
    run_both(lambda a: fn(a, n=3, norm=norm), x)  # trimmed
    run_both(lambda a: fn(a.t(), norm=norm), x)  # non-contiguous
    run_both(lambda a: fn(a, norm=norm), rand(8, dtype=dtype))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize(
    "fn", [torch.fft.fft, torch.fft.ifft, torch.fft.irfft, torch.fft.hfft],
    ids=["fft", "ifft", "irfft", "hfft"])
def test_one_dim_complex_input(fn, dtype, norm):
    x = torch.randn(3, 6, dtype=dtype)
    run_both(lambda a: fn(a, norm=norm), x)
    run_both(lambda a: fn(a, n=9, norm=norm), x)  # odd output length
    run_both(lambda a: fn(a, n=4, dim=0, norm=norm), x)
    run_both(lambda a: fn(a[:, ::2], norm=norm), x)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize(
    "fn", [torch.fft.fft2, torch.fft.ifft2, torch.fft.rfft2, torch.fft.irfft2,
           torch.fft.hfft2, torch.fft.ihfft2, torch.fft.fftn, torch.fft.ifftn,
           torch.fft.rfftn, torch.fft.irfftn, torch.fft.hfftn, torch.fft.ihfftn],
    ids=lambda f: f.__name__)
def test_multi_dim(fn, norm):
    x = rand(3, 4, 6)
    run_both(lambda a: fn(a, norm=norm), x)
    run_both(lambda a: fn(a, s=(5, 4), dim=(0, 2), norm=norm), x)
    run_both(lambda a: fn(a, dim=(2, 0), norm=norm), x)  # dims out of order
    # rfft* and ihfft* take real input only.
    if not fn.__name__.removeprefix("fft_").startswith(("rfft", "ihfft")):
        run_both(lambda a: fn(a, norm=norm), torch.randn(3, 4, 6, dtype=torch.complex64))


def test_more_than_three_dims():
    x = rand(2, 3, 2, 4, 5)
    run_both(torch.fft.fftn, x)
    run_both(torch.fft.rfftn, x)
    run_both(torch.fft.irfftn, torch.randn(2, 3, 2, 4, 5, dtype=torch.complex64))
    run_both(lambda a: torch.fft.ifftn(a, norm="ortho"), x.to(torch.complex64))


def test_integer_and_scalar_edge_inputs():
    run_both(torch.fft.fft, torch.arange(6))
    run_both(torch.fft.rfft, torch.arange(5))
    run_both(torch.fft.fft, rand(1))


def test_round_trips():
    x = rand(5, 8)
    run_both(lambda a: torch.fft.irfft(torch.fft.rfft(a), n=8), x)
    run_both(lambda a: torch.fft.ifft(torch.fft.fft(a)), x)
    run_both(lambda a: torch.fft.fftshift(torch.fft.fft2(a)), x)


def test_stft():
    x = rand(2, 64)
    window = torch.hann_window(16)
    run_both(lambda a, w: torch.stft(a, 16, hop_length=4, window=w, return_complex=True),
             x, window)
    run_both(lambda a: torch.stft(a, 8, return_complex=True, center=False), x)
    run_both(lambda a: torch.stft(a, 8, return_complex=True, onesided=False, normalized=True), x)


def test_errors_match_cpu():
    same_error(lambda a: torch.fft.fft(a, n=0), rand(4))
    same_error(lambda a: torch.fft.fft2(a), rand(4))
    same_error(lambda a: torch.fft.fft(a, norm="bogus"), rand(4))


@pytest.mark.parametrize(
    "fn", [torch.fft.rfft, torch.fft.fft, torch.fft.ifft, torch.fft.rfft2, torch.fft.ihfft],
    ids=["rfft", "fft", "ifft", "rfft2", "ihfft"])
def test_gradients(fn):
    """Backward of the transforms (derivatives.yaml: fft_r2c_backward and
    friends, themselves FFTs) through a real loss, against CPU."""
    x = rand(4, 6)
    w = torch.randn(fn(x).shape, dtype=torch.complex64)

    def loss_grad(a, b):
        a = a.detach().requires_grad_()
        (fn(a) * b).real.sum().backward()
        return a.grad

    run_both(loss_grad, x, w)


def test_complex_to_real_gradients():
    z = torch.randn(3, 5, dtype=torch.complex64)

    def loss_grad(a):
        a = a.detach().requires_grad_()
        (torch.fft.irfft(a, n=8) ** 2).sum().backward()
        return a.grad

    run_both(loss_grad, z)

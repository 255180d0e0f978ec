"""Random ops on tpu: torch.manual_seed makes draws repeat, successive draws
differ, and the moments of 10^5 samples match each distribution (rand, randn,
randint, bernoulli, dropout). Bounds are about 6 standard errors, so a correct
generator fails them with negligible probability."""

import math

import pytest
import torch
import torch.nn.functional as F

import torchtpu

from _util import assert_close_cpu, no_fallback, same_error

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md

N = 100_000


def draw(fn):
    """fn() on tpu with no CPU fallback, as a float64 CPU tensor."""
    with no_fallback():
        out = fn()
    assert out.device.type == "tpu"
    return out.cpu()


def check_moments(x, mean, var):
    x = x.double().flatten()
    n = x.numel()
    assert abs(x.mean().item() - mean) < 6 * math.sqrt(var / n), x.mean()
    # The variance of a sample variance is about 2 var^2 / n for these shapes
    # (exact for the normal; the uniform's is smaller).
    assert abs(x.var().item() - var) < 6 * var * math.sqrt(2 / n) + 1e-12, x.var()


FACTORIES = {
    "rand": lambda: torch.rand(1000, device="tpu"),
    "randn": lambda: torch.randn(1000, device="tpu"),
    "randint": lambda: torch.randint(-5, 50, (1000,), device="tpu"),
    "bernoulli": lambda: torch.bernoulli(torch.full((1000,), 0.3, device="tpu")),
    "dropout": lambda: F.dropout(torch.ones(1000, device="tpu"), 0.4),
    "normal_": lambda: torch.empty(1000, device="tpu").normal_(2, 3),
    "uniform_": lambda: torch.empty(1000, device="tpu").uniform_(-1, 1),
    "bernoulli_p": lambda: torch.empty(1000, device="tpu").bernoulli_(0.7),
    "rand_f64": lambda: torch.rand(1000, dtype=torch.float64, device="tpu"),
    "randn_bf16": lambda: torch.randn(1000, dtype=torch.bfloat16, device="tpu"),
    "randperm": lambda: torch.randperm(1000, device="tpu"),
    "multinomial": lambda: torch.multinomial(torch.rand(1000, device="tpu"), 500),
    "multinomial_replacement": lambda: torch.multinomial(torch.rand(5, device="tpu"), 1000, True),
    "exponential_": lambda: torch.empty(1000, device="tpu").exponential_(2.0),
    "cauchy_": lambda: torch.empty(1000, device="tpu").cauchy_(),
    "log_normal_": lambda: torch.empty(1000, device="tpu").log_normal_(),
    "geometric_": lambda: torch.empty(1000, dtype=torch.int64, device="tpu").geometric_(0.3),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_manual_seed_repeats_and_draws_differ(name):
    fn = FACTORIES[name]
    torch.manual_seed(123)
    a = draw(fn)
    b = draw(fn)
    torch.manual_seed(123)
    assert torch.equal(draw(fn), a)
    assert torch.equal(draw(fn), b)
    assert not torch.equal(a, b)
    torch.manual_seed(124)
    assert not torch.equal(draw(fn), a)


def test_successive_draws_are_not_shifted_copies():
    # Each draw must use fresh counters: the next draw is not the previous one
    # moved by a few elements.
    a = draw(lambda: torch.rand(1000, device="tpu"))
    b = draw(lambda: torch.rand(1000, device="tpu"))
    for shift in range(1, 4):
        assert not torch.equal(a[shift:], b[:-shift])
        assert not torch.equal(b[shift:], a[:-shift])
    assert abs(torch.corrcoef(torch.stack([a, b]))[0, 1].item()) < 0.2


def test_explicit_generator():
    g = torch.Generator(device="tpu")
    g.manual_seed(5)
    a = draw(lambda: torch.rand(100, device="tpu", generator=g))
    b = draw(lambda: torch.randn(100, device="tpu", generator=g))
    g.manual_seed(5)
    assert torch.equal(draw(lambda: torch.rand(100, device="tpu", generator=g)), a)
    assert torch.equal(draw(lambda: torch.randn(100, device="tpu", generator=g)), b)


def test_generator_state_round_trip():
    state = torch.tpu.get_rng_state()
    a = draw(lambda: torch.randn(100, device="tpu"))
    torch.tpu.set_rng_state(state)
    assert torch.equal(draw(lambda: torch.randn(100, device="tpu")), a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_rand_moments(dtype):
    x = draw(lambda: torch.rand(N, dtype=dtype, device="tpu"))
    assert x.dtype == dtype and x.shape == (N,)
    assert x.min() >= 0 and x.max() < 1
    check_moments(x, 0.5, 1 / 12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_randn_moments(dtype):
    x = draw(lambda: torch.randn(N, dtype=dtype, device="tpu"))
    assert x.dtype == dtype
    assert torch.isfinite(x).all()
    check_moments(x, 0.0, 1.0)
    # Tails of a normal: P(|z| > 3) = 0.0027.
    assert abs((x.double().abs() > 3).double().mean().item() - 0.0027) < 0.0012


def test_uniform_normal_in_place_parameters():
    x = draw(lambda: torch.empty(N, device="tpu").uniform_(-2, 6))
    assert x.min() >= -2 and x.max() < 6
    check_moments(x, 2.0, 64 / 12)
    x = draw(lambda: torch.empty(400, 250, device="tpu").normal_(-1.5, 0.5))
    assert x.shape == (400, 250)
    check_moments(x, -1.5, 0.25)
    # Through a non-contiguous view: only the viewed elements change.
    base = torch.zeros(4, 6, device="tpu")
    with no_fallback():
        base[:, ::2].uniform_(1, 2)
    host = base.cpu()
    assert (host[:, 1::2] == 0).all() and (host[:, ::2] >= 1).all()


def test_normal_tensor_overloads():
    mean = torch.arange(4.0).repeat(N // 4)
    x = draw(lambda: torch.normal(mean.to("tpu"), 2.0))
    for k in range(4):
        check_moments(x[k::4], float(k), 4.0)
    x = draw(lambda: torch.normal(1.0, torch.full((N,), 0.5, device="tpu")))
    check_moments(x, 1.0, 0.25)
    x = draw(lambda: torch.normal(torch.zeros(N, device="tpu"), torch.ones(N, device="tpu")))
    check_moments(x, 0.0, 1.0)


@pytest.mark.parametrize("low, high", [(0, 10), (-5, 3), (0, 2**40)])
def test_randint(low, high):
    x = draw(lambda: torch.randint(low, high, (N,), device="tpu"))
    assert x.dtype == torch.int64
    assert x.min() >= low and x.max() < high
    n = high - low
    check_moments(x, low + (n - 1) / 2, (n * n - 1) / 12)
    if n <= 10:
        counts = torch.bincount(x - low, minlength=n).double()
        assert (counts - N / n).abs().max() < 6 * math.sqrt(N / n)


def test_random_in_place_dtypes():
    x = draw(lambda: torch.empty(N, dtype=torch.uint8, device="tpu").random_())
    assert x.min() == 0 and x.max() == 255
    x = draw(lambda: torch.empty(N, dtype=torch.bool, device="tpu").random_())
    assert abs(x.double().mean().item() - 0.5) < 0.01
    x = draw(lambda: torch.empty(N, device="tpu").random_(3, 7))
    assert x.dtype == torch.float32 and set(x.unique().tolist()) == {3.0, 4.0, 5.0, 6.0}
    x = draw(lambda: torch.empty(N, dtype=torch.int32, device="tpu").random_(100))
    assert x.min() >= 0 and x.max() < 100


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_bernoulli(p):
    x = draw(lambda: torch.bernoulli(torch.full((N,), p, device="tpu")))
    assert x.dtype == torch.float32 and set(x.unique().tolist()) <= {0.0, 1.0}
    check_moments(x, p, p * (1 - p))
    x = draw(lambda: torch.empty(N, dtype=torch.int64, device="tpu").bernoulli_(p))
    assert x.dtype == torch.int64
    check_moments(x, p, p * (1 - p))
    probs = torch.tensor([0.0, 1.0, 0.25]).repeat(N // 3)
    x = draw(lambda: torch.empty(probs.shape, device="tpu").bernoulli_(probs.to("tpu")))
    assert (x[0::3] == 0).all() and (x[1::3] == 1).all()
    check_moments(x[2::3], 0.25, 0.25 * 0.75)


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout(p):
    x = torch.full((N,), 2.0)
    y = draw(lambda: F.dropout(x.to("tpu"), p, training=True))
    zero = y == 0
    frac = zero.double().mean().item()
    assert abs(frac - p) < 6 * math.sqrt(p * (1 - p) / N)
    torch.testing.assert_close(y[~zero], torch.full_like(y[~zero], 2.0 / (1 - p)))
    assert torch.equal(draw(lambda: F.dropout(x.to("tpu"), p, training=False)), x)


def test_native_dropout_and_backward():
    x = torch.randn(300, 300)
    with no_fallback():
        out, mask = torch.native_dropout(x.to("tpu"), 0.25, True)
        eval_out, eval_mask = torch.native_dropout(x.to("tpu"), 0.25, False)
    assert mask.dtype == torch.bool and eval_mask.cpu().all()
    torch.testing.assert_close(eval_out.cpu(), x)
    m = mask.cpu()
    torch.testing.assert_close(out.cpu(), x * m / 0.75)
    xt = x.to("tpu").requires_grad_()
    with no_fallback():
        y = F.dropout(xt, 0.25)
        y.backward(torch.ones_like(y))
    kept = y.detach().cpu() != 0
    torch.testing.assert_close(xt.grad.cpu(), kept.float() / 0.75)


def test_module_dropout_and_init():
    torch.manual_seed(7)
    with no_fallback():
        lin = torch.nn.Linear(64, 64).to("tpu")
        torch.nn.init.normal_(lin.weight, 0, 0.02)
        torch.nn.init.uniform_(lin.bias, -0.1, 0.1)
        drop = torch.nn.Dropout(0.5).train()
        y = drop(lin(torch.ones(8, 64, device="tpu")))
    assert y.shape == (8, 64)
    check_moments(lin.weight.detach().cpu(), 0.0, 0.02**2)


def test_random_errors():
    x = torch.empty(3, device="tpu")
    with pytest.raises(RuntimeError, match=r"uniform_ expects to return a \[from, to\) range"):
        x.uniform_(1, 0)
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0, but found std -1"):
        x.normal_(0, -1)
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p=2"):
        x.bernoulli_(2.0)
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to'"):
        x.random_(5, 3)
    with pytest.raises(NotImplementedError):
        torch.empty(3, dtype=torch.long, device="tpu").uniform_()


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.int32, torch.uint8])
def test_random_full_range_of_every_integer_dtype(dtype):
    # random_(min, None) draws up to the dtype's maximum (2^16 - 1, 2^32 - 1),
    # as ATen's random_from_to; uint16 raised and uint32 stopped at 2^24.
    info = torch.iinfo(dtype)
    t = draw(lambda: torch.empty(4000, dtype=dtype, device="tpu").random_(int(info.min), None))
    d = t.double()
    span = float(info.max) - float(info.min)
    assert d.min() >= info.min and d.min() < info.min + 0.01 * span
    assert d.max() <= info.max and d.max() > info.max - 0.01 * span


def test_random_and_normal_checks_match_cpu():
    # uint64's top wraps to -1 in ATen's check, so CPU refuses to=None there.
    same_error(lambda t: t.random_(0, None), torch.empty(3, dtype=torch.uint64))
    # Every element of a std tensor, at the call (CUDA reads std.min() too).
    same_error(lambda m, s: torch.normal(m, s), torch.zeros(3), torch.tensor([1.0, -1.0, 1.0]))
    same_error(lambda s: torch.normal(0.0, s), torch.tensor([1.0, float("nan")]))
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        torch.normal(torch.zeros(2, device="tpu"), torch.tensor([-1.0, 1.0], device="tpu"))
    # randperm: n - 1 must fit out's dtype, and a float dtype must hold n.
    same_error(lambda o: torch.randperm(257, out=o), torch.empty(0, dtype=torch.uint8))
    same_error(lambda o: torch.randperm(2**11 + 2, out=o), torch.empty(0, dtype=torch.half))
    assert sorted(draw(lambda: torch.randperm(256, dtype=torch.uint8, device="tpu")).tolist()) \
        == list(range(256))


@pytest.mark.parametrize("mean_dtype,std_dtype", [(torch.float64, torch.float32),
                                                  (torch.float32, torch.float64),
                                                  (None, torch.float64), (torch.float64, None)])
def test_normal_takes_means_dtype(mean_dtype, std_dtype):
    mean = torch.zeros(8, dtype=mean_dtype) if mean_dtype else 0.0
    std = torch.ones(8, dtype=std_dtype) if std_dtype else 1.0
    expected = torch.normal(mean, std).dtype
    on = [x.to("tpu") if isinstance(x, torch.Tensor) else x for x in (mean, std)]
    assert draw(lambda: torch.normal(*on)).dtype == expected


def test_empty_draws():
    with no_fallback():
        assert torch.rand(0, 3, device="tpu").shape == (0, 3)
        assert torch.randn(0, device="tpu").cpu().numel() == 0
        out, mask = torch.native_dropout(torch.ones(0, device="tpu"), 0.5, True)
    assert out.shape == (0,) and mask.shape == (0,)


def test_native_dropout_backward_promotes_integral_grads():
    # Found by the OpInfo sweep: the Python-float scale promotes like ATen's kernel.
    grad = torch.ones(3, dtype=torch.long)
    mask = torch.tensor([True, False, True])
    expected = torch.ops.aten.native_dropout_backward(grad, mask, 2.0)
    with no_fallback():
        out = torch.ops.aten.native_dropout_backward(grad.to("tpu"), mask.to("tpu"), 2.0)
    assert_close_cpu(out, expected)


@pytest.mark.parametrize("n,dtype", [(1, torch.int64), (10, torch.int64), (300, torch.int32),
                                     (7, torch.float32)])
def test_randperm_is_a_permutation(n, dtype):
    p = draw(lambda: torch.randperm(n, dtype=dtype, device="tpu"))
    assert p.dtype == dtype and p.shape == (n,)
    assert sorted(p.long().tolist()) == list(range(n))
    out = torch.empty(2, dtype=torch.int64, device="tpu")
    with no_fallback():
        torch.randperm(n, out=out)
    assert sorted(out.cpu().tolist()) == list(range(n))


def test_randperm_positions_are_uniform():
    with no_fallback():
        perms = torch.stack([torch.randperm(8, device="tpu") for _ in range(2000)]).cpu()
    # Each value lands first with probability 1/8: 2000 draws, 6 sigma = 0.044.
    freq = torch.bincount(perms[:, 0], minlength=8).double() / 2000
    assert (freq - 1 / 8).abs().max() < 0.044, freq


def test_multinomial_with_replacement_frequencies():
    w = torch.tensor([[0.1, 0.2, 0.0, 0.7], [4.0, 0.0, 0.0, 4.0]])
    s = draw(lambda: torch.multinomial(w.to("tpu"), N, replacement=True))
    assert s.dtype == torch.int64 and s.shape == (2, N)
    for row, weights in zip(s, w):
        p = weights / weights.sum()
        freq = torch.bincount(row, minlength=4).double() / N
        sigma = (p * (1 - p) / N).sqrt()
        assert ((freq - p).abs() <= 6 * sigma + 1e-12).all(), (freq, p)


def test_multinomial_without_replacement():
    w = torch.tensor([0.1, 0.2, 0.0, 0.7])
    s = draw(lambda: torch.multinomial(w.to("tpu").repeat(N // 2, 1), 3))
    assert s.shape == (N // 2, 3)
    assert (s[:, 0] != s[:, 1]).all() and (s[:, 1] != s[:, 2]).all() and (s[:, 0] != s[:, 2]).all()
    assert (s != 2).all()  # the zero-weight category is never drawn...
    last = draw(lambda: torch.multinomial(torch.tensor([1.0, 0.0, 1.0], device="tpu"), 3))
    assert last[2].item() == 1  # ...unless nothing else is left, as on CPU
    # First pick ~ w; second pick given first = 3 (prob 0.7): 1 with 2/3.
    n = N // 2
    freq = torch.bincount(s[:, 0], minlength=4).double() / n
    assert ((freq - w).abs() <= 6 * (w * (1 - w) / n).sqrt() + 1e-12).all(), freq
    after3 = s[s[:, 0] == 3, 1]
    assert abs((after3 == 1).double().mean().item() - 2 / 3) < 6 * math.sqrt(2 / 9 / after3.numel())
    one_d = draw(lambda: torch.multinomial(torch.ones(6, device="tpu"), 6))
    assert sorted(one_d.tolist()) == list(range(6))


@pytest.mark.parametrize("args", [
    (torch.tensor([1.0, -1.0]), 1, False),
    (torch.tensor([1.0, float("nan")]), 1, True),
    (torch.tensor([[1.0, 2.0], [0.0, 0.0]]), 1, True),
    (torch.tensor([1.0, 0.0]), 3, False),
    (torch.tensor([1.0, 0.0]), 0, False),
    (torch.ones(2, 2, 2), 1, False),
    (torch.tensor([1, 2]), 1, False),
])
def test_multinomial_errors_match_cpu(args):
    probs, k, replacement = args
    with pytest.raises(RuntimeError) as cpu:
        torch.multinomial(probs, k, replacement)
    with pytest.raises(RuntimeError) as tpu:
        torch.multinomial(probs.to("tpu"), k, replacement)
        torchtpu.sync()  # fused mode reports value checks at the next sync
    assert str(tpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]


def test_exponential_log_normal_geometric_moments():
    check_moments(draw(lambda: torch.empty(N, device="tpu").exponential_(2.0)), 0.5, 0.25)
    z = draw(lambda: torch.empty(N, device="tpu").log_normal_(0.5, 0.25)).log()
    check_moments(z, 0.5, 0.0625)
    p = 0.25
    g = draw(lambda: torch.empty(N, dtype=torch.int64, device="tpu").geometric_(p))
    assert g.dtype == torch.int64 and g.min().item() >= 1
    check_moments(g, 1 / p, (1 - p) / p**2)


def test_cauchy_quartiles():
    # Cauchy(median 1, scale 2) has no moments; its quartiles are 1 -+ 2.
    c = draw(lambda: torch.empty(N, device="tpu").cauchy_(1.0, 2.0)).double()
    q = torch.quantile(c[:10000], torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    assert (q - torch.tensor([-1.0, 1.0, 3.0], dtype=torch.float64)).abs().max() < 0.3, q


@pytest.mark.parametrize("fn", [
    lambda t: t.exponential_(0), lambda t: t.geometric_(1), lambda t: t.log_normal_(0, 0),
    lambda t: t.cauchy_(0, 0), lambda t: t.long().exponential_(),
])
def test_distribution_errors_match_cpu(fn):
    with pytest.raises(RuntimeError) as cpu:
        fn(torch.empty(4))
    with pytest.raises(RuntimeError) as tpu:
        fn(torch.empty(4, device="tpu"))
    assert str(tpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]


# ----------------------------------------- torch.distributions' samplers (lowered)

@pytest.mark.parametrize("alpha", [0.3, 1.0, 2.5, 20.0])
def test_gamma_moments(alpha):
    # Marsaglia-Tsang with a fixed number of candidates per element; alpha < 1
    # boosted. Gamma(alpha, 1): mean = var = alpha; samples strictly positive.
    x = draw(lambda: torch._standard_gamma(torch.full((N,), alpha, device="tpu"))).double()
    assert (x > 0).all()
    assert abs(x.mean().item() - alpha) < 6 * math.sqrt(alpha / N)
    # A sample variance varies by var * sqrt((2 + excess kurtosis) / n); the
    # gamma's excess kurtosis is 6 / alpha.
    assert abs(x.var().item() - alpha) < 6 * alpha * math.sqrt((2 + 6 / alpha) / N)


def test_distributions_sample_on_tpu():
    beta = draw(lambda: torch.distributions.Beta(torch.full((N,), 2.0, device="tpu"),
                                                 torch.full((N,), 5.0, device="tpu")).sample())
    check_moments(beta, 2 / 7, 2 * 5 / (7 * 7 * 8))
    concentration = torch.tensor([1.0, 2.0, 3.0], device="tpu").expand(N, 3)
    dirichlet = draw(lambda: torch.distributions.Dirichlet(concentration).sample())
    assert (dirichlet.sum(-1) - 1).abs().max() < 1e-5 and (dirichlet > 0).all()
    for k, a in enumerate((1.0, 2.0, 3.0)):
        check_moments(dirichlet[:, k], a / 6, a * (6 - a) / (36 * 7))
    chi2 = draw(lambda: torch.distributions.Chi2(torch.full((N,), 3.0, device="tpu")).sample())
    check_moments(chi2, 3.0, 6.0)


@pytest.mark.parametrize("rate", [0.0, 0.5, 4.0, 9.9, 10.0, 50.0, 1000.0])
def test_poisson_moments_and_support(rate):
    # Knuth's product below rate 10, PTRS from 10: integer counts, mean = var = rate.
    x = draw(lambda: torch.poisson(torch.full((N,), rate, device="tpu")))
    assert torch.equal(x, x.round()) and (x >= 0).all()
    if rate == 0:
        assert (x == 0).all()
    else:
        check_moments(x, rate, rate)


def test_gamma_poisson_follow_the_seed_and_dtypes():
    alpha = torch.full((64,), 1.5, device="tpu")
    torch.manual_seed(3)
    a = torch._standard_gamma(alpha).cpu()
    torch.manual_seed(3)
    assert torch.equal(torch._standard_gamma(alpha).cpu(), a)
    assert not torch.equal(torch._standard_gamma(alpha).cpu(), a)
    for dtype in (torch.float64, torch.bfloat16, torch.float16):
        out = draw(lambda: torch.poisson(torch.full((8,), 3.0, device="tpu", dtype=dtype)))
        assert out.dtype == dtype
        assert draw(lambda: torch._standard_gamma(alpha.to(dtype))).dtype == dtype


@pytest.mark.parametrize("n, p", [(5, 0.3), (10, 0.5), (20, 0.9), (100, 0.3), (1000, 0.02),
                                  (1000, 0.7)])
def test_binomial_moments_and_support(n, p):
    # Inversion below n q = 10 (q = min(p, 1 - p)), BTRS from there.
    x = draw(lambda: torch.distributions.Binomial(torch.full((N,), float(n), device="tpu"),
                                                  torch.full((N,), p, device="tpu")).sample())
    assert torch.equal(x, x.round()) and (x >= 0).all() and (x <= n).all()
    check_moments(x, n * p, n * p * (1 - p))


def test_binomial_edges():
    count = torch.tensor([0.0, 7.0, 7.0, -1.0], device="tpu")
    prob = torch.tensor([0.5, 0.0, 1.0, 0.5], device="tpu")
    assert draw(lambda: torch.binomial(count, prob)).tolist() == [0.0, 0.0, 7.0, 0.0]


@pytest.mark.parametrize("make", [
    lambda d: torch.empty(0, dtype=torch.int64, device=d).normal_(),
    lambda d: torch.randn(0, dtype=torch.int16, device=d),
    lambda d: torch.empty(0, 3, dtype=torch.uint8, device=d).log_normal_(),
    lambda d: torch.empty(0, dtype=torch.int32, device=d).exponential_(),
])
def test_empty_integer_tensor_samples_as_cpu(make):
    # ATen returns an empty self after the parameter checks and before the
    # kernel's dtype dispatch (test_foreach builds torch.randn([0], dtype=int));
    # tpu raised '"normal_kernel_cpu" not implemented for ...'.
    expected = make("cpu")
    with no_fallback():
        got = make("tpu")
    assert got.shape == expected.shape and got.dtype == expected.dtype


@pytest.mark.parametrize("make", [
    lambda d: torch.empty(0, dtype=torch.int64, device=d).normal_(0, -1),
    lambda d: torch.empty(2, dtype=torch.int64, device=d).normal_(),
    lambda d: torch.empty(0, dtype=torch.int64, device=d).log_normal_(0, -1),
    lambda d: torch.empty(2, dtype=torch.int64, device=d).log_normal_(),
    lambda d: torch.empty(2, dtype=torch.int64, device=d).exponential_(),
    lambda d: torch.empty(0, dtype=torch.int64, device=d).exponential_(-1),
    lambda d: torch.empty(0, dtype=torch.int64, device=d).cauchy_(),
])
def test_sampler_checks_in_cpus_order(make):
    with pytest.raises(Exception) as cpu:
        make("cpu")
    with pytest.raises(Exception) as tpu:
        make("tpu")
    assert type(tpu.value) is type(cpu.value) and str(tpu.value) == str(cpu.value)

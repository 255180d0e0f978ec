"""Neural-network ops outside convolution, pooling and resizing on tpu compared
with CPU PyTorch: group_norm on any layout, weight_norm, unfold/fold,
embedding_bag and embedding's max_norm, ctc_loss, the margin losses, glu, prelu,
rrelu and channel_shuffle; values, dtype and shape with no CPU fallback,
gradients, and the CPU kernels' errors."""



import pytest
import torch
import torch.nn.functional as F

from _nn_util import TOL, grads_close
from _util import assert_close_cpu, no_fallback, run_both, same_error

pytestmark = [pytest.mark.fused_pass, pytest.mark.opt_out_pass]  # passes: tests/README.md

A = torch.ops.aten


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_backward(affine):
    w, b = (torch.randn(6), torch.randn(6)) if affine else (None, None)
    for shape in ((2, 6, 5, 3), (3, 6), (1, 6, 7)):
        if affine:
            grads_close(lambda x, w, b: F.group_norm(x, 3, w, b), torch.randn(shape), w, b)
        else:
            grads_close(lambda x: F.group_norm(x, 2), torch.randn(shape))


@pytest.mark.parametrize("layout", ["channels_last", "permuted", "strided"])
def test_group_norm_any_layout(layout):
    # ATen's composite forward starts with input.view(...), which raised for
    # these; CPU's kernel takes any layout and keeps a channels_last input's.
    x = torch.randn(2, 8, 6, 5)
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    elif layout == "permuted":
        x = x.permute(0, 1, 3, 2)
    else:
        x = torch.randn(2, 8, 6, 10)[..., ::2]
    w, b = torch.randn(8), torch.randn(8)
    grads_close(lambda x, w, b: F.group_norm(x, 4, w, b), x, w, b)
    out = F.group_norm(x.to("tpu"), 4, w.to("tpu"), b.to("tpu"))
    assert out.stride() == F.group_norm(x, 4, w, b).stride()
    assert_close_cpu(out.view(2, -1) if out.is_contiguous() else out.reshape(2, -1),
                     F.group_norm(x, 4, w, b).reshape(2, -1))


def test_native_group_norm_input_layouts():
    # ATen's native_group_norm takes its input dense in the suggested memory
    # format only (F.group_norm passes it a contiguous() copy): a strided input
    # raises CPU's error, where tpu used to return a value (the OpInfo sweep's
    # noncontiguous run); channels_last is accepted and keeps its layout.
    w, b = torch.randn(6), torch.randn(6)
    x = torch.randn(1, 6, 6)
    for device in ("cpu", "tpu"):  # sliced on the device: .to() would make it contiguous
        with pytest.raises(RuntimeError, match=r"^Expected X\.is_contiguous\(memory_format\)"):
            A.native_group_norm(x.to(device)[..., ::2], w.to(device), b.to(device), 1, 6, 3, 2,
                                0.5)
    x = torch.randn(2, 6, 3, 4).to(memory_format=torch.channels_last)
    actual, expected = run_both(lambda x, w, b: A.native_group_norm(x, w, b, 2, 6, 12, 3, 1e-5),
                                x, w, b)
    assert actual[0].stride() == expected[0].stride()


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_weight_norm(dim):
    v = torch.randn(5, 3, 4)
    g_shape = [1, 1, 1]
    if dim != -1:
        g_shape[dim] = v.shape[dim]
    g = torch.rand(g_shape) + 0.5
    grads_close(lambda v, g: torch._weight_norm(v, g, dim), v, g)
    # The fused op itself (dims 0 and last): its norms equal CPU's.
    if dim in (0, -1):
        d = 0 if dim == 0 else v.dim() - 1
        gd = torch.rand([v.shape[0], 1, 1] if d == 0 else [1, 1, v.shape[2]])
        with no_fallback():
            got = torch._weight_norm_interface(v.to("tpu"), gd.to("tpu"), d)
        assert_close_cpu(got, torch._weight_norm_interface(v, gd, d))


def test_unfold_backward():
    # Overlapping (step < size), disjoint, gapped (step > size) windows, and a
    # window as long as the dim.
    for dim, size, step in ((1, 3, 2), (1, 3, 3), (0, 2, 3), (1, 9, 1), (-1, 1, 4)):
        grads_close(lambda x: x.unfold(dim, size, step), torch.randn(7, 9))
    grads_close(lambda x: x.unfold(0, 1, 1), torch.randn(()))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4])
@pytest.mark.parametrize("last", [False, True])
def test_embedding_bag(mode, padding_idx, last):
    # An empty bag (offsets 4, 4), repeated indices, padding; output and the
    # weight's (and per-sample weights') gradients equal CPU's, no fallback.
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0])
    offsets = torch.tensor([0, 4, 4, 7, 9] if last else [0, 4, 4, 7])
    weight = torch.randn(10, 3)
    psw = torch.rand(9) if mode == "sum" else None

    def bag(w, p=None):
        return F.embedding_bag(idx.to(w.device), w, offsets.to(w.device), mode=mode,
                               padding_idx=padding_idx, include_last_offset=last,
                               per_sample_weights=p)
    grads_close(bag, weight)
    if psw is not None:
        grads_close(bag, weight, psw)


def test_embedding_bag_scale_grad_by_freq():
    # Each row's gradient divided by its index's count, as CUDA's kernel does.
    # (CPU's kernel divides row 2's by 3 here, the count of another index.)
    w = torch.ones(5, 1, device="tpu", requires_grad=True)
    idx, offsets = torch.tensor([1, 1, 1, 2], device="tpu"), torch.tensor([0, 2], device="tpu")
    with no_fallback():
        F.embedding_bag(idx, w, offsets, mode="sum", scale_grad_by_freq=True).sum().backward()
    assert w.grad.cpu().flatten().tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]
    module = torch.nn.EmbeddingBag(10, 3, mode="mean").to("tpu")
    with no_fallback():
        assert module(torch.tensor([[1, 2], [3, 4]], device="tpu")).shape == (2, 3)


@pytest.mark.parametrize("targets_2d", [True, False])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_loss(targets_2d, zero_infinity, reduction):
    # Sample 1 has no target, sample 2 an impossible alignment (5 labels in 4
    # steps: an infinite loss, zeroed with zero_infinity, and its gradient).
    T, N, C = 12, 4, 6
    log_probs = torch.randn(T, N, C).log_softmax(2)
    target_lengths = torch.tensor([3, 0, 5, 2])
    input_lengths = torch.tensor([12, 7, 4, 3])
    padded = torch.randint(1, C, (N, 5))
    targets = padded if targets_2d else torch.cat([padded[i, :target_lengths[i]]
                                                   for i in range(N)])

    def loss(lp):
        d = lp.device
        return F.ctc_loss(lp, targets.to(d), input_lengths.to(d), target_lengths.to(d),
                          reduction=reduction, zero_infinity=zero_infinity)
    grads_close(loss, log_probs)


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=2),
        dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0)),
        dict(kernel_size=3, dilation=2, padding=2, stride=2),
        dict(kernel_size=1),
    ],
)
def test_unfold_fold(kw):
    x = torch.randn(2, 3, 6, 7)
    grads_close(lambda t: F.unfold(t, **kw), x)
    grads_close(lambda t: F.unfold(t, **kw), x[0])
    cols = F.unfold(x, **kw)
    grads_close(lambda t: F.fold(t, (6, 7), **kw), cols)
    grads_close(lambda t: F.fold(t, (6, 7), **kw), cols[1])
    run_both(lambda t: F.unfold(t, **kw), torch.randn(2, 7, 6, 3).transpose(1, 3), **TOL)
    run_both(lambda t: F.unfold(t, **kw), torch.rand(2, 3, 6, 7) > 0.5, **TOL)
    run_both(lambda t: F.fold(t, (6, 7), **kw), cols > 0.5, **TOL)


def test_unfold_fold_errors():
    same_error(lambda t: F.unfold(t, 2), torch.randn(2, 3))
    same_error(lambda t: F.unfold(t, 5), torch.randn(1, 2, 3, 3))
    same_error(lambda t: F.unfold(t, 2, stride=0), torch.randn(1, 2, 3, 3))
    same_error(lambda t: F.unfold(t, 2), torch.ones(1, 2, 3, 3, dtype=torch.long))
    same_error(lambda t: F.fold(t, (4, 4), 2), torch.randn(1, 8, 8))
    same_error(lambda t: F.fold(t, (4, 4), 2), torch.randn(1, 7, 9))
    same_error(lambda t: F.fold(t, (4, 4), 2), torch.ones(1, 8, 9, dtype=torch.long))


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multi_margin_loss(p, reduction):
    x, t, w = torch.randn(5, 4), torch.tensor([0, 3, 1, 1, 2]), torch.rand(4)
    grads_close(lambda a, b: F.multi_margin_loss(a, b, p=p, reduction=reduction), x, t)
    grads_close(
        lambda a, b: F.multi_margin_loss(
            a, b, p=p, margin=0.7, weight=w.to(a.device), reduction=reduction
        ),
        x,
        t,
    )
    grads_close(lambda a, b: F.multi_margin_loss(a, b, p=p, reduction=reduction), x[1], t[1:2])
    grads_close(lambda a, b: F.multi_margin_loss(a, b, p=p, reduction=reduction), x[1], t[1])
    grads_close(
        lambda a, b: F.multi_margin_loss(a, b, p=p, reduction=reduction), x.t()[:, :4], t[:4]
    )


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    x = torch.randn(3, 4)
    t = torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 0, 0, 0]])
    grads_close(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), x, t)
    grads_close(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), x[0], t[0])
    grads_close(
        lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction), torch.randn(4, 3).t(), t
    )
    run_both(lambda a, b: A.multilabel_margin_loss_forward(a, b, 0), x, t, **TOL)


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


def test_glu_backward():
    grads_close(lambda t: F.glu(t), torch.randn(3, 4))
    grads_close(lambda t: F.glu(t, 0), torch.randn(6, 5))
    grads_close(lambda t: F.glu(t, 1), torch.randn(2, 4, 3).transpose(1, 2)[:, :2])
    same_error(lambda g, s: A.glu_backward(g, s, 1), torch.randn(3, 2), torch.randn(3, 5))


def test_embedding_max_norm():
    for norm_type in [2.0, 1.0, 3.0, float("inf")]:
        w = torch.randn(10, 4) * 2
        idx = torch.tensor([[1, 3, 3], [9, 0, 3]])
        run_both(lambda a, i: (F.embedding(i, a, max_norm=1.5, norm_type=norm_type), a), w, idx,
                 **TOL)
    w = torch.randn(10, 4) * 2
    run_both(lambda a, i: (torch.embedding_renorm_(a, i, 1.0, 2.0), a), w, torch.tensor([0, -1, 4]),
             **TOL)
    same_error(
        lambda a, i: torch.embedding_renorm_(a, i, 1.0, 2.0), torch.randn(10, 4), torch.tensor([10])
    )
    same_error(
        lambda a, i: torch.embedding_renorm_(a, i, 1.0, 2.0),
        torch.randn(10, 4),
        torch.tensor([1.0]),
    )


def test_rrelu_eval_and_train():
    x = torch.randn(4, 5)
    grads_close(lambda t: F.rrelu(t, 0.1, 0.3, training=False), x)
    run_both(lambda t: F.rrelu(t, training=False), x.t(), **TOL)
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


def test_glu():
    x = torch.randn(3, 4, 6)
    run_both(F.glu, x)
    run_both(lambda t: F.glu(t, 1), x)
    run_both(lambda t: F.glu(t, 0), x[:2])
    same_error(lambda t: F.glu(t, 0), x)
    same_error(F.glu, torch.tensor(1.0))
    same_error(F.glu, torch.arange(4))


def test_prelu():
    x = torch.randn(2, 3, 4)
    run_both(F.prelu, x, torch.tensor([0.25]))
    run_both(F.prelu, x, torch.rand(3))
    run_both(F.prelu, x.bfloat16(), torch.rand(3).bfloat16())
    xc = x.clone().requires_grad_()
    wc = torch.rand(3).requires_grad_()
    xt = x.to("tpu").requires_grad_()
    wt = wc.detach().to("tpu").requires_grad_()
    g = torch.randn(2, 3, 4)
    F.prelu(xc, wc).backward(g)
    with no_fallback():
        F.prelu(xt, wt).backward(g.to("tpu"))
    assert_close_cpu(xt.grad, xc.grad)
    assert_close_cpu(wt.grad, wc.grad)


def test_channel_shuffle():
    x = torch.randn(2, 6, 3, 2)
    run_both(lambda t: F.channel_shuffle(t, 3), x)
    run_both(lambda t: F.channel_shuffle(t, 2), x[:, :, 0])
    run_both(lambda t: F.channel_shuffle(t, 1), x)
    same_error(lambda t: F.channel_shuffle(t, 4), x)
    same_error(lambda t: F.channel_shuffle(t, 0), x)
    same_error(lambda t: F.channel_shuffle(t, 2), torch.randn(2, 4))

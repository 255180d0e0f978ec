"""torch.amp.GradScaler("tpu") on the device: _amp_foreach_non_finite_check_and_unscale_
and _amp_update_scale_ lowered (equal to CPU's kernels), no host read in
unscale_/update, and a step with an inf gradient skipped exactly as on CPU."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchtpu
from _util import no_fallback, run_both

pytestmark = pytest.mark.fused_pass  # passes: tests/README.md


def unscale_matches_cpu(grads, found, inv):
    """_amp_foreach_non_finite_check_and_unscale_ of copies of `grads` with
    found_inf `found` and inv_scale `inv` gives CPU's grads and flag on tpu
    (run_both, no fallback); returns tpu's flag."""

    def unscale(gs, found_inf, inv_scale):
        torch._amp_foreach_non_finite_check_and_unscale_(gs, found_inf, inv_scale)
        return gs, found_inf

    (_, tpu_found), _ = run_both(unscale, [g.clone() for g in grads], torch.tensor([found]),
                                 torch.tensor([inv]))
    return tpu_found.item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_unscale_matches_cpu(dtype):
    torch.manual_seed(0)
    grads = [torch.randn(5, 3).to(dtype) * 1024, torch.randn(7).to(dtype), torch.empty(0)]
    assert unscale_matches_cpu(grads, 0.0, 1 / 1024) == 0.0
    assert unscale_matches_cpu(grads, 1.0, 0.5) == 1.0  # a set flag stays set
    for bad in (float("inf"), float("-inf"), float("nan")):
        g = [t.clone() for t in grads]
        g[1][3] = bad
        assert unscale_matches_cpu(g, 0.0, 0.25) == 1.0


def test_unscale_of_a_view_writes_through():
    base = torch.randn(4, 6)
    expected = base.clone()
    torch._amp_foreach_non_finite_check_and_unscale_([expected[:, 1:3]], torch.zeros(1),
                                                     torch.tensor([0.5]))
    t = base.to("tpu")
    with no_fallback():
        torch._amp_foreach_non_finite_check_and_unscale_([t[:, 1:3]], torch.zeros(1, device="tpu"),
                                                         torch.full((1,), 0.5, device="tpu"))
    torch.testing.assert_close(t.cpu(), expected)


@pytest.mark.parametrize("scale,tracker,found,interval", [
    (65536.0, 0, 0.0, 2000),   # counts the step
    (65536.0, 1999, 0.0, 2000),  # grows and resets
    (65536.0, 5, 1.0, 2000),   # backs off and resets
    (3e38, 1, 0.0, 2),         # growth would overflow: scale kept, tracker reset
])
def test_update_scale_matches_cpu(scale, tracker, found, interval):
    def run(device):
        s = torch.tensor([scale], device=device)
        n = torch.tensor([tracker], dtype=torch.int32, device=device)
        out = torch._amp_update_scale_(s, n, torch.tensor([found], device=device), 2.0, 0.5,
                                       interval)
        assert out is s
        return s.cpu(), n.cpu()

    expected = run("cpu")
    with no_fallback():
        actual = run("tpu")
    torch.testing.assert_close(actual, expected)


def test_bad_arguments_raise_as_on_cpu():
    grads = [torch.randn(3)]
    for found, inv, match in ((torch.zeros(2), torch.ones(1), "found_inf must be a 1-element"),
                              (torch.zeros(1), torch.ones(1, dtype=torch.float64),
                               "inv_scale must be a float tensor")):
        with pytest.raises(RuntimeError, match=match):
            torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
        with pytest.raises(RuntimeError, match=match):
            torch._amp_foreach_non_finite_check_and_unscale_(
                [g.to("tpu") for g in grads], found.to("tpu"), inv.to("tpu"))
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="growth_tracker must be an int tensor"):
            torch._amp_update_scale_(torch.ones(1, device=dev), torch.zeros(1, device=dev),
                                     torch.zeros(1, device=dev), 2.0, 0.5, 10)


def train_with_scaler(device, model, batches):
    """SGD steps with GradScaler (growth every 2 steps); returns per-step
    (scale, loss) and the model."""
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=2)
    log = []
    for x, y in batches:
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        log.append((scaler.get_scale(), loss.item()))
    return log, model


def test_scaler_training_matches_cpu_and_skips_the_inf_step():
    torch.manual_seed(0)
    cpu_model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    tpu_model = copy.deepcopy(cpu_model)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g))
               for _ in range(6)]
    batches[3][0][0, 0] = float("inf")  # step 4: inf loss, inf/NaN gradients
    expected, cpu_model = train_with_scaler("cpu", cpu_model, batches)
    with no_fallback():
        actual, tpu_model = train_with_scaler("tpu", tpu_model, batches)
    scales = [s for s, _ in actual]
    assert scales == [s for s, _ in expected]
    assert scales[3] == scales[2] / 2  # backed off at the inf step
    for (_sa, la), (_se, le) in zip(actual, expected):
        assert la == pytest.approx(le, rel=2e-2, nan_ok=True)
    for p, q in zip(tpu_model.parameters(), cpu_model.parameters()):
        assert torch.isfinite(p).all()
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=2e-2, atol=2e-3)


def test_inf_step_leaves_parameters_unchanged():
    torch.manual_seed(0)
    model = nn.Linear(4, 2).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("tpu")
    before = [p.detach().cpu().clone() for p in model.parameters()]
    x = torch.randn(3, 4)
    x[1, 2] = float("nan")
    with no_fallback():
        scaler.scale(model(x.to("tpu")).sum()).backward()
        scaler.step(opt)
        scaler.update()
    for p, b in zip(model.parameters(), before):
        torch.testing.assert_close(p.detach().cpu(), b)
    assert scaler.get_scale() == 65536.0 / 2


def test_unscale_and_update_read_nothing_on_the_host():
    """unscale_ and update() stay on the device; step() reads found_inf (4
    bytes) to decide whether to step, as CUDA's GradScaler does."""
    model = nn.Linear(4, 2).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("tpu")
    x = torch.randn(3, 4, device="tpu")
    for _ in range(2):  # the second step runs only cached programs
        torchtpu.sync()
        torchtpu.metrics.reset()
        scaler.scale(model(x).sum()).backward()
        scaler.unscale_(opt)
        torchtpu.sync()
        assert torchtpu.metrics.metrics()["bytes_to_host"] == 0
        scaler.step(opt)
        assert torchtpu.metrics.metrics()["bytes_to_host"] == 4  # found_inf.item()
        scaler.update()
        torchtpu.sync()
        assert torchtpu.metrics.metrics()["bytes_to_host"] == 4
        assert torchtpu.metrics.total_fallbacks() == 0

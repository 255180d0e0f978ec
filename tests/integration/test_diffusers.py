"""diffusers' UNet2DModel (attention blocks, GroupNorm) trains on tpu with
CPU's losses, also on channels_last inputs (GroupNorm on a non-contiguous input
used to raise at the first forward), with no CPU fallback."""

import pytest
import torch
import torch.nn.functional as F

from _util import no_fallback

diffusers = pytest.importorskip("diffusers")


def _losses(device, channels_last, steps=3):
    torch.manual_seed(0)
    model = diffusers.UNet2DModel(
        sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
        block_out_channels=(32, 64), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8).to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for step in range(steps):
        g = torch.Generator().manual_seed(step)
        x, noise = torch.randn(2, 3, 16, 16, generator=g), torch.randn(2, 3, 16, 16, generator=g)
        t = torch.randint(0, 1000, (2,), generator=g)
        x = (x + noise).to(device)
        if channels_last:
            x = x.to(memory_format=torch.channels_last)
        opt.zero_grad()
        loss = F.mse_loss(model(x, t.to(device)).sample, noise.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("channels_last", [False, True])
def test_unet2d_trains_with_cpu_losses(channels_last):
    expected = _losses("cpu", channels_last)
    with no_fallback():
        got = _losses("tpu", channels_last)
    assert max(abs(a - b) for a, b in zip(got, expected)) < 1e-4, (got, expected)

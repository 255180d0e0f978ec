"""Lightning's Trainer on tpu through torchtpu.integrations.lightning: the same
losses as a CPU run, bf16-mixed autocast on tpu, checkpoint save and resume."""

import pytest
import torch

from _util import no_fallback

L = pytest.importorskip("lightning", reason="lightning is not installed (requirements-dev.txt)")
from torchtpu.integrations.lightning import TPUAccelerator, TPUStrategy  # noqa: E402


class TinyRegressor(L.LightningModule):
    """8 -> 16 -> 1 MLP trained with Adam on MSE; records each step's loss, the
    dtype and device of the Linear output."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                       torch.nn.Linear(16, 1))
        self.losses, self.out_dtypes, self.devices = [], [], []

    def training_step(self, batch, batch_idx):
        x, y = batch
        out = self.net(x)
        self.out_dtypes.append(out.dtype)
        self.devices.append(out.device.type)
        loss = torch.nn.functional.mse_loss(out.float(), y)
        self.losses.append(loss.detach())
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.05)


def _loader():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 8, generator=g), torch.randn(32, 1, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)


def _fit(tmp_path, device, max_steps=4, precision="32-true", ckpt_path=None, checkpoint=False):
    """Fits a fresh TinyRegressor (seed 0) for ``max_steps`` on ``device``; returns
    (module, trainer, losses as floats)."""
    L.seed_everything(0, verbose=False)
    module = TinyRegressor()
    where = {"strategy": TPUStrategy()} if device == "tpu" else {"accelerator": "cpu"}
    trainer = L.Trainer(max_steps=max_steps, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=checkpoint,
                        default_root_dir=tmp_path, precision=precision, **where)
    trainer.fit(module, _loader(), ckpt_path=ckpt_path)
    return module, trainer, [float(v) for v in module.losses]


def test_fp32_losses_equal_cpu(tmp_path):
    _, _, cpu = _fit(tmp_path / "cpu", "cpu")
    with no_fallback():
        module, _, tpu = _fit(tmp_path / "tpu", "tpu")
    assert module.devices == ["tpu"] * 4
    torch.testing.assert_close(tpu, cpu, rtol=1.3e-6, atol=1e-5)


def test_bf16_mixed_autocasts_on_tpu(tmp_path):
    # Without TPUStrategy's fix the Trainer's MixedPrecision enters
    # autocast("cuda") and the Linear outputs stay float32 on tpu.
    _, _, cpu = _fit(tmp_path / "cpu", "cpu", precision="bf16-mixed")
    module, trainer, tpu = _fit(tmp_path / "tpu", "tpu", precision="bf16-mixed")
    assert trainer.strategy.precision_plugin.device == "tpu"
    assert module.out_dtypes == [torch.bfloat16] * 4
    assert module.devices == ["tpu"] * 4
    # Same bf16 rounding on both sides; float32 accumulation order may differ.
    torch.testing.assert_close(tpu, cpu, rtol=1e-2, atol=1e-3)


def test_16_mixed_gets_a_tpu_grad_scaler(tmp_path):
    module, trainer, losses = _fit(tmp_path, "tpu", max_steps=2, precision="16-mixed")
    plugin = trainer.strategy.precision_plugin
    assert plugin.device == "tpu" and plugin.scaler._device == "tpu"
    assert module.out_dtypes == [torch.float16] * 2
    assert all(torch.isfinite(torch.tensor(losses)))


def _resume(tmp_path, device):
    """4 steps with ModelCheckpoint on ``device`` (saved while the weights and
    Adam's state live there), then a new run resumed from it to step 8; returns
    (checkpoint dict, resumed module, its losses)."""
    _, trainer, _ = _fit(tmp_path / "first", device, max_steps=4, checkpoint=True)
    path = trainer.checkpoint_callback.best_model_path
    assert path
    module, _, losses = _fit(tmp_path / "resumed", device, max_steps=8, ckpt_path=path)
    return torch.load(path, map_location="cpu", weights_only=False), module, losses


def test_checkpoint_resume_matches_cpu(tmp_path):
    # Compared with the same resume on CPU, not with 8 steps straight: Lightning
    # resuming from an end-of-epoch checkpoint does not replay a straight run
    # (on CPU either).
    cpu_ckpt, _, cpu = _resume(tmp_path / "cpu", "cpu")
    tpu_ckpt, module, tpu = _resume(tmp_path / "tpu", "tpu")
    assert module.devices == ["tpu"] * 4
    torch.testing.assert_close(tpu, cpu, rtol=1.3e-6, atol=1e-5)
    assert tpu_ckpt["global_step"] == cpu_ckpt["global_step"] == 4
    torch.testing.assert_close(tpu_ckpt["state_dict"], cpu_ckpt["state_dict"])
    torch.testing.assert_close(tpu_ckpt["optimizer_states"], cpu_ckpt["optimizer_states"])


def test_saved_checkpoint_loads_into_module(tmp_path):
    module, trainer, _ = _fit(tmp_path, "tpu", max_steps=2)
    path = tmp_path / "manual.ckpt"
    trainer.save_checkpoint(path)
    loaded = TinyRegressor.load_from_checkpoint(path, map_location="tpu")
    for (name, a), (_, b) in zip(loaded.state_dict().items(), module.state_dict().items()):
        assert a.device.type == "tpu", name
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)


def test_accelerator_alone_says_to_use_the_strategy(tmp_path):
    trainer = L.Trainer(accelerator=TPUAccelerator(), max_steps=1, logger=False,
                        enable_progress_bar=False, enable_checkpointing=False,
                        default_root_dir=tmp_path)
    with pytest.raises(Exception, match=r"TPUStrategy\(\)"):
        trainer.fit(TinyRegressor(), _loader())


def test_strategy_rejects_a_non_tpu_device():
    with pytest.raises(Exception, match="tpu devices"):
        TPUStrategy(device="cpu")
    with pytest.raises(Exception, match="does not exist"):
        TPUStrategy(device=torch.tpu.device_count())


def test_lightning_still_builds_cuda_autocast_for_unknown_accelerators(tmp_path):
    # Why TPUStrategy re-targets MixedPrecision: Lightning's connector gives
    # any accelerator but "cpu"/"mps" autocast("cuda"). When this fails,
    # Lightning picks the device itself and TPUStrategy.precision_plugin's
    # setter can go.
    from lightning.pytorch.strategies import SingleDeviceStrategy

    strategy = SingleDeviceStrategy(device=torch.device("tpu", 0), accelerator=TPUAccelerator())
    trainer = L.Trainer(strategy=strategy, precision="bf16-mixed", logger=False,
                        enable_progress_bar=False, enable_checkpointing=False,
                        default_root_dir=tmp_path)
    assert trainer.precision_plugin.device == "cuda"


def test_device_stats_are_the_allocator_stats():
    # What DeviceStatsMonitor logs: torch.tpu.memory_stats (bytes, counts).
    stats = TPUAccelerator().get_device_stats(torch.device("tpu", 0))
    assert "allocated_bytes.all.current" in stats

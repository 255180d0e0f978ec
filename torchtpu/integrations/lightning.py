"""Lightning (``lightning`` 2.6) on tpu: an Accelerator and a single-device Strategy.

    from torchtpu.integrations.lightning import TPUStrategy
    trainer = L.Trainer(strategy=TPUStrategy(), precision="bf16-mixed", max_steps=100)

Why a strategy and not only an accelerator: Lightning's ``"tpu"`` accelerator
is PyTorch/XLA's (``XLAAccelerator``, it imports ``torch_xla``), and
``accelerator="auto"`` chooses from a fixed list (XLA, MPS, CUDA, else CPU;
``lightning.fabric.utilities.device_parser._select_auto_accelerator``). For an
accelerator instance it does not know, the Trainer's connector
(``_AcceleratorConnector._choose_strategy``) builds
``SingleDeviceStrategy(device="cpu")``, so ``Trainer(accelerator=...)`` alone
would put the model on CPU. A strategy instance carries its own accelerator
and device, which the connector takes as they are.

Why the strategy touches the precision plugin: for ``precision="16-mixed"`` /
``"bf16-mixed"`` the connector (``_check_and_init_precision``) builds
``MixedPrecision(precision, device)`` with ``device = accelerator flag if it is
"cpu" or "mps" else "cuda"``, so the plugin would enter ``torch.autocast("cuda")``,
which leaves tpu ops in float32. :class:`TPUStrategy` re-targets any
``MixedPrecision`` it is given to ``"tpu"`` (and gives ``16-mixed`` a
``torch.amp.GradScaler("tpu")``) when the connector hands it over.
"""

from typing import Any, Optional, Union

import torch
from lightning.pytorch.accelerators import Accelerator
from lightning.pytorch.plugins.precision import MixedPrecision, Precision
from lightning.pytorch.strategies import SingleDeviceStrategy
from lightning.pytorch.utilities.exceptions import MisconfigurationException

__all__ = ["TPUAccelerator", "TPUStrategy"]


def _tpu_device(device: Union[int, str, torch.device]) -> torch.device:
    """``device`` as ``torch.device("tpu", index)``; a bare ``"tpu"`` means the current device."""
    if isinstance(device, int):
        device = torch.device("tpu", device)
    device = torch.device(device)
    if device.type != "tpu":
        raise MisconfigurationException(f"TPUStrategy runs on tpu devices, got {device}")
    index = torch.tpu.current_device() if device.index is None else device.index
    if not 0 <= index < torch.tpu.device_count():
        raise MisconfigurationException(
            f"tpu:{index} does not exist: {torch.tpu.device_count()} tpu device(s) here")
    return torch.device("tpu", index)


class TPUAccelerator(Accelerator):
    """Lightning's Accelerator for torchtpu's ``tpu`` device (not PyTorch/XLA's).

    Used through :class:`TPUStrategy`, which creates one; passing it alone as
    ``Trainer(accelerator=TPUAccelerator())`` raises at ``fit`` (Lightning
    would pair it with a CPU strategy, see the module docstring).
    """

    def setup_device(self, device: torch.device) -> None:
        """Makes ``device`` the current tpu device.

        Raises:
            MisconfigurationException: ``device`` is not a tpu device (the
                strategy is not a :class:`TPUStrategy`).
        """
        if device.type != "tpu":
            raise MisconfigurationException(
                f"TPUAccelerator got a strategy on {device}: Lightning pairs an accelerator it "
                "does not know with a CPU strategy. Use Trainer(strategy=TPUStrategy()) "
                "(from torchtpu.integrations.lightning), which carries this accelerator.")
        torch.tpu.set_device(device)

    def get_device_stats(self, device: Any) -> dict[str, Any]:
        """The allocator statistics of ``device`` (``torch.tpu.memory_stats``; bytes and counts)."""
        return torch.tpu.memory_stats(device)

    def teardown(self) -> None:
        """Nothing to release: buffers go with their tensors."""

    @staticmethod
    def parse_devices(devices: Union[int, str, list[int]]) -> list[int]:
        """Device indices from the Trainer's ``devices``: ``"auto"`` or ``-1`` (all),
        a count ``n`` (the first n), or a list of indices.

        Raises:
            MisconfigurationException: more devices than exist, or an unknown index.
        """
        count = torch.tpu.device_count()
        if devices in ("auto", -1, "-1"):
            return list(range(count))
        if isinstance(devices, str) and "," in devices:  # "0,1": indices, as for CUDA
            devices = [int(d) for d in devices.split(",") if d.strip()]
        elif isinstance(devices, str):
            devices = int(devices)
        indices = list(range(devices)) if isinstance(devices, int) else list(devices)
        if not indices or any(not 0 <= i < count for i in indices):
            raise MisconfigurationException(
                f"devices={devices!r} asks for tpu devices that do not exist ({count} here)")
        return indices

    @staticmethod
    def get_parallel_devices(devices: Union[int, str, list[int]]) -> list[torch.device]:
        """``torch.device("tpu", i)`` for each index that :meth:`parse_devices` gives."""
        return [torch.device("tpu", i) for i in TPUAccelerator.parse_devices(devices)]

    @staticmethod
    def auto_device_count() -> int:
        """Number of tpu devices (``torch.tpu.device_count()``)."""
        return torch.tpu.device_count()

    @staticmethod
    def is_available() -> bool:
        """True when the PJRT plugin loads and has a device."""
        return torch.tpu.is_available()

    @staticmethod
    def name() -> str:
        """``"torchtpu"``: Lightning's own ``"tpu"`` is its PyTorch/XLA accelerator."""
        return "torchtpu"


def _autocast_on_tpu(plugin: Optional[Precision]) -> Optional[Precision]:
    """``plugin`` with a ``MixedPrecision`` re-targeted to ``torch.autocast("tpu")``.

    Changed in place (a subclass keeps its own behaviour); a ``16-mixed``
    scaler made for another device is replaced by ``torch.amp.GradScaler("tpu")``
    (a CUDA scaler on a machine without CUDA disables itself and scales nothing).
    """
    if isinstance(plugin, MixedPrecision) and plugin.device != "tpu":
        plugin.device = "tpu"
        if plugin.scaler is not None and getattr(plugin.scaler, "_device", None) != "tpu":
            plugin.scaler = torch.amp.GradScaler("tpu")
    return plugin


class TPUStrategy(SingleDeviceStrategy):
    """Lightning's single-device strategy on one tpu device, with :class:`TPUAccelerator`.

    Args:
        device: ``"tpu"`` (the current tpu device), ``"tpu:N"``, an index or a
            ``torch.device``.
        accelerator: defaults to a new :class:`TPUAccelerator`.
        checkpoint_io, precision_plugin: as for ``SingleDeviceStrategy``; a
            ``MixedPrecision`` plugin, given here or made by the Trainer from
            ``precision=``, autocasts on tpu.

    Raises:
        MisconfigurationException: ``device`` is not a tpu device or does not exist.
    """

    strategy_name = "torchtpu_single"

    def __init__(self, device: Union[int, str, torch.device] = "tpu",
                 accelerator: Optional[Accelerator] = None, checkpoint_io: Any = None,
                 precision_plugin: Optional[Precision] = None):
        super().__init__(device=_tpu_device(device), accelerator=accelerator or TPUAccelerator(),
                         checkpoint_io=checkpoint_io, precision_plugin=precision_plugin)

    @property
    def precision_plugin(self) -> Precision:
        return self._precision_plugin if self._precision_plugin is not None else Precision()

    @precision_plugin.setter
    def precision_plugin(self, precision_plugin: Optional[Precision]) -> None:
        # The Trainer's connector sets the plugin it built from precision= here
        # (_lazy_init_strategy), after choosing autocast("cuda") for it.
        self._precision_plugin = _autocast_on_tpu(precision_plugin)

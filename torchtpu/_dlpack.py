"""DLPack for tpu tensors (``torch.from_dlpack``, ``Tensor.__dlpack_device__``).

PyTorch exports a PrivateUse1 tensor as ``kDLExtDev`` and imports such a
capsule back as a PrivateUse1 tensor sharing the storage (no copy). Its
``Tensor.__dlpack_device__`` recognizes the device by the type name
``"privateuse1"``, which a renamed backend ("tpu") never has, so
``torch.from_dlpack(tpu_tensor)`` raised ``Unknown device type tpu for
Dlpack``. This module answers for tpu tensors and leaves every other device to
PyTorch's method.

Other consumers (NumPy, JAX) see ``kDLExtDev`` and refuse it with their own
error: a tpu tensor's data pointer names its storage, not device memory they
could read; ``.cpu()`` first is the way there.
"""

import torch
from torch.utils.dlpack import DLDeviceType

_torch_dlpack_device = torch.Tensor.__dlpack_device__


def _dlpack_device(self):
    """``(DLDeviceType.kDLExtDev, index)`` for a tpu tensor, else PyTorch's answer."""
    if type(self) is torch.Tensor and self.device.type == "tpu":
        return (DLDeviceType.kDLExtDev, self.device.index or 0)
    return _torch_dlpack_device(self)


def install():
    """Idempotent."""
    torch.Tensor.__dlpack_device__ = _dlpack_device

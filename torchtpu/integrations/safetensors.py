"""safetensors files loaded straight onto tpu.

    from torchtpu.integrations.safetensors import load_file, safe_open
    state = load_file("model.safetensors", device="tpu")

safetensors (0.8) parses ``device=`` in Rust against a fixed list of names
(cpu, cuda, mps, npu, xpu, xla, mlu, hpu, each with ``:N``) and refuses any
other string, ``"tpu"`` included (``SafetensorError: device tpu is invalid``).
An integer it accepts as "an accelerator index torch resolves"
(``Device::Anonymous``): the tensor is read from the file on CPU and moved with
``tensor.to(index)``, and torch resolves a bare index to the current
accelerator, which is tpu whenever torchtpu is imported (c10 picks a
registered PrivateUse1 backend first, ``at::getAccelerator``). The functions
here turn a tpu device into that index, so the tensors land on the asked tpu
device with the file's dtype and no extra copy through Python.
"""

from typing import Union

import safetensors
import safetensors.torch
import torch

__all__ = ["load_file", "safe_open"]

_Device = Union[str, int, torch.device]


def _safetensors_device(device: _Device) -> Union[str, int]:
    """``device`` as safetensors takes it: a tpu device becomes its index,
    anything else passes through unchanged.

    Raises:
        RuntimeError: torch resolves a bare device index to another accelerator
            than tpu (torchtpu's PrivateUse1 hooks are not registered).
    """
    if isinstance(device, int) or not torch.device(device).type == "tpu":
        return device
    index = torch.device(device).index
    index = torch.tpu.current_device() if index is None else index
    if torch.device(index).type != "tpu":
        raise RuntimeError(
            f"safetensors places tensors on torch.device({index}), which is "
            f"{torch.device(index)} here, not tpu: load with device='cpu' and move with .to('tpu')")
    return index


def load_file(filename, device: _Device = "tpu") -> dict[str, torch.Tensor]:
    """``safetensors.torch.load_file`` that also takes ``device="tpu"`` / ``"tpu:N"``.

    Args:
        filename: path of a ``.safetensors`` file.
        device: where the tensors go; tpu devices as above, anything else as
            safetensors takes it.

    Returns:
        name -> tensor, each with the dtype and shape stored in the file.

    Raises:
        safetensors.SafetensorError: a malformed file or a device safetensors refuses.
        FileNotFoundError: no such file.
    """
    return safetensors.torch.load_file(filename, device=_safetensors_device(device))


def safe_open(filename, framework: str = "pt", device: _Device = "tpu"):
    """``safetensors.safe_open`` that also takes ``device="tpu"`` / ``"tpu:N"``:
    ``get_tensor`` and ``get_slice(...)[...]`` return tensors on that device.
    A context manager, as safetensors' own."""
    return safetensors.safe_open(filename, framework=framework,
                                 device=_safetensors_device(device))

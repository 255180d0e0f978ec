"""Dynamo's device interface for ``"tpu"``: torchtpu's, in place of the one torch ships.

``torch._dynamo.device_interface`` keeps one :class:`DeviceInterface` per device
type; Dynamo and the code around it ask it for the current device, the device
count, streams, events and synchronize (``get_interface_for_device``: stream
and event tracing, the device guard of compiler collectives across ranks,
``torch.utils._triton``). torch 2.13 registers under ``"tpu"`` the interface of
another project (``TpuInterface``, for Google's ``torch_tpu``): its current
device is always 0, ``device_count``, ``synchronize``, ``current_stream`` and
``device`` raise NotImplementedError, and it reports float64 and float16 as
unsupported. This module registers an interface that answers from ``torch.tpu``
(the current device, the devices this process has, torchtpu's streams and
events), with CUDA's signatures.

It is registered when Dynamo's module is imported (an import hook in
:mod:`torchtpu._compile_default`, so ``import torchtpu`` does not import
Dynamo), after torch's own registrations: ``init_device_reg``, which torch runs
at the first lookup and which would register its ``TpuInterface`` again, is
wrapped to register this one after it. Only the type ``"tpu"`` is registered
(torch also registers ``"cuda:N"`` names; counting tpu devices at Dynamo's
import would start the PJRT client); lookups by ``torch.device`` use the type.
"""

import torch

_MODULE = "torch._dynamo.device_interface"


def _make_interface(di):
    """The interface class, built on ``di.DeviceInterface`` (``di`` is Dynamo's module)."""

    class TorchTpuInterface(di.DeviceInterface):
        """torchtpu's ``tpu`` device for Dynamo (see the module docstring)."""

        device = torch.tpu.device
        Event = torch.tpu.Event
        Stream = torch.tpu.Stream

        class Worker:
            @staticmethod
            def set_device(device):
                torch.tpu.set_device(device)

            @staticmethod
            def current_device():
                return torch.tpu.current_device()

            @staticmethod
            def get_device_properties(device=None):
                return torch.tpu.get_device_properties(device)

        @staticmethod
        def current_device():
            return torch.tpu.current_device()

        @staticmethod
        def set_device(device):
            torch.tpu.set_device(device)

        @staticmethod
        def exchange_device(device):
            """Makes ``device`` (an index; negative: no change) current; returns the
            previous index."""
            previous = torch.tpu.current_device()
            if device >= 0 and device != previous:
                torch.tpu.set_device(device)
            return previous

        maybe_exchange_device = exchange_device

        @staticmethod
        def device_count():
            return torch.tpu.device_count()

        @staticmethod
        def is_available():
            return torch.tpu.is_available()

        @staticmethod
        def stream(stream):
            return torch.tpu.stream(stream)

        @staticmethod
        def current_stream():
            return torch.tpu.current_stream()

        @staticmethod
        def set_stream(stream):
            torch.tpu.set_stream(stream)

        @staticmethod
        def _set_stream_by_id(stream_id, device_index, device_type):
            torch.tpu.set_stream(torch.tpu.Stream(stream_id=stream_id, device_index=device_index,
                                                  device_type=device_type))

        @staticmethod
        def get_raw_stream(device_idx):
            raise NotImplementedError("tpu streams have no raw handle (PJRT orders work per "
                                      "device; a raw stream is a CUDA/Triton concept)")

        @staticmethod
        def synchronize(device=None):
            torch.tpu.synchronize(device)

        @staticmethod
        def get_compute_capability(device=None):
            return ""

        @staticmethod
        def is_bf16_supported(including_emulation=False):
            return True

        @classmethod
        def is_dtype_supported(cls, dtype, including_emulation=False):
            return dtype is not torch.complex32  # ComplexHalf: docs/limitations.md

        @staticmethod
        def memory_allocated(device=None):
            return torch.tpu.memory_allocated(device)

    return TorchTpuInterface


def install(di):
    """Registers torchtpu's interface in Dynamo's module ``di``, now and after
    every ``init_device_reg``."""
    interface = _make_interface(di)
    torch_init = di.init_device_reg

    def init_device_reg():
        torch_init()
        di.register_interface_for_device("tpu", interface)

    init_device_reg.__doc__ = torch_init.__doc__
    di.init_device_reg = init_device_reg
    if di._device_initialized:
        di.register_interface_for_device("tpu", interface)

"""The legacy typed storage classes of ``torch.tpu`` (``torch.tpu.FloatStorage``,
...), as ``torch.cuda`` has them (re-exported by torchtpu.device).

``Tensor.storage_type()`` and ``TypedStorage.type()`` look the class up on the
device module of a CUDA, HPU or PrivateUse1 storage
(``TypedStorage._get_legacy_storage_class``, torch/storage.py) and answered
None for tpu without them. Each class is a ``torch.storage._LegacyStorage``
whose ``__module__`` is ``torch.tpu``, so PyTorch derives its device ("tpu")
from that name: ``torch.tpu.FloatStorage(3)`` is a tpu storage of 3 floats and
``isinstance(t.storage(), torch.tpu.FloatStorage)`` holds for a float32 tpu
tensor.
"""

import torch
from torch.storage import _LegacyStorage, _warn_typed_storage_removal


class _TpuLegacyStorage(_LegacyStorage):
    @classmethod
    def from_buffer(cls, *args, **kwargs):
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: Not available for tpu storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):
        raise RuntimeError("_new_with_weak_ptr: Not available for tpu storage")

    @classmethod
    def _new_shared_filename(cls, manager, obj, size, *, device=None, dtype=None):
        raise RuntimeError("_new_shared_filename: Not available for tpu storage")


def _storage_class(name, dtype):
    def _dtype(cls):
        return dtype

    def public_dtype(cls):
        _warn_typed_storage_removal()
        return dtype

    namespace = {"_dtype": torch._utils.classproperty(_dtype),
                 "dtype": torch._utils.classproperty(public_dtype),
                 "__module__": "torch.tpu", "__qualname__": name}
    return type(name, (_TpuLegacyStorage,), namespace)


_DTYPES = {
    "ByteStorage": torch.uint8, "DoubleStorage": torch.double, "FloatStorage": torch.float,
    "HalfStorage": torch.half, "LongStorage": torch.long, "IntStorage": torch.int,
    "ShortStorage": torch.short, "CharStorage": torch.int8, "BoolStorage": torch.bool,
    "BFloat16Storage": torch.bfloat16, "ComplexDoubleStorage": torch.cdouble,
    "ComplexFloatStorage": torch.cfloat,
}
_CLASSES = {name: _storage_class(name, dtype) for name, dtype in _DTYPES.items()}
globals().update(_CLASSES)

__all__ = sorted(_CLASSES)

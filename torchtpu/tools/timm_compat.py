"""``import timm`` on a machine with PyTorch's CPU build and no torchvision.

timm imports torchvision at import time, but its models use none of it; PyPI's
torchvision wheels are CUDA builds that cannot load next to ``torch==2.13.0+cpu``
(and a broken torchvision also breaks every ``transformers`` model import). So
scripts/setup.sh installs timm with ``--no-deps`` and the model tests and
benchmarks import it through :func:`import_timm`.
"""

import enum
import sys
import types


class _TorchvisionStub(types.ModuleType):
    """A module whose every public attribute is a placeholder class that raises
    when used: enough for timm's import-time references to torchvision."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def unavailable(*args, **kwargs):
            raise RuntimeError(f"{self.__name__}.{name}: torchvision is not installed (timm was "
                               "imported through torchtpu.tools.timm_compat without it)")

        value = type(name, (), {"__init__": unavailable})
        setattr(self, name, value)
        return value


class _InterpolationMode(enum.Enum):
    """torchvision.transforms.functional.InterpolationMode's members, which
    timm.data puts in dicts at import."""
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


def import_timm():
    """``import timm`` without torchvision.

    timm imports torchvision at import time (``FrozenBatchNorm2d``,
    ``transforms``, ``datasets``), but its models use none of it. PyPI's
    torchvision wheels are CUDA builds: their C++ ops cannot load next to
    ``torch==2.13.0+cpu``, and torchvision 0.28 then fails at import
    (``operator torchvision::nms does not exist``), which also breaks every
    ``transformers`` model import in the process. So timm is installed with
    ``--no-deps`` and imported here with placeholder torchvision modules, which
    are taken out of ``sys.modules`` again afterwards.
    """
    if "timm" in sys.modules:
        return sys.modules["timm"]
    try:
        import timm  # a working torchvision is installed
        return timm
    except ImportError as e:
        if e.name is None or not e.name.startswith("torchvision"):
            raise
    names = ["torchvision", "torchvision.ops", "torchvision.ops.misc", "torchvision.transforms",
             "torchvision.transforms.functional", "torchvision.datasets"]
    stubs = {name: _TorchvisionStub(name) for name in names}
    for name, module in stubs.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(stubs[parent], child, module)
    stubs["torchvision.transforms.functional"].InterpolationMode = _InterpolationMode
    for name in [m for m in sys.modules if m == "timm" or m.startswith("timm.")]:
        del sys.modules[name]  # the half-imported package of the first attempt
    sys.modules.update(stubs)
    try:
        import timm
    finally:
        for name in names:
            sys.modules.pop(name, None)
    return timm

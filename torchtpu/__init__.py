"""torchtpu: PyTorch's PrivateUse1 device ``tpu`` backed by a PJRT plugin.

``import torchtpu`` (or plain ``import torch``, through the ``torch.backends``
entry point) registers the device. Tensors created with ``device="tpu"`` live in
PJRT buffers; each ATen op is lowered to StableHLO, compiled by XLA once per
(op, dtypes, shapes, attributes) and executed asynchronously (strict mode) or
synchronously (debug mode).

The plugin is OpenXLA's CPU plugin (package ``xla-cpu-pjrt``) unless
``TORCHTPU_PLUGIN`` names another PJRT plugin ``.so`` or :func:`init` is called.
"""


def _autoload():
    """Entry point of the ``torch.backends`` group: importing is the work.

    Defined before ``import torch``: when ``import torchtpu`` comes first, torch's
    backend autoload re-enters this partially initialised module and looks this
    name up.
    """


import torch  # noqa: E402

torch.utils.rename_privateuse1_backend("tpu")

from torchtpu import _C  # noqa: E402  (registers the ATen kernels)
from torchtpu import _plugin  # noqa: E402
from torchtpu import cache  # noqa: E402,F401
from torchtpu import config  # noqa: E402,F401
from torchtpu import device as _device_module  # noqa: E402
from torchtpu import distributed as _distributed  # noqa: E402,F401  (c10d backend "tpu")
from torchtpu import metrics  # noqa: E402,F401
from torchtpu._modes import get_eager_mode, set_eager_mode  # noqa: E402,F401
from torchtpu._recompile import RecompileError, RecompileWarning  # noqa: E402,F401

_C._set_default_plugin(_plugin.default_plugin_path() or "")
torch._register_device_module("tpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)

__version__ = "0.1.0"

# torch.compile's backend "tpu" (torchtpu/_dynamo.py) comes through the
# torch_dynamo_backends entry point. Registered here too when Dynamo is already
# loaded; importing it just for that would add seconds to every `import torch`.
import sys  # noqa: E402

if "torch._dynamo" in sys.modules:
    from torchtpu import _dynamo  # noqa: F401


def init(plugin=None, cpu_devices=None):
    """Loads a PJRT plugin and creates the process's client.

    Args:
        plugin: path of a PJRT plugin ``.so``, or ``"cpu"`` (default) for the
            xla-cpu-pjrt package. ``TORCHTPU_PLUGIN`` is read when None.
        cpu_devices: number of devices the CPU plugin exposes (default
            ``TORCHTPU_CPU_DEVICES`` or 1); other plugins ignore it.

    Raises:
        RuntimeError: the plugin cannot be loaded (the message names the path
            and the fix), or the process already uses another plugin.
    """
    import os

    path = _plugin.resolve(plugin if plugin is not None else os.environ.get("TORCHTPU_PLUGIN"))
    n = cpu_devices if cpu_devices is not None else int(os.environ.get("TORCHTPU_CPU_DEVICES", "1"))
    _C._init(path, n)


def sync():
    """Waits until every enqueued tpu computation has finished.

    Raises:
        RuntimeError: an asynchronously executed op failed; names the op.
    """
    _C._synchronize()


"""torchtpu: PyTorch's PrivateUse1 device ``tpu`` backed by a PJRT plugin.

``import torchtpu`` (or plain ``import torch``, through the ``torch.backends``
entry point) registers the device. Tensors created with ``device="tpu"`` live in
PJRT buffers; each ATen op is lowered to StableHLO and compiled by XLA. Three
eager modes (:func:`set_eager_mode`): strict (the default) runs each op as its
own program, compiled once per (op, dtypes, shapes, attributes), asynchronously;
debug runs the same programs synchronously; fused records ops into one graph
per device and runs it as one program when a value is read. ``torch.compile``
with ``backend="tpu"`` compiles whole graphs.

The plugin is OpenXLA's CPU plugin (package ``xla-cpu-pjrt``) unless
``TORCHTPU_PLUGIN`` names another PJRT plugin ``.so`` or :func:`init` is called.
"""


def _autoload():
    """Entry point of the ``torch.backends`` group: importing is the work.

    Defined before ``import torch``: when ``import torchtpu`` comes first, torch's
    backend autoload re-enters this partially initialised module and looks this
    name up.
    """


import importlib.util  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402

torch.utils.rename_privateuse1_backend("tpu")

from torchtpu import _C  # noqa: E402  (registers the ATen kernels)
from torchtpu import _plugin  # noqa: E402
from torchtpu import cache  # noqa: E402,F401
from torchtpu import config  # noqa: E402,F401
from torchtpu import device as _device_module  # noqa: E402
from torchtpu import distributed as _distributed  # noqa: E402,F401  (c10d backend "tpu")
from torchtpu import metrics  # noqa: E402,F401
from torchtpu.kernels import jax_kernel, stablehlo_op  # noqa: E402,F401  (never imports jax)
from torchtpu._modes import (  # noqa: E402,F401
    background_compile, fused_hybrid, get_eager_mode, set_eager_mode)
from torchtpu._recompile import RecompileError, RecompileWarning  # noqa: E402,F401
from torchtpu import _step_flush  # noqa: E402,F401  (fused mode: optimizer.step ends a graph)

_C._set_default_plugin(_plugin.default_plugin_path() or "")
# The CPU fallback checks an op's tensors for one device as CUDA's generated
# kernel wrappers do; which ops skip that check, native_functions.yaml says
# (torchgen's packaged copy, read at the first fallback; none checked without it).
_torchgen = importlib.util.find_spec("torchgen")
if _torchgen is not None and _torchgen.submodule_search_locations:
    _C._set_native_functions_yaml(os.path.join(
        list(_torchgen.submodule_search_locations)[0], "packaged", "ATen", "native",
        "native_functions.yaml"))
torch._register_device_module("tpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
# torch.autocast("tpu") without a dtype uses bfloat16, as TPUs do (PyTorch/XLA
# too); c10's default for PrivateUse1 is float16. c10 keeps this per thread:
# set here it holds for the importing (main) thread and for the threads it
# starts autograd in; another thread that wants autocast without naming the
# dtype calls torch.set_autocast_dtype("tpu", torch.bfloat16) itself.
torch.set_autocast_dtype("tpu", torch.bfloat16)

__version__ = "0.1.0"
__all__ = ["init", "sync", "set_eager_mode", "get_eager_mode", "fused_hybrid",
           "background_compile", "jax_kernel", "stablehlo_op", "RecompileError",
           "RecompileWarning", "cache", "config", "metrics"]


def _at_exit():
    """Runs at interpreter exit, before finalization (atexit, registered at import).

    0. After an uncaught exception (Ctrl-C included), drops strict ops still
       waiting for background compiles and the compiles not started yet; then
       waits for the compiles running (see _wait_for_compiles).
    1. Reports an error still pending from an asynchronously executed op or a
       deferred device check that nothing read: a warning naming the op (the
       exit code stays as the script left it, as with CUDA).
    2. Drains autograd's tpu device threads, so none drops a finished backward's
       Python objects once finalization has begun (an abort, exit 134, before;
       see drain_autograd_device_threads in csrc/python/module.cc).
    """
    if not _C._is_initialized() or _C._is_in_bad_fork():
        return
    if getattr(sys, "last_value", None) is not None:
        # An uncaught exception (Ctrl-C included) ended the script: strict ops
        # waiting for background compiles would never be read, so neither
        # they nor the compiles not started yet are waited for.
        _C._drop_background_work()
    _wait_for_compiles()
    try:
        _C._synchronize()
    except BaseException as e:  # noqa: BLE001  (KeyboardInterrupt at exit included)
        import warnings

        warnings.warn(
            "torchtpu: an error from an asynchronously executed tpu op was pending at "
            f"interpreter exit and was never read: {e}",
            RuntimeWarning,
            stacklevel=1,
        )
    # (a Ctrl-C during a compile the flush above made leaves it running)
    _wait_for_compiles()
    try:
        _C._drain_autograd_threads()
    except Exception:  # noqa: BLE001  (best effort: exit must go on)
        pass


def _wait_for_compiles():
    """Waits for XLA compiles that a Ctrl-C left running in the background.

    The process must not exit under them: XLA's static destructors run at exit
    and a compile still using them crashes it (exit 134 or 139). Their programs
    go to the persistent cache, so the next run does not compile them again. A
    second Ctrl-C here exits at once (status 130, stdout and stderr flushed).
    """
    import os
    import time

    told = time.monotonic() + 1.0
    try:
        while _C._compiles_running():
            if told is not None and time.monotonic() > told:
                print(f"torchtpu: waiting for {_C._compiles_running()} XLA compile(s) still "
                      "running (their programs will be cached); press Ctrl-C again to exit now",
                      file=sys.stderr, flush=True)
                told = None
            time.sleep(0.05)
    except KeyboardInterrupt:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001  (a closed stream: nothing to flush)
                pass
        os._exit(130)


import atexit  # noqa: E402

atexit.register(_at_exit)

# torch.compile's backend "tpu" (torchtpu/_dynamo.py) comes through the
# torch_dynamo_backends entry point. Registered here too when Dynamo is already
# loaded; importing it just for that would add seconds to every `import torch`.
import sys  # noqa: E402

if "torch._dynamo" in sys.modules:
    from torchtpu import _dynamo  # noqa: F401

# torch.compile(model) with no backend: graphs on tpu go to the "tpu" backend,
# others to Inductor (torchtpu/_compile_default.py).
from torchtpu import _compile_default  # noqa: E402

_compile_default.install()

# flex_attention takes tpu tensors as a user's unmodified program expects
# (PyTorch's device list refuses them; torchtpu/integrations/flex_attention.py
# says what is patched and why). About 3 ms of import.
from torchtpu.integrations import flex_attention as _flex_attention  # noqa: E402

_flex_attention.enable()

# torch.compile over torch.utils.checkpoint with dropout: AOTAutograd's RNG
# replay ops have kernels for four device types only; this gives them tpu's
# (torchtpu/integrations/checkpoint.py). About 1 ms of import.
from torchtpu.integrations import checkpoint as _checkpoint  # noqa: E402

_checkpoint.enable()

# transformers and accelerate read "tpu" as another backend, or not at all:
# their fixes (torchtpu/integrations/transformers.py, accelerate.py) are
# applied as those libraries are imported, through an import hook that imports
# neither (torchtpu/integrations/_library_fixes.py); TORCHTPU_LIBRARY_FIXES=0
# turns it off.
from torchtpu.integrations import _library_fixes  # noqa: E402

_library_fixes.install()

from torchtpu import _dlpack  # noqa: E402  (torch.from_dlpack of tpu tensors)

_dlpack.install()


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
    n = cpu_devices if cpu_devices is not None else _C._setting_integer(
        "TORCHTPU_CPU_DEVICES", 1, 1, 1024)
    _C._init(path, n)


def sync():
    """Waits until every enqueued tpu computation has finished.

    Raises:
        RuntimeError: an asynchronously executed op failed; names the op.
    """
    _C._synchronize()


"""The transformers, accelerate and peft fixes, applied by default as those libraries
are imported (``TORCHTPU_LIBRARY_FIXES=0`` turns this off; docs/environment.md).

Why by default: with torchtpu installed, code that never names tpu meets them.
transformers reads the accelerator "tpu" as Google's torch_tpu, so a CPU model
asked for ``attn_implementation="flex_attention"`` raised ImportError, and a
``Trainer`` put the model on tpu while accelerate kept the batches on CPU
(torchtpu/integrations/transformers.py and accelerate.py say what each fix
changes; docs/device-seams.md, section "Libraries", the call sites). With the
fixes, installing torchtpu changes for such code what a GPU changes (the
Trainer's model and batches go to the accelerator), and no more.

How: ``import torchtpu`` must not import transformers or accelerate (seconds).
``install()`` puts a finder first in ``sys.meta_path``: for the few modules in
``_FIXES`` it asks the other finders for the module's spec, and wraps the
spec's loader so that the fix runs on the module right after its code has run,
before any other module can read a name from it. That matters for
``is_torch_flex_attn_available``, which masking_utils and
integrations.flex_attention call at their own import: they import it from
import_utils, directly or through transformers.utils, so the answer is fixed
in import_utils before anything copies it. transformers' ``_LazyModule``
imports its submodules with ``importlib.import_module``, which comes through
``sys.meta_path`` like any import. Modules already imported when ``install()``
runs (a script that imported transformers before torch) are fixed at once,
with the integration's ``_enable_loaded()``, which also replaces the names
other loaded modules copied, as ``enable()`` does.

A fix that fails (the library changed shape) warns and leaves the module as
the library made it: the import itself never fails because of torchtpu.
"""

import importlib
import importlib.abc
import sys
import warnings

from torchtpu import _C

__all__ = ["enabled", "install"]

# module -> (torchtpu.integrations module, its function taking that module).
_FIXES = {
    "transformers.utils.import_utils": ("transformers", "_fix_import_utils"),
    "transformers.pipelines.base": ("transformers", "_fix_pipelines"),
    "transformers.distributed.utils": ("transformers", "_fix_distributed_utils"),
    "accelerate.state": ("accelerate", "_fix_state"),
    "accelerate.utils.modeling": ("accelerate", "_fix_modeling"),
    "accelerate.utils.dataclasses": ("accelerate", "_fix_dataclasses"),
    "peft.optimizers.lorafa": ("peft", "_fix_lorafa"),
}
_LIBRARIES = ("transformers", "accelerate", "peft")


def _apply(name, module):
    integration, function = _FIXES[name]
    try:
        fix = getattr(importlib.import_module(f"torchtpu.integrations.{integration}"), function)
        fix(module)
    except Exception as e:  # noqa: BLE001  (the import must go on; see the docstring)
        warnings.warn(f"torchtpu could not apply its fix to {name} ({type(e).__name__}: {e}); "
                      f"the module is left as {integration} made it. Report it with the "
                      f"{integration} version; TORCHTPU_LIBRARY_FIXES=0 silences this.",
                      RuntimeWarning, stacklevel=2)


class _FixingLoader(importlib.abc.Loader):
    """The library's own loader, running a fix after the module's code.

    Only ``exec_module`` differs; the module's ``__loader__`` and
    ``__spec__.loader`` are set back to the library's loader before its code
    runs, so nothing (``inspect``, ``importlib.reload``, resources) sees this
    wrapper afterwards.
    """

    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def __getattr__(self, attribute):  # get_source, get_filename, is_package, ...
        return getattr(self._loader, attribute)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _apply(self._name, module)


class _Finder(importlib.abc.MetaPathFinder):
    """First in ``sys.meta_path``; answers only for the modules in ``_FIXES``,
    with the spec the finders after it give, its loader wrapped."""

    def find_spec(self, name, path, target=None):
        if name not in _FIXES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _FixingLoader(spec.loader, name)
                return spec
        return None


_finder = _Finder()


def enabled() -> bool:
    """``TORCHTPU_LIBRARY_FIXES``: a flag, on when unset (ValueError on a
    value that is not a flag)."""
    return _C._setting_flag("TORCHTPU_LIBRARY_FIXES", True)


def install():
    """Applies the fixes to the ``_FIXES`` modules as they are imported, and
    at once to the libraries already imported. Does nothing when
    ``TORCHTPU_LIBRARY_FIXES`` is off. Idempotent."""
    if not enabled() or _finder in sys.meta_path:
        return
    sys.meta_path.insert(0, _finder)
    for library in _LIBRARIES:
        if any(name.startswith(library + ".") and name in sys.modules for name in _FIXES):
            _enable_loaded(library)


def _enable_loaded(library):
    """The integration's ``_enable_loaded()``: fixes the library's ``_FIXES``
    modules already imported and the names other loaded modules copied."""
    try:
        integration = importlib.import_module(f"torchtpu.integrations.{library}")
        integration._enable_loaded()
    except Exception as e:  # noqa: BLE001  (import torchtpu must go on)
        warnings.warn(f"torchtpu could not apply its fixes to the {library} already imported "
                      f"({type(e).__name__}: {e}); TORCHTPU_LIBRARY_FIXES=0 silences this.",
                      RuntimeWarning, stacklevel=3)

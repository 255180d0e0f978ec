"""Import shims that let an older PyTorch ``test/`` folder run on the installed torch.

PyTorch's device-generic test files import helpers from ``torch.testing._internal``,
which is shipped in the wheel and changes with every release; the test files
are not. A checkout at the tag of the installed torch needs none of this. The
2.4-era files that ``docs/pytorch-suites.md`` points to import names that torch
2.13 renamed or removed; :data:`SHIMS` puts each one back, as the old name for
the new helper, when (and only when) the module lacks it. One shim is of
behaviour: device classes of a generic class that calls
``super(self.__class__, self)`` get 2.4's class layout back. The test files are
never edited.

Each shim is applied when its module is imported (a ``sys.meta_path`` finder
wraps the module's loader): installing them imports none of these modules,
and a worker pays only for what its test file imports (common_methods_invocations
alone takes 5 s).
"""
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import unittest

_PKG = "torch.testing._internal."


def _common_utils(m):
    # torch 2.5 renamed skipIfMps to skipIfMPS (same behaviour)
    if not hasattr(m, "skipIfMps"):
        m.skipIfMps = m.skipIfMPS
    # hypothesis is no torch dependency; test_nn.py imports it at the top for one
    # property test. common_utils has run its own optional `import hypothesis` by
    # now, so the stub cannot fool it.
    if importlib.util.find_spec("hypothesis") is None:
        for module in _hypothesis_stub():
            sys.modules.setdefault(module.__name__, module)


def _hypothesis_stub():
    """Stand-ins for ``hypothesis`` and ``common_utils``' ``hypothesis_utils``: a test
    decorated with ``@given`` is skipped instead of its file failing to import."""
    def given(*args, **kwargs):
        return unittest.skip("hypothesis is not installed")

    def strategy(name):
        # strategies are evaluated at class definition (the arguments of @given);
        # dunders stay missing so inspect (__file__) sees a plain module
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None

    hyp = types.ModuleType("hypothesis")
    hyp.given = given
    hu = types.ModuleType(_PKG + "hypothesis_utils")
    hu.__getattr__ = strategy
    for module in (hyp, hu):
        # torch._dynamo's trace_rules calls find_spec("hypothesis"): a spec without
        # an origin reads as "nothing on disk to skip"
        module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
    return hyp, hu


def _common_cuda(m):
    # removed after 2.4; its 2.4 body: TF32 matmuls need CUDA >= 11 on an Ampere
    # (sm_80) or newer GPU
    import torch

    def tf32_is_not_fp32():
        if not torch.cuda.is_available() or torch.version.cuda is None:
            return False
        major = torch.cuda.get_device_properties(torch.cuda.current_device()).major
        return major >= 8 and int(torch.version.cuda.split(".")[0]) >= 11
    if not hasattr(m, "tf32_is_not_fp32"):
        m.tf32_is_not_fp32 = tf32_is_not_fp32


def _common_mkldnn(m):
    # 2.4's bf32_on_and_off became reduced_f32_on_and_off (bf32 and tf32 variants);
    # both run a float32 CPU test again with reduced matmul precision when oneDNN
    # supports it, and once otherwise
    def bf32_on_and_off(bf32_precision=1e-5):
        return m.reduced_f32_on_and_off(bf32_precision=bf32_precision)
    if not hasattr(m, "bf32_on_and_off"):
        m.bf32_on_and_off = bf32_on_and_off


def _common_nn(m):
    # the module-level list became get_new_module_tests(); a PEP 562 module
    # __getattr__ builds it on first use only (test_nn.py)
    cache = []

    def __getattr__(name):
        if name != "new_module_tests":
            raise AttributeError(f"module {m.__name__!r} has no attribute {name!r}")
        if not cache:
            cache.append(m.get_new_module_tests())
        return cache[0]
    if "new_module_tests" not in m.__dict__ and "__getattr__" not in m.__dict__:
        m.__getattr__ = __getattr__


def _common_methods_invocations(m):
    # 2.4 defined it as the tuple of binary_ufuncs (ops and their _refs)
    if not hasattr(m, "binary_ufuncs_and_refs"):
        m.binary_ufuncs_and_refs = tuple(m.binary_ufuncs)


def _common_device_type(m):
    # 2.4 built a device class on an empty copy of the generic class's bases,
    # type(name, (base, empty), {}); 2.13 derives it from the generic class too,
    # (base, generic). test_linalg.py's TestLinalg.setUp calls
    # super(self.__class__, self).setUp(): with the generic class in the MRO that
    # finds TestLinalg.setUp again, forever (RecursionError in every test). The
    # device classes of a class written so are rebased as in 2.4 (its members are
    # copied onto them either way); other classes are left as 2.13 makes them.
    original = m.instantiate_device_type_tests
    if getattr(original, "_torchtpu_shim", False):
        return

    @functools.wraps(original)
    def instantiate_device_type_tests(generic_test_class, scope, *args, **kwargs):
        original(generic_test_class, scope, *args, **kwargs)
        if not _calls_super_of_self_class(generic_test_class):
            return
        empty = type(generic_test_class.__name__ + "_base", generic_test_class.__bases__, {})
        for value in list(scope.values()):
            if isinstance(value, type) and value.__bases__[1:] == (generic_test_class,):
                value.__bases__ = (value.__bases__[0], empty)
    instantiate_device_type_tests._torchtpu_shim = True
    m.instantiate_device_type_tests = instantiate_device_type_tests


def _calls_super_of_self_class(cls):
    """Whether a method of ``cls`` calls ``super(self.__class__, ...)``: its code
    names both ``super`` and ``__class__`` (zero-argument ``super()`` reads a
    ``__class__`` cell instead, which is no name)."""
    return any({"super", "__class__"} <= set(getattr(v, "__code__", None).co_names)
               for v in vars(cls).values() if hasattr(v, "__code__"))


# module -> shim run right after the module's body; each changes only what 2.4 files need
SHIMS = {
    _PKG + "common_utils": _common_utils,
    _PKG + "common_cuda": _common_cuda,
    _PKG + "common_device_type": _common_device_type,
    _PKG + "common_mkldnn": _common_mkldnn,
    _PKG + "common_nn": _common_nn,
    _PKG + "common_methods_invocations": _common_methods_invocations,
}


class _ShimFinder(importlib.abc.MetaPathFinder):
    """Finds a module of :data:`SHIMS` with the other finders and runs its shim
    right after the module's body."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in SHIMS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                loader_exec = spec.loader.exec_module

                def exec_module(module, loader_exec=loader_exec):
                    loader_exec(module)
                    SHIMS[fullname](module)
                spec.loader.exec_module = exec_module
                return spec
        return None


def install():
    """Installs the shims in this process; idempotent."""
    if not any(isinstance(f, _ShimFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _ShimFinder())
    for name, shim in SHIMS.items():
        if name in sys.modules:
            shim(sys.modules[name])

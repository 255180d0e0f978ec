"""``torch.compile(model)`` without a backend: tpu graphs go to the ``"tpu"`` backend.

PyTorch 2.13's default backend, Inductor, cannot compile tpu tensors: it has a
code path for a device named ``tpu`` that belongs to another project (it
generates Pallas kernels and imports ``torch_tpu``). PyTorch's supported hook
for this is ``torch.compiler.set_default_backend``: torchtpu sets the default to
:func:`default_backend`, which looks at each graph Dynamo hands over and

- sends a graph with any tpu tensor (input, parameter or intermediate; CPU
  tensors may be mixed in) to :func:`torchtpu._dynamo.tpu_backend`;
- sends every other graph to Inductor, built exactly as ``torch.compile`` builds
  it for the default backend (``mode`` and ``options`` applied).

The default is changed only while it is still ``"inductor"`` (a user's own
``set_default_backend`` wins), and only when Dynamo is loaded: importing Dynamo
at ``import torch`` would cost every process over a second. Until then an
import hook (:class:`_AfterImport`, a ``sys.meta_path`` finder for Dynamo's
backend registry module) waits for it; it changes no torch code.
``torch.compiler.set_default_backend(None)`` restores plain Inductor. The same
hook registers torchtpu's Dynamo device interface when Dynamo's
``device_interface`` module loads (:mod:`torchtpu._dynamo_device`), and the
rules that trace ``torch.tpu.synchronize`` and its siblings as their
``torch.cuda`` counterparts (:mod:`torchtpu._dynamo_tracing`).
"""

import importlib.abc
import importlib.machinery
import sys

_REGISTRY = "torch._dynamo.backends.registry"
_DEVICE_INTERFACE = "torch._dynamo.device_interface"
_TRACE_RULES = "torch._dynamo.trace_rules"
_TORCH_VARIABLES = "torch._dynamo.variables.torch"


def _is_tpu(value):
    device = getattr(value, "device", None)
    return getattr(device, "type", None) == "tpu"


def graph_uses_tpu(gm, example_inputs):
    """True when an input of ``gm`` or a value it computes lives on tpu.

    ``example_inputs`` are Dynamo's FakeTensors (parameters are inputs too);
    a graph that only creates tpu tensors (``torch.ones(3, device="tpu")``) is
    found through the values Dynamo recorded on its nodes.
    """
    if any(_is_tpu(x) for x in example_inputs):
        return True
    for node in gm.graph.nodes:
        for key in ("example_value", "val"):
            value = node.meta.get(key)
            values = value if isinstance(value, (list, tuple)) else (value,)
            if any(_is_tpu(v) for v in values):
                return True
    return False


def default_backend(gm, example_inputs, mode=None, options=None):
    """``torch.compile``'s default backend while torchtpu is loaded.

    Args:
        gm: the FX graph Dynamo captured.
        example_inputs: its inputs (FakeTensors, SymInts).
        mode, options: ``torch.compile``'s arguments of the same name.

    Returns:
        the compiled callable of :func:`torchtpu._dynamo.tpu_backend` for a graph
        that touches tpu, else Inductor's.

    Raises:
        RuntimeError: Inductor's, for an unknown ``options`` key (raised at the
            first call of the compiled function, not at ``torch.compile``).
    """
    if graph_uses_tpu(gm, example_inputs):
        from torchtpu import _dynamo

        return _dynamo.tpu_backend(gm, example_inputs, mode=mode, options=options)
    import torch

    return torch._TorchCompileInductorWrapper(mode, options, None)(gm, example_inputs)


def _make_default(registry):
    if registry.get_default_backend() == "inductor":
        registry.set_default_backend(default_backend)


def _install_device_interface(module):
    from torchtpu import _dynamo_device

    _dynamo_device.install(module)


def _install_trace_rules(module):
    from torchtpu import _dynamo_tracing

    _dynamo_tracing.install_trace_rules(module)


def _install_torch_variables(module):
    from torchtpu import _dynamo_tracing

    _dynamo_tracing.install_torch_variables(module)


# Dynamo's modules -> what runs on each once its code has run.
_AFTER = {_REGISTRY: _make_default, _DEVICE_INTERFACE: _install_device_interface,
          _TRACE_RULES: _install_trace_rules, _TORCH_VARIABLES: _install_torch_variables}


class _ThenMakeDefault(importlib.abc.Loader):
    """Runs a module's own loader, then its function of :data:`_AFTER` on it."""

    def __init__(self, inner, then):
        self._inner = inner
        self._then = then

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self._then(module)

    def __getattr__(self, name):  # get_source, get_filename ... (linecache, inspect)
        return getattr(self._inner, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds each module of :data:`_AFTER` once, as the path finder would, with
    a loader that runs its function after the module ran."""

    def __init__(self, pending):
        self.pending = dict(pending)

    def find_spec(self, name, path, target=None):
        # Stays in sys.meta_path (removing it while importlib iterates the list
        # would skip the next finder), answering nothing once it has served.
        then = self.pending.pop(name, None)
        if then is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenMakeDefault(spec.loader, then)
        return spec


def install():
    """Makes :func:`default_backend` torch.compile's default and registers the
    device interface, now or when Dynamo loads."""
    pending = {}
    for name, then in _AFTER.items():
        module = sys.modules.get(name)
        if module is not None:
            then(module)
        else:
            pending[name] = then
    if pending and not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(pending))

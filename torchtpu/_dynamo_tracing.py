"""Dynamo traces ``torch.tpu``'s device functions as it traces ``torch.cuda``'s.

Dynamo knows ``torch.cuda.synchronize``, ``current_stream``, ``device_count``,
``is_available`` and ``current_device`` by name (``torch._dynamo.trace_rules``
and the handlers of ``torch._dynamo.variables.torch``); ``torch.tpu``'s are
torchtpu's Python functions over ``torchtpu._C`` builtins, so Dynamo warned
"does not know how to trace the builtin" and broke the graph at each call. With
this module's rules, in a compiled function:

- ``torch.tpu.synchronize()`` is the graph's ``streams::synchronize_device``
  op, as ``torch.cuda.synchronize()`` and ``torch.accelerator.synchronize()``
  are;
- ``torch.tpu.current_stream()`` is Dynamo's symbolic current stream, as
  ``torch.cuda.current_stream()``;
- ``torch.tpu.device_count()`` and ``torch.tpu.is_available()`` are constants
  of the trace (fixed for a process), and ``torch.tpu.current_device()`` a
  constant guarded on its value, as ``torch.cuda.current_device()``.

Installed by the import hook of :mod:`torchtpu._compile_default` when Dynamo's
modules load. A torch whose Dynamo lacks the names read here is left as it is
(the calls graph-break and run right; tests/compile/test_compile_default.py
then shows the breaks): the hook must never make Dynamo's import fail.
"""

import functools

import torch

# torch.tpu functions Dynamo puts in the graph (or folds) instead of tracing into.
_IN_GRAPH = ("synchronize", "current_stream", "device_count", "is_available", "current_device")


def install_trace_rules(trace_rules):
    """Marks the functions of :data:`_IN_GRAPH` as in-graph torch functions in
    Dynamo's ``trace_rules`` module (the rule of ``torch.cuda.synchronize``)."""
    in_graph = getattr(trace_rules, "torch_non_c_binding_in_graph_functions", {})
    rule = in_graph.get("torch.cuda.synchronize")
    if rule is None or not hasattr(trace_rules.get_torch_obj_rule_map, "cache_clear"):
        return
    for name in _IN_GRAPH:
        in_graph[f"torch.tpu.{name}"] = rule
    trace_rules.get_torch_obj_rule_map.cache_clear()


def install_torch_variables(variables):
    """Gives ``torch.tpu``'s functions the handling of their ``torch.accelerator``
    counterparts in Dynamo's ``variables.torch`` module."""
    tpu = torch.tpu
    cls = getattr(variables, "TorchInGraphFunctionVariable", None)
    folds = getattr(variables, "constant_fold_functions", None)
    guarded = getattr(variables, "constant_fold_functions_need_guards", None)
    if cls is None or not isinstance(folds, dict) or not isinstance(guarded, dict):
        return
    for fn in (tpu.device_count, tpu.is_available, tpu.current_device):
        folds[fn] = None
    guarded[tpu.current_device] = None
    torch_handlers = cls._get_handlers

    @functools.cache
    def _get_handlers():
        handlers = dict(torch_handlers())
        for ours, theirs in ((tpu.synchronize, torch.accelerator.synchronize),
                             (tpu.current_stream, torch.accelerator.current_stream)):
            if theirs in handlers:
                handlers[ours] = handlers[theirs]
        return handlers

    cls._get_handlers = staticmethod(_get_handlers)

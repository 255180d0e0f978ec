"""Activation checkpointing with random ops inside ``torch.compile(backend="tpu")``.

``import torchtpu`` calls ``enable()`` (idempotent; about 1 ms).

Why: when a compiled function calls ``torch.utils.checkpoint.checkpoint`` over
a random op (dropout), AOTAutograd's partitioner (``functionalize_rng_ops`` in
torch/_functorch/partitioners.py) rewrites the forward's random op into
``run_and_save_rng_state`` (returns the device RNG state, then runs the op) and
the recomputed one in the backward into ``run_with_rng_state`` (sets that
state, runs the op, restores), so the recompute draws the forward's mask. Those
two higher-order ops (torch/_prims/rng_prims.py, torch 2.13) have kernels for
CPU, CUDA, HPU and XPU, and their fake/proxy tracing picks one from a table of
those four device types, so compiling raised ``AssertionError: Backend not
supported for tpu``. CUDA's kernels read and set ``torch.cuda``'s state.

``enable()`` gives both ops a PrivateUse1 kernel doing the same with
``torch.tpu.get_rng_state``/``set_rng_state``, and makes the table answer tpu
inputs with the tpu kernel: it puts a function in front of PyTorch's table
(each op's BackendSelect kernel, where tensors dispatch it first, and the
closure cell through which run_and_save_rng_state's fake and proxy kernels
call it); every other device still goes to PyTorch's.

Measured (tests/integration/test_seams_checkpoint.py): gradients equal the compiled
function's without checkpointing, bit for bit, on every step, and the masks
change from step to step (the state is read at each call, not frozen into the
compiled program).

Idempotent. Raises RuntimeError if this PyTorch's rng_prims no longer has the
structure described (the tests pin it).
"""

import torch
from torch._C import DispatchKey
from torch._higher_order_ops.utils import registered_hop_fake_fns
from torch._prims import rng_prims
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode

__all__ = ["enable"]

_run_and_save = rng_prims.run_and_save_rng_state
_run_with = rng_prims.run_with_rng_state
# PyTorch's device-table function (``impl_backend_select`` in
# register_run_and_save_rng_state_op), which its fake and proxy kernels call
# through a shared closure cell.
_torch_backend_select = _run_and_save.py_kernels[DispatchKey.BackendSelect]
# The same table for run_with_rng_state, its kernel at BackendSelect (where
# tensors of any device dispatch the op first).
_torch_backend_select_with = _run_with.py_kernels[DispatchKey.BackendSelect]


def _save_tpu(op, *args, **kwargs):
    """run_and_save_rng_state on tpu: (the state ``op`` draws from, op's result)."""
    return torch.tpu.get_rng_state(), op(*args, **kwargs)


def _with_tpu(rng_state, op, *args, **kwargs):
    """run_with_rng_state on tpu: ``op`` drawing from ``rng_state``; the
    generator's own state is put back afterwards."""
    current = torch.tpu.get_rng_state()
    torch.tpu.set_rng_state(rng_state.cpu())
    try:
        return op(*args, **kwargs)
    finally:
        torch.tpu.set_rng_state(current)


def _backend_select(op, *args, **kwargs):
    if rng_prims.get_device(args, kwargs) == "tpu":
        return _save_tpu(op, *args, **kwargs)
    return _torch_backend_select(op, *args, **kwargs)


def _backend_select_with(rng_state, op, *args, **kwargs):
    if rng_prims.get_device(args, kwargs) == "tpu":
        return _with_tpu(rng_state, op, *args, **kwargs)
    return _torch_backend_select_with(rng_state, op, *args, **kwargs)


def _table_cells():
    """The closure cells holding PyTorch's table function (or ours, once
    swapped) in the fake and proxy kernels of run_and_save_rng_state."""
    kernels = (registered_hop_fake_fns.get(_run_and_save),
               _run_and_save.python_key_table.get(ProxyTorchDispatchMode))
    cells = []
    for kernel in kernels:
        for cell in getattr(kernel, "__closure__", None) or ():
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if contents is _torch_backend_select or contents is _backend_select:
                cells.append(cell)
    return cells


def enable():
    """Lets ``torch.compile(backend="tpu")`` compile ``checkpoint`` over random
    ops on tpu (module docstring). Calling it again does nothing more."""
    cells = _table_cells()
    if not cells:
        raise RuntimeError(
            "torchtpu.integrations.checkpoint.enable(): torch/_prims/rng_prims.py no longer "
            "has the fake/proxy kernels this patches (written for torch 2.13); compiled "
            "checkpointing with dropout on tpu is not enabled")
    for cell in cells:
        cell.cell_contents = _backend_select
    _run_and_save.py_kernels[DispatchKey.BackendSelect] = _backend_select
    _run_with.py_kernels[DispatchKey.BackendSelect] = _backend_select_with
    for hop, kernel in ((_run_and_save, _save_tpu), (_run_with, _with_tpu)):
        if DispatchKey.PrivateUse1 not in hop.py_kernels:
            hop.py_impl(DispatchKey.PrivateUse1)(kernel)
        hop._dispatch_cache.clear()

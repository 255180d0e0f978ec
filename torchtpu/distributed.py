"""torch.distributed on tpu: the c10d backend ``"tpu"``.

Importing torchtpu registers it with
``torch.distributed.Backend.register_backend("tpu", ..., devices=["tpu"])``, so:

- ``dist.init_process_group()`` with no backend (the accelerator is tpu) uses
  ``"tpu"`` for tpu tensors and ``"gloo"`` for CPU tensors;
- ``dist.init_process_group("cpu:gloo,tpu:tpu")`` says the same explicitly;
- ``dist.init_process_group("tpu")`` makes a tpu-only group: a CPU tensor passed
  to it raises ``ValueError`` naming tpu.

The backend (``csrc/distributed``) stages each collective's tpu tensors through
host memory and runs it with ``ProcessGroupGloo`` on the same store, rank, size
and timeout, then copies the results back into the tpu tensors in place.

Devices per process: a script written for CUDA puts rank r on ``cuda:{r}``
(``tpu:{LOCAL_RANK}``), since on a GPU host every process sees every GPU. On
the CPU plugin a process has ``TORCHTPU_CPU_DEVICES`` devices (default 1), so
when a tpu group is created before the process's first tpu use and that
variable is unset, the plugin is given one device per local rank
(``LOCAL_WORLD_SIZE``, as torchrun sets it, else the group's size): ``tpu:{r}``
then exists in rank r, as ``cuda:{r}`` does. Once the runtime has started (a
tpu tensor was made before ``init_process_group``) the count is fixed and
``tpu:{r}`` past it raises IndexError naming the count.
"""

import os

import torch

BACKEND = "tpu"  # the c10d backend's name


def create_backend(store, rank, size, timeout):
    """Creates the tpu c10d backend (the creator given to ``register_backend``).

    Args:
        store: the group's ``torch.distributed.Store`` (a prefix store).
        rank: this process's rank in the group, ``0 <= rank < size``.
        size: the number of processes in the group.
        timeout: ``datetime.timedelta``; every collective's wait is bounded by it.

    Returns:
        a ``torch._C._distributed_c10d.Backend`` handling tpu tensors.

    Raises:
        RuntimeError: the inner gloo backend cannot connect (its own message).
    """
    from torchtpu import _C

    _devices_for_local_ranks(size)
    return _C._dist_tpu_backend(store, rank, size, timeout)


def _devices_for_local_ranks(group_size=None):
    """Before the runtime starts, gives the CPU plugin one device per local rank
    (see the module docstring) unless ``TORCHTPU_CPU_DEVICES`` says otherwise:
    ``LOCAL_WORLD_SIZE``, else ``group_size``, else ``WORLD_SIZE``."""
    from torchtpu import _C

    if _C._is_initialized() or os.environ.get("TORCHTPU_CPU_DEVICES"):
        return
    for count in (os.environ.get("LOCAL_WORLD_SIZE", ""), group_size,
                  os.environ.get("WORLD_SIZE", "")):
        if str(count).isdigit() and int(count) > 0:
            os.environ["TORCHTPU_CPU_DEVICES"] = str(count)
            return


def _default_config_with_cpu(original_init):
    # torch 2.13 maps init_process_group() with no backend to the accelerator's
    # backend alone; a tpu process then could not run a CPU collective (object
    # collectives, a CPU barrier). Adding gloo for CPU keeps both working.
    def __init__(self, backend):
        # Before torch asks for the accelerator (which starts the runtime).
        _devices_for_local_ranks()
        original_init(self, backend)
        from torch.distributed.distributed_c10d import Backend

        mapping = self.device_backend_map
        if str(backend) == Backend.UNDEFINED and mapping.get("tpu") == BACKEND:
            if "cpu" not in mapping:
                self.device_backend_map = {"cpu": Backend(Backend.GLOO), **mapping}
        elif str(backend) == Backend.GLOO and "tpu" not in mapping:
            # On a GPU host "gloo" serves CUDA tensors too, so CPU-only scripts
            # whose defaults follow the accelerator (FSDP2's and DeviceMesh's
            # default device) keep working there; the tpu backend (gloo,
            # host-staged) does the same for tpu tensors.
            self.device_backend_map = {**mapping, "tpu": Backend(BACKEND)}

    __init__._torchtpu_wrapped = True
    return __init__


def _refuse_data_parallel(original_init):
    # nn.DataParallel picks tpu as the available device type, then scatters,
    # replicates and gathers through torch._C._scatter / _broadcast_coalesced /
    # _gather, which CPU builds of torch do not have: an AttributeError at the
    # first forward. Say so at construction, with the supported alternative.
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        from torch._utils import _get_available_device_type

        if _get_available_device_type() == BACKEND:
            raise NotImplementedError(
                "nn.DataParallel is not supported on tpu: it needs torch._C._scatter, "
                "_broadcast_coalesced and _gather, which only CUDA builds of torch have. "
                "Use DistributedDataParallel (one process per tpu device, backend 'tpu'; "
                "tpu:{rank} works in each rank) or run the module on one device.")
        original_init(self, module, device_ids, output_device, dim)

    __init__._torchtpu_wrapped = True
    return __init__


def _register():
    """Registers the backend once; a no-op when torch has no distributed support."""
    if not torch.distributed.is_available():
        return
    from torch.distributed import distributed_c10d as c10d

    if BACKEND.upper() in c10d.Backend._plugins:
        return
    c10d.Backend.register_backend(BACKEND, create_backend, devices=[BACKEND])
    dp = torch.nn.DataParallel
    if not getattr(dp.__init__, "_torchtpu_wrapped", False):
        dp.__init__ = _refuse_data_parallel(dp.__init__)
    if not getattr(c10d.BackendConfig.__init__, "_torchtpu_wrapped", False):
        c10d.BackendConfig.__init__ = _default_config_with_cpu(c10d.BackendConfig.__init__)


_register()

"""Finding the PJRT plugin: the xla-cpu-pjrt package by default."""

import importlib.util
import os
from pathlib import Path


def default_plugin_path():
    """Path of ``xla_cpu_pjrt.so`` from the installed xla-cpu-pjrt, or None."""
    spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "xla_cpu_pjrt.so"
    return str(path) if path.exists() else None


def resolve(plugin):
    """Plugin path for ``plugin`` (a path, ``"cpu"`` or None).

    Raises:
        RuntimeError: ``"cpu"`` was asked for and xla-cpu-pjrt is not installed.
    """
    if plugin in (None, "", "cpu"):
        path = default_plugin_path()
        if path is None:
            raise RuntimeError(
                "torchtpu: the CPU PJRT plugin is not installed; run "
                "`pip install xla-cpu-pjrt==0.0.1` or set TORCHTPU_PLUGIN to a plugin .so"
            )
        return path
    return os.fspath(plugin)

"""Builds torchtpu's C++ core with CMake against the installed torch.

Build with `pip install --no-build-isolation .` (or `-e .`): torch must already be
installed (torch==2.13.0, CPU build), since its headers and libraries are what the
extension links against. The PJRT C API header comes from the installed
xla-cpu-pjrt wheel.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _plugin_dir() -> Path:
    spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torchtpu build: install xla-cpu-pjrt first (it ships pjrt_c_api.h)")
    return Path(list(spec.submodule_search_locations)[0])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # An installed torchtpu is autoloaded by `import torch`; while building,
        # its extension may be missing or stale.
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        import torch

        out_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = Path(os.environ.get("TORCHTPU_BUILD_DIR", ROOT / "build"))
        build_dir.mkdir(parents=True, exist_ok=True)
        plugin_dir = _plugin_dir()
        cfg = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
            f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DPJRT_INCLUDE_DIR={plugin_dir / 'include'}",
            f"-DTORCHTPU_TEST_PLUGIN={plugin_dir / 'xla_cpu_pjrt.so'}",
            f"-DTORCHTPU_PACKAGE_DIR={ROOT / 'torchtpu'}",
            "-DCMAKE_BUILD_TYPE=Release",
        ]
        # ccache hashes paths relative to the checkout, so a fresh clone elsewhere
        # (CI) reuses objects compiled in another checkout of the same sources.
        os.environ.setdefault("CCACHE_BASEDIR", str(ROOT))
        # _C's precompiled torch header (csrc/aten/torch_pch.h) is cacheable
        # only with these (ccache's manual, "Precompiled headers").
        os.environ.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros")
        subprocess.check_call(cfg)
        jobs = os.environ.get("TORCHTPU_BUILD_JOBS", "2")
        # Only the extension and the layers under it: the GoogleTest programs are
        # built by scripts/run_tests.sh, which runs them (a first setup is ~1 min
        # shorter on 2 cores).
        subprocess.check_call(["cmake", "--build", str(build_dir), "-j", jobs, "--target", "_C"])
        # CMake writes torchtpu/_C.so in the source tree (what an editable install
        # imports); a wheel build expects the file at setuptools' own path too.
        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        built = ROOT / "torchtpu" / target.name
        if target != built:
            out_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built, target)


setup(
    ext_modules=[Extension("torchtpu._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)

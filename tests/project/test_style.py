"""The formatter configs hold: every C++ file under csrc/ is as clang-format
formats it (.clang-format), and the Python lints clean under ruff
(pyproject.toml's [tool.ruff]). Both tools come from PyPI, pinned in
requirements-dev.txt, so the check does not depend on the machine."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _tool(name):
    path = BIN / name
    assert path.exists(), f"{name} is not installed in this environment (requirements-dev.txt)"
    return str(path)


def test_cpp_is_clang_formatted():
    files = sorted(str(p) for ext in ("*.cc", "*.h") for p in (ROOT / "csrc").rglob(ext))
    assert len(files) > 100
    p = subprocess.run([_tool("clang-format"), "--dry-run", "--Werror", *files], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, "run clang-format -i on:\n" + p.stderr[:3000]


def test_python_lints_clean():
    p = subprocess.run([_tool("ruff"), "check", "torchtpu", "tests", "bench", "scripts"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-1000:]

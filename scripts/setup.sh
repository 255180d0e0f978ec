#!/usr/bin/env bash
# Sets up everything on a fresh machine: system packages (GoogleTest, OpenSSL, ccache,
# ninja), a virtual environment in .venv with torch==2.13.0 (CPU build), the
# xla-cpu-pjrt plugin and the example/test dependencies, then builds torchtpu.
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
# OpenSSL's libcrypto: SHA-256 for the persistent compile cache (csrc/cache).
[ -f /usr/include/openssl/evp.h ] || need_apt+=(libssl-dev)
command -v ccache >/dev/null || need_apt+=(ccache)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
# Debian's python3 creates no venv without ensurepip (package python3-venv).
"${PYTHON:-python3}" -c "import ensurepip" 2>/dev/null || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch first and pinned: 2.13.0 is the CPU build on this machine's disk; the
# rest must not pull another torch.
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -r requirements-dev.txt
# timm without its dependencies: they pull PyPI's torchvision, a CUDA build whose
# import fails next to the CPU torch and then breaks every transformers model
# import (see torchtpu/tools/timm_compat.py).
.venv/bin/python -m pip install -q --no-deps timm==1.0.31
echo "setup.sh: building torchtpu (C++; the first build takes minutes on 2 cores)"
.venv/bin/python -m pip install -q --no-build-isolation --no-deps -e .

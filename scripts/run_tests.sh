#!/usr/bin/env bash
# Sets everything up, then runs every test: the C++ suites (ctest: PJRT layer,
# IR, StableHLO emitter) and the Python suites (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
(cd build && ctest --output-on-failure)
.venv/bin/python -m pytest tests -q -p no:cacheprovider "$@"

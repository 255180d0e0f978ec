#!/usr/bin/env bash
# Sets everything up, then runs every test: the C++ suites (ctest: PJRT layer,
# IR, StableHLO emitter), the Python suites (pytest), then the op suites again
# with every test starting in fused eager mode, whose results must equal
# strict mode's (TORCHTPU_TEST_MODE, see tests/_util.py), and some of them with
# the default-on settings turned off. Extra arguments go
# to one plain pytest run of tests/ instead (e.g. -k examples).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The C++ test programs (setup.sh builds only the extension).
CCACHE_SLOPPINESS=pch_defines,time_macros cmake --build build -j "${TORCHTPU_BUILD_JOBS:-2}"
(cd build && ctest --output-on-failure)
# The whole suite runs its files on two worker processes (pytest-xdist, a file
# per worker at a time), except those marked `alone` (they time a wait, launch
# process groups or interrupt themselves): they run alone afterwards, on a
# quiet machine. The passes that follow pick their files by marker too
# (pyproject.toml; tests/README.md says which files carry which).
if [ $# -ne 0 ]; then
  .venv/bin/python -m pytest tests -q -p no:cacheprovider "$@"
  exit 0
fi
# Each pass ends with its 15 slowest tests: where the suite's time goes (a
# lowering that compiles for seconds shows there first).
PYTEST=(.venv/bin/python -m pytest tests -q -p no:cacheprovider --durations=15)
PARALLEL=(-n 2 --dist loadfile)
"${PYTEST[@]}" "${PARALLEL[@]}" -m "not alone"
"${PYTEST[@]}" -m alone
# The fused-mode pass: the op suites again, every test starting in fused mode.
TORCHTPU_TEST_MODE=fused "${PYTEST[@]}" -m "fused_pass and alone"
TORCHTPU_TEST_MODE=fused "${PYTEST[@]}" "${PARALLEL[@]}" -m "fused_pass and not alone"
# The opt-outs: op suites again with background compiles and growing buckets
# (both on by default) turned off, each op waiting for its compile (~1.5 min).
TORCHTPU_BACKGROUND_COMPILE=0 TORCHTPU_GROWING_BUCKETS=none "${PYTEST[@]}" "${PARALLEL[@]}" \
  -m opt_out_pass

#!/usr/bin/env bash
# Sets everything up, then runs every test: the C++ suites (ctest: PJRT layer,
# IR, StableHLO emitter), the Python suites (pytest), then the op suites again
# with every test starting in fused eager mode, whose results must equal
# strict mode's (TORCHTPU_TEST_MODE, see tests/_util.py), and some of them in
# strict mode with background compiles. Extra arguments go
# to one plain pytest run of tests/ instead (e.g. -k examples).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
(cd build && ctest --output-on-failure)
# The whole suite runs its files on two worker processes (pytest-xdist, a file
# per worker at a time), except those that time a wait, launch process groups
# or interrupt themselves: they run alone afterwards, on a quiet machine.
ALONE=(tests/test_distributed.py tests/test_lifecycle.py tests/test_streams_memory.py
       tests/test_cache.py tests/test_fused.py tests/test_fused_hybrid.py tests/test_multidevice.py
       tests/test_fuzz.py tests/test_distributed_recipes.py)
if [ $# -ne 0 ]; then
  .venv/bin/python -m pytest tests -q -p no:cacheprovider "$@"
  exit 0
fi
PARALLEL=(-n 2 --dist loadfile)
.venv/bin/python -m pytest tests -q -p no:cacheprovider "${PARALLEL[@]}" \
  $(printf -- '--ignore=%s ' "${ALONE[@]}")
.venv/bin/python -m pytest -q -p no:cacheprovider "${ALONE[@]}"
# The fused-mode pass: the op suites again, every test starting in fused mode.
TORCHTPU_TEST_MODE=fused .venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/test_streams_memory.py tests/test_multidevice.py tests/test_spmd.py tests/test_fuzz.py
TORCHTPU_TEST_MODE=fused .venv/bin/python -m pytest -q -p no:cacheprovider "${PARALLEL[@]}" \
    tests/test_ops_unary.py tests/test_ops_reduce.py tests/test_ops_nn.py \
    tests/test_ops_index.py tests/test_ops_sort.py tests/test_ops_extra.py tests/test_views.py \
    tests/test_random.py tests/test_device.py tests/test_ops_special.py tests/test_ops_nn2.py \
    tests/test_ops_nn3.py tests/test_ops_linalg.py tests/test_ops_fft.py tests/test_complex.py \
    tests/test_int_edges.py tests/test_layout.py tests/test_edge_semantics.py \
    tests/test_amp.py tests/test_fused_optim.py \
    tests/test_rnn_cell.py tests/test_transformer_fastpath.py tests/test_pinned.py \
    tests/test_ops_depthwise.py tests/test_float8_dtypes.py tests/test_sparse_coo.py \
    tests/test_generate_compiles.py tests/test_ops_sdpa.py tests/test_foreach.py
# Strict mode with background compiles (opt-in, TORCHTPU_BACKGROUND_COMPILE=1):
# op suites whose ops are recorded while their programs compile (~1.5 min).
TORCHTPU_BACKGROUND_COMPILE=1 .venv/bin/python -m pytest -q -p no:cacheprovider \
    "${PARALLEL[@]}" tests/test_ops_unary.py tests/test_ops_reduce.py tests/test_ops_nn.py \
    tests/test_ops_index.py tests/test_ops_extra.py tests/test_views.py tests/test_autograd.py \
    tests/test_edge_semantics.py tests/test_foreach.py tests/test_random.py tests/test_layout.py \
    tests/test_deferred_checks.py tests/test_errors.py tests/test_growing_buckets.py

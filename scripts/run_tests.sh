#!/usr/bin/env bash
# Sets everything up, then runs every test: the C++ suites (ctest: PJRT layer,
# IR, StableHLO emitter), the Python suites (pytest), then the op suites again
# with every test starting in fused eager mode, whose results must equal
# strict mode's (TORCHTPU_TEST_MODE, see tests/_util.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
(cd build && ctest --output-on-failure)
.venv/bin/python -m pytest tests -q -p no:cacheprovider "$@"
# The fused-mode pass runs only for the whole suite (no extra pytest arguments):
# a selection like -k examples would match none of these files.
if [ $# -eq 0 ]; then
  TORCHTPU_TEST_MODE=fused .venv/bin/python -m pytest -q -p no:cacheprovider \
    tests/test_ops_unary.py tests/test_ops_reduce.py tests/test_ops_nn.py \
    tests/test_ops_index.py tests/test_ops_sort.py tests/test_ops_extra.py tests/test_views.py \
    tests/test_random.py tests/test_device.py tests/test_ops_special.py tests/test_ops_nn2.py \
    tests/test_ops_nn3.py tests/test_ops_linalg.py tests/test_ops_fft.py tests/test_complex.py \
    tests/test_int_edges.py tests/test_layout.py tests/test_edge_semantics.py tests/test_fuzz.py \
    tests/test_multidevice.py tests/test_streams_memory.py tests/test_amp.py tests/test_fused_optim.py \
    tests/test_rnn_cell.py tests/test_transformer_fastpath.py tests/test_pinned.py \
    tests/test_ops_depthwise.py tests/test_float8_dtypes.py tests/test_sparse_coo.py \
    tests/test_generate_compiles.py tests/test_ops_sdpa.py tests/test_foreach.py
fi

"""The op suite's sample graphs under torch.compile(backend="tpu") equal tpu
eager (issue 5): for a deterministic subset of the OpInfos with tpu lowerings,
the first float32 sample runs eagerly on tpu and as a compiled graph (captured
at the first call, replayed at the second), and all three results must match.

A subset (every ``_STRIDE``-th OpInfo) keeps the file near a minute and a half: each case
pays a Dynamo trace and an XLA compile. ``python -m torchtpu.tools.coverage``
remains the full eager sweep.
"""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import torchtpu
from torchtpu.tools._opinfo_sweep import NONDETERMINISTIC, _compare, full_name, to_cpu, to_tpu
from _util import fresh_dynamo  # noqa: F401  (autouse: a fresh Dynamo per test)

_STRIDE = 2


def _candidates():
    lowered = {op.split(".")[0] for op in torchtpu.metrics.lowered_ops()}
    for op in op_db:
        if op.name.startswith(("masked.", "sparse.", "_")) or op.variant_test_name:
            continue
        if full_name(op) in NONDETERMINISTIC or op.name in NONDETERMINISTIC:
            continue
        if torch.float32 not in op.supported_dtypes("cpu"):
            continue
        if op.aten_name in lowered or op.name.split(".")[-1] in lowered:
            yield op


_OPS = list(_candidates())[::_STRIDE]



@pytest.mark.parametrize("op", _OPS, ids=full_name)
def test_compiled_sample_matches_eager(op):
    samples = op.sample_inputs("cpu", torch.float32, requires_grad=False)
    sample = next(iter(samples), None)
    if sample is None:
        pytest.skip("no float32 sample")
    inp, args, kwargs = to_tpu(sample.input), to_tpu(sample.args), to_tpu(sample.kwargs)
    torchtpu.metrics.reset()
    try:
        eager = to_cpu(op(inp, *args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the eager sweep covers op errors
        pytest.skip(f"eager tpu raises {type(exc).__name__}")
    eager_fallbacks = set(torchtpu.metrics.fallback_counts())
    # Ops recorded while their programs compile in the background (an
    # in-place running-stats update nobody read) run here, so their compiles
    # are not counted below.
    torchtpu.sync()

    def graph(x, *a):
        return op(x, *a, **kwargs)

    compiled = torch.compile(graph, backend="tpu")
    torchtpu.metrics.reset()
    first = to_cpu(compiled(inp, *args))   # capture
    torchtpu.sync()  # as above: eager copies back into mutated inputs
    compiles = torchtpu.metrics.metrics()["compiles"]
    second = to_cpu(compiled(inp, *args))  # replay
    assert torchtpu.metrics.metrics()["compiles"] == compiles
    # The compiled graph falls back only where eager does (core ATen
    # decompositions may reach other ops; none of them may be unlowered).
    assert set(torchtpu.metrics.fallback_counts()) <= eager_fallbacks, \
        torchtpu.metrics.fallback_counts()
    _compare(first, eager)
    _compare(second, eager)

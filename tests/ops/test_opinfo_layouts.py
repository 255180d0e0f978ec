"""OpInfo samples laid out non-contiguous and channels_last, on tpu against CPU.

A fast check of the sweep's ``layout`` option (``python -m
torchtpu.tools.coverage --layout``, :mod:`torchtpu.tools._opinfo_sweep`): ten
representative ops must be ``native`` in both layouts, i.e. every sample
matches CPU, no CPU fallback runs, and in channels_last the outputs of
pointwise ops, convolutions, pools and norms have CPU's strides.

``op_db`` has no 4-D floating sample for some of them (add, mul, softmax,
group_norm, layer_norm, index_select): for channels_last these get the 4-D
samples below, so each case runs at least one channels_last input.
"""

import pytest
import torch
from torch.testing import make_tensor
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import SampleInput

from torchtpu.tools._opinfo_sweep import full_name, run_samples

_OPS = ("add", "mul", "softmax", "nn.functional.conv2d", "nn.functional.max_pool2d",
        "nn.functional.batch_norm", "nn.functional.group_norm", "nn.functional.layer_norm",
        "index_select", "cat",
        # The whole-op_db channels_last sweep's stride mismatches, fixed.
        "_batch_norm_with_update", "max_pool2d_with_indices_backward",
        "nn.functional.max_unpool2d")
_LIMIT_SAMPLES = 4  # keeps the file under a minute on a busy 2-core host
_BY_NAME = {full_name(op): op for op in op_db}


def _t(*shape):
    return make_tensor(shape, dtype=torch.float32, device="cpu")


def _nchw_samples(name):
    """Hand-made 4-D samples for the OpInfos whose own samples have none; []
    for the others. NCHW (2, 6, 4, 5): C = 6 and H * W = 20, so channels_last
    really changes the strides."""
    x = _t(2, 6, 4, 5)
    if name in ("add", "mul"):
        return [SampleInput(x, args=(_t(2, 6, 4, 5),)),
                SampleInput(x, args=(_t(1, 6, 1, 1),)),  # a per-channel broadcast
                SampleInput(x, args=(2.5,))]
    if name == "softmax":
        return [SampleInput(x, args=(1,)), SampleInput(x, args=(-1,))]
    if name == "nn.functional.group_norm":
        return [SampleInput(x, args=(3,), kwargs={"weight": _t(6), "bias": _t(6)})]
    if name == "nn.functional.layer_norm":
        return [SampleInput(x, args=((4, 5), _t(4, 5), _t(4, 5)))]
    if name == "index_select":
        return [SampleInput(x, args=(1, torch.tensor([5, 0, 2, 2])))]
    return []


@pytest.mark.parametrize("layout", ("noncontiguous", "channels_last"))
@pytest.mark.parametrize("name", _OPS)
def test_layout_is_native(name, layout):
    op = _BY_NAME[name]
    samples = op.sample_inputs("cpu", torch.float32)
    if layout == "channels_last":
        samples = [*_nchw_samples(name), *samples]
    torch.manual_seed(0)
    result = run_samples(op, torch.float32, samples, _LIMIT_SAMPLES, layout=layout)
    assert result.samples > 0, f"{name}: no sample that {layout} changes"
    assert result.category == "native", (
        f"{name} {layout}: {result.category} {result.detail} fallbacks={result.fallbacks} "
        f"(same sample contiguous: {result.contiguous or 'not run'})")

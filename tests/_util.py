"""Helpers shared by the Python tests: compare tpu results with CPU PyTorch
(run_both, the one compare helper; grads_match for gradients) and prove that no
CPU fallback ran."""

import contextlib
import os

import pytest
import torch
import torchtpu


@contextlib.contextmanager
def no_fallback():
    """Fails the test if any ATen op inside the block ran through the CPU fallback."""
    torchtpu.metrics.reset()
    yield
    counts = torchtpu.metrics.fallback_counts()
    assert not counts, f"CPU fallback ran: {counts}"


# A run_both input that is the device itself: fn gets CPU on the CPU run and
# the tpu device on the tpu run (for factories: run_both(lambda d: torch.eye(4,
# device=d), CPU)).
CPU = torch.device("cpu")


def to_tpu(x):
    """Moves tensors (also inside lists/tuples) to tpu, keeping view structure."""
    if isinstance(x, torch.Tensor):
        return x.to("tpu")
    if isinstance(x, (list, tuple)):
        return type(x)(to_tpu(v) for v in x)
    return x


def assert_close_cpu(actual, expected, rtol=None, atol=None, check_dtype=True,
                     check_stride=False):
    """Asserts a tpu result equals the CPU one: values, dtype and shape (and the
    tpu tensor's strides, with `check_stride`).

    `actual` may hold tpu tensors (nested lists/tuples too); `expected` holds the
    CPU PyTorch result. Tolerances default to torch.testing's per-dtype ones.
    """
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close_cpu(a, e, rtol, atol, check_dtype, check_stride)
        return
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"expected a tensor, got {type(actual)}"
        assert actual.device.type == "tpu", f"result on {actual.device}, expected tpu"
        if check_stride:
            assert actual.stride() == expected.stride(), (actual.stride(), expected.stride())
        actual = actual.cpu()
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, check_dtype=check_dtype,
                               equal_nan=True)


def run_both(fn, *inputs, rtol=None, atol=None, view=None, check_stride=False,
             fallback_ok=False):
    """The one CPU-against-tpu check: fn on the CPU `inputs` and fn on their tpu
    copies (no CPU fallback, unless `fallback_ok`) give equal results: values,
    dtype and shape, strides too with `check_stride`; tolerances default to
    torch.testing's per-dtype ones. The tpu copies are made before fn runs, so
    fn may write its inputs in place (on CPU it then writes the caller's
    tensors: pass clones to keep them). `view`, if given, is applied to every
    tensor input on both sides (on CPU to a clone, on tpu to the copy), so fn
    reads non-contiguous views of real tpu storage. An input :data:`CPU` is the
    device itself (factories). Returns (tpu_result, cpu_result)."""
    guard = contextlib.nullcontext if fallback_ok else no_fallback
    with guard():
        tpu_inputs = [torch.device("tpu") if x is CPU else to_tpu(x) for x in inputs]
    cpu_inputs = inputs
    if view is not None:
        cpu_inputs = [view(t.clone()) if isinstance(t, torch.Tensor) else t for t in inputs]
    expected = fn(*cpu_inputs)
    with guard():
        if view is not None:
            tpu_inputs = [view(t) if isinstance(t, torch.Tensor) else t for t in tpu_inputs]
        actual = fn(*tpu_inputs)
    assert_close_cpu(actual, expected, rtol, atol, check_stride=check_stride)
    return actual, expected


def grads_match(fn, *inputs, rtol=None, atol=None, grad_of=(0,)):
    """fn(*inputs) and the gradients of inputs[i] for i in ``grad_of`` on tpu
    equal CPU's (no fallback). The loss is a weighted sum of the output
    (weights spread over [-1, 1]), so every element's gradient differs."""

    def run(device):
        xs = [x.detach().to(device).requires_grad_(i in grad_of) for i, x in enumerate(inputs)]
        out = fn(*xs)
        w = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape).to(device)
        (out * w).sum().backward()
        return out, [x.grad for x in xs if x.requires_grad]

    out_cpu, grads_cpu = run("cpu")
    with no_fallback():
        out_tpu, grads_tpu = run("tpu")
    assert_close_cpu(out_tpu.detach(), out_cpu.detach(), rtol=rtol, atol=atol)
    assert_close_cpu(grads_tpu, grads_cpu, rtol=rtol, atol=atol)


def same_error(fn, *inputs):
    """``fn`` raises on tpu the exception type it raises on CPU, and CPU's
    message (first line) is part of tpu's. The tpu call is followed by a sync
    inside the check: fused mode reports value checks (index and target ranges,
    probabilities) at the next host read."""
    with pytest.raises(Exception) as cpu:
        fn(*inputs)
    with pytest.raises(Exception) as tpu:
        fn(*to_tpu(inputs))
        torchtpu.sync()
    assert type(tpu.value) is type(cpu.value)
    assert str(cpu.value).splitlines()[0] in str(tpu.value)


# The eager mode every test starts in (tests/conftest.py): strict, unless
# TORCHTPU_TEST_MODE names another (scripts/run_tests.sh runs the op suites
# again in fused mode, whose results must be the same).
TEST_MODE = os.environ.get("TORCHTPU_TEST_MODE", "strict")

# An op with no tpu lowering, for tests of the CPU fallback path: the one place
# to change when it gains a lowering.
UNLOWERED_OP = "aten::special_airy_ai.out"


def unlowered(x):
    """``x`` through :data:`UNLOWERED_OP` (CPU fallback on tpu)."""
    return torch.special.airy_ai(x)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles its own graphs: Dynamo caches by code object, and its
    counters (what reached which backend) start at zero. Autouse in the
    torch.compile suites that import it."""
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield
    torch._dynamo.reset()


def new_programs():
    """Programs the process compiled or loaded from the persistent cache
    (``cache_misses``; the suite shares one cache directory, so a program
    another test compiled counts as a load)."""
    return torchtpu.metrics.metrics()["cache_misses"]


class TokenPrograms:
    """A Hugging Face generate streamer: new programs (compiled or loaded) at
    each token; ``per_token()`` gives the differences."""

    def __init__(self):
        self.at = []

    def put(self, value):
        self.at.append(new_programs())

    def end(self):
        self.at.append(new_programs())

    def per_token(self):
        return [b - a for a, b in zip(self.at, self.at[1:])]


def greedy_generate(model, ids, max_new_tokens, **kwargs):
    """Hugging Face greedy ``generate`` of ``max_new_tokens`` after prompt
    ``ids`` [batch, length], without gradients, with an all-ones attention mask."""
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids),
                              max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=0,
                              **kwargs)


def param_grads(module):
    """``module``'s parameter gradients, as CPU copies."""
    return [p.grad.cpu().clone() for p in module.parameters()]


def max_diff(a, b):
    """The largest absolute difference between two lists of tensors."""
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def grads_without_and_with_checkpoint(block, forward, x, use_reentrant, seed=123):
    """``block``'s gradients of ``forward(x).square().sum()``, then of the same
    through ``torch.utils.checkpoint.checkpoint``, each from tpu seed ``seed``."""
    from torch.utils.checkpoint import checkpoint

    grads = []
    for use_ckpt in (False, True):
        block.zero_grad()
        torch.tpu.manual_seed(seed)
        y = checkpoint(forward, x, use_reentrant=use_reentrant) if use_ckpt else forward(x)
        y.square().sum().backward()
        grads.append(param_grads(block))
    return grads


def bert_grads_without_and_with_gradient_checkpointing(wrap=lambda model: model):
    """A tiny random transformers BERT on tpu in train mode (hidden and
    attention dropout 0.1): its gradients without, then with
    ``gradient_checkpointing_enable()``, each from tpu seed 7. ``wrap(model)``
    is what runs (``torch.compile``, say), wrapped anew after the switch."""
    import transformers

    config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=16, hidden_dropout_prob=0.1,
                                     attention_probs_dropout_prob=0.1)
    torch.manual_seed(0)
    model = transformers.BertModel(config, add_pooling_layer=False).to("tpu").train()
    ids = torch.randint(0, 64, (2, 8)).to("tpu")
    grads = []
    for use_ckpt in (False, True):
        if use_ckpt:
            model.gradient_checkpointing_enable()
        run = wrap(model)
        model.zero_grad()
        torch.tpu.manual_seed(7)
        run(input_ids=ids).last_hidden_state.square().sum().backward()
        grads.append(param_grads(model))
    assert model.is_gradient_checkpointing
    return grads


def run_checks_main(namespace, devices):
    """The main of a checks file (tests/_*_checks.py) run in a subprocess with
    TORCHTPU_CPU_DEVICES=devices: runs the check_* functions of `namespace`
    named on the command line (default: all), prints one JSON line
    ``RESULTS {name: None or traceback}``."""
    import json
    import sys
    import traceback

    import torchtpu

    torchtpu.set_eager_mode(os.environ.get("TORCHTPU_TEST_MODE", "strict"))
    assert torch.tpu.device_count() == devices, torch.tpu.device_count()
    names = sys.argv[1:] or [n for n in namespace if n.startswith("check_")]
    results = {}
    for name in names:
        try:
            namespace[name]()
            torchtpu.sync()
            results[name] = None
        except BaseException:  # noqa: BLE001  (reported per check)
            results[name] = traceback.format_exc()
    print("RESULTS " + json.dumps(results))


def run_checks_subprocess(path, devices, extra_env=None, names=(), timeout=600):
    """Runs checks file `path` in a subprocess with `devices` CPU-plugin devices
    and returns its {check name: None or traceback}."""
    import json
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))  # checks files import this module
    pythonpath = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, TORCHTPU_CPU_DEVICES=str(devices), PYTHONPATH=pythonpath)
    env.update(extra_env or {})
    proc = subprocess.run([sys.executable, path, *names], env=env, capture_output=True,
                          text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS ")]
    assert proc.returncode == 0 and lines, (
        f"the {devices}-device subprocess failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n"
        f"{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULTS "):])


# Source for a subprocess that needs one compile of seconds: defines `parts`
# (1,000 tpu tensors [4], part i full of i, synced) and `slow_op`, a
# hand-written StableHLO kernel (torchtpu.kernels) that concatenates them and
# sums: XLA:CPU compiles an N-operand concatenate as one kernel with a branch
# per operand and fuses it into the sum, so slow_op's first call compiles for
# seconds (6.5 s on 2 cores; its registration compiled another program, 4.5 s).
# torchtpu's own concatenates are split into groups (stablehlo/emit.cc), so a
# user's kernel is where such a program comes from. slow_op(*parts) == SLOW_SUM.
SLOW_KERNEL = """
import torch, torchtpu
from torchtpu.kernels import stablehlo_op
_n, _t = 1000, "tensor<4xf32>"
_args = ", ".join(f"%a{i}" for i in range(_n))
_params = ", ".join(f"%a{i}: {_t}" for i in range(_n))
slow_op = stablehlo_op(
    "module { func.func @main(" + _params + ") -> tensor<f32> {\\n"
    f'    %c = "stablehlo.concatenate"({_args}) {{dimension = 0 : i64}} : '
    f"({', '.join([_t] * _n)}) -> tensor<{4 * _n}xf32>\\n"
    "    %z = stablehlo.constant dense<0.0> : tensor<f32>\\n"
    "    %s = stablehlo.reduce(%c init: %z) applies stablehlo.add across dimensions = [0] : "
    f"(tensor<{4 * _n}xf32>, tensor<f32>) -> tensor<f32>\\n"
    "    return %s : tensor<f32>\\n  }\\n}\\n", name="slow_concatenate")
parts = [torch.full((4,), float(i), device="tpu") for i in range(_n)]
SLOW_SUM = 4.0 * sum(range(_n))
# A kernel's first call imports what torch.library needs (sympy, seconds):
# done here, with a small kernel, so that an interrupt lands in the compile.
_small = stablehlo_op("module { func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\\n"
                      "    return %x : tensor<4xf32>\\n  }\\n}\\n", name="small")
assert _small(parts[1]).cpu().tolist() == [1.0] * 4
torchtpu.sync()
"""


NAN = float("nan")
INF = float("inf")


def floats(shape=(4, 5)):
    """A float32 tensor of `shape` drawn by randn * 3 whose first five elements
    (when it has 8 or more) are nan, inf, -inf, 0.0 and -0.0."""
    x = torch.randn(shape) * 3
    if x.numel() >= 8:
        flat = x.view(-1)
        flat[0], flat[1], flat[2], flat[3] = NAN, INF, -INF, 0.0
        flat[4] = -0.0
    return x

"""Runs one OpInfo of PyTorch's ``op_db`` on tpu and on CPU and classifies it.

Shared by :mod:`torchtpu.tools.coverage` (the sweep) and ``tests/ops/test_opinfo.py``.
``op_db`` (``torch.testing._internal.common_methods_invocations``) is the
specification: its sample inputs, PyTorch's default tolerances per dtype
(``torch.testing.assert_close``) and CPU PyTorch's results are the reference.

Categories, per (OpInfo, dtype), worst sample wins:

- ``native``: every sample matches CPU and no ATen op ran through the CPU fallback.
- ``fallback``: every sample matches CPU, some CPU fallback ran.
- ``error``: tpu raised where CPU did not, or raised another exception type.
- ``wrong``: some sample gave another value, dtype or shape than CPU.
- ``layout``: values match, but an output's strides differ from CPU's (checked
  only in the ``channels_last`` layout, see below).
- ``no_samples``: CPU raised for every sample or the OpInfo yields none (in a
  layout other than contiguous: none of the first ``_SCAN_SAMPLES`` samples has
  a tensor the layout changes); excluded from the percentages.

Layouts (``LAYOUTS``) say how the sample tensors are laid out, on CPU and, as
the tpu copies keep the CPU tensors' strides (``to_tpu``), on tpu alike:

- ``contiguous``: as ``op_db`` builds them.
- ``noncontiguous``: ``SampleInput.noncontiguous()``, PyTorch's own helper (every
  contiguous tensor becomes every other element of a buffer whose gaps hold NaN,
  True or 12), as PyTorch's ``test_noncontiguous_samples`` does.
- ``channels_last``: every 4-D floating tensor ``.to(memory_format=
  torch.channels_last)``, every 5-D one ``torch.channels_last_3d``. For
  pointwise ops and convolutions, pools and norms (``checks_strides``) the
  forward outputs' strides (over dimensions longer than 1) must also be CPU's,
  so that a channels_last model keeps CPU's memory format layer to layer.

A layout run takes the first ``limit_samples`` samples that the layout changes,
and for the sample that decided a wrong/error/layout category it also runs that
sample contiguous: ``Result.contiguous`` then tells a failure the layout
introduces (``native``/``fallback`` there) from one it only inherits.
"""

import dataclasses
import itertools
import re

import torch
from torch.testing._internal.opinfo.core import BinaryUfuncInfo, SampleInput, UnaryUfuncInfo

import torchtpu
from torchtpu.tools._expected_file import entry_lines

# Worst first: a (op, dtype) takes the worst category of its samples.
SEVERITY = ("wrong", "error", "layout", "fallback", "native", "no_samples")

# OpInfos whose results are random or uninitialized memory (the tpu RNG is not
# CPU's): only dtype and shape are compared.
NONDETERMINISTIC = frozenset({
    "bernoulli", "cauchy", "empty", "empty_like", "empty_permuted", "empty_strided",
    "exponential", "geometric", "log_normal", "multinomial", "new_empty",
    "new_empty_strided", "nn.functional.alpha_dropout", "nn.functional.dropout",
    "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.feature_alpha_dropout", "nn.functional.rrelu", "normal",
    "rand_like", "randint", "randint_like", "randn", "randn_like", "uniform",
    "torch.empty", "torch._refs.empty", "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d",
})

# Positional arguments PyTorch requires on CPU whatever the input's device (the
# OpInfo builds them with torch.tensor(), on CPU, for every device).
CPU_ARGS = {"tensor_split": (0,)}


def _random_sample(op, sample):
    """True when this sample's result is random: a random OpInfo, or dropout."""
    return (full_name(op) in NONDETERMINISTIC or op.name in NONDETERMINISTIC
            or sample.kwargs.get("dropout_p", 0) > 0
            # multi_head_attention_forward(query, key, value, embed_dim, num_heads,
            # in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p, ...)
            or (op.name == "nn.functional.multi_head_attention_forward"
                and len(sample.args) > 9 and sample.args[9] > 0))


# Categories an expected-failures line may name.
# "host_rounding": float rounding whose sign depends on the host's own CPU
# kernels (e.g. sgemm's summation order differs between CPU models): the
# result may be "native" on one host and "wrong" on another; both pass.
EXPECTED_CATEGORIES = ("fallback", "wrong", "error", "layout", "crash", "host_rounding")


def accepts(listed, category):
    """Whether a result of ``category`` is what an entry listing ``listed`` expects."""
    return category == listed or (listed == "host_rounding" and category in ("native", "wrong"))


def read_expected(path):
    """``{(opinfo, label): (category, reason)}`` from an expected-failures file
    (``tests/opinfo_expected_failures.txt``): one ``<OpInfo> <label> <category>
    # <reason>`` per line, label a dtype name or ``float32_grad`` for gradients.

    Raises:
        ValueError: a line without the three fields, a known category or a reason.
    """
    expected = {}
    for number, fields, reason, raw in entry_lines(path):
        if len(fields) != 3 or fields[2] not in EXPECTED_CATEGORIES or not reason:
            raise ValueError(f"{path}:{number}: want 'opinfo dtype category  # reason' with "
                             f"category in {EXPECTED_CATEGORIES}, got {raw!r}")
        expected[(fields[0], fields[1])] = (fields[2], reason)
    return expected


@dataclasses.dataclass
class Result:
    """Outcome of one (OpInfo, dtype[, backward]) sweep.

    ``detail`` describes the first sample that decided a non-native category;
    ``fallbacks`` maps ``aten::op`` to CPU-fallback calls summed over samples;
    ``contiguous`` (layout runs only, else "") is that sample's category when
    run contiguous.
    """

    op: str
    dtype: str
    category: str
    samples: int = 0
    detail: str = ""
    fallbacks: dict = dataclasses.field(default_factory=dict)
    contiguous: str = ""


def full_name(op):
    """``name`` or ``name.variant`` of an OpInfo, unique within ``op_db``."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def dtype_from_name(name):
    """``"float32"`` -> ``torch.float32``; raises ValueError for unknown names."""
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


LAYOUTS = ("contiguous", "noncontiguous", "channels_last")

# How many samples a layout run looks through for ``limit_samples`` that the
# layout changes (e.g. the 4-D ones of an op whose first samples are 1-D).
_SCAN_SAMPLES = 64

# Convolutions, pools and norms by OpInfo name (not linalg.*norm, normal, renorm).
_STRIDED_KERNELS = re.compile(r"conv|pool|(batch|group|layer|instance|rms|local_response)_norm")


def checks_strides(op):
    """Whether a channels_last run compares ``op``'s output strides with CPU's:
    pointwise ops (unary and binary ufuncs) and convolutions, pools and norms,
    whose CPU kernels keep the input's memory format."""
    return isinstance(op, (UnaryUfuncInfo, BinaryUfuncInfo)) or bool(
        _STRIDED_KERNELS.search(full_name(op)))


def _sample_tensors(sample):
    return _flat_tensors([sample.input, *sample.args, *sample.kwargs.values()])


def apply_layout(sample, layout):
    """``sample`` (CPU) with its tensors in ``layout`` (one of ``LAYOUTS``), or
    None when the layout changes none of them (e.g. no 4-D floating tensor for
    channels_last, only 0-d and 1-element tensors for noncontiguous, or a
    sparse tensor that has no strides to change)."""
    if layout == "contiguous":
        return sample
    if layout == "noncontiguous":
        try:
            laid_out = sample.noncontiguous()
        except (RuntimeError, NotImplementedError):  # sparse: no is_contiguous()
            return None
        changed = any(t.layout == torch.strided and not t.is_contiguous()
                      for t in _sample_tensors(laid_out))
        return laid_out if changed else None
    if layout != "channels_last":
        raise ValueError(f"unknown layout {layout!r}, want one of {LAYOUTS}")
    converted = []

    def to_channels_last(t):
        if (not isinstance(t, torch.Tensor) or t.layout != torch.strided
                or not t.is_floating_point() or t.dim() not in (4, 5)):
            return t
        fmt = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
        # transform() runs this under no_grad: the copy is a new leaf.
        new = t.detach().to(memory_format=fmt).requires_grad_(t.requires_grad)
        if not new.is_contiguous():  # not when C == 1 or H * W == 1
            converted.append(new)
        return new

    laid_out = sample.transform(to_channels_last)
    return laid_out if converted else None


def _strides(x):
    """``(shape, strides)`` of the strided tensors among outputs ``x``, in
    ``_flat_tensors`` order (None for other layouts)."""
    return [(tuple(t.shape), t.stride() if t.layout == torch.strided else None)
            for t in _flat_tensors(x)]


def _stride_mismatch(actual, expected):
    """"output i: strides A vs CPU's B for shape S" for the first output whose
    strides differ from CPU's over its dimensions longer than 1 (the others'
    strides are arbitrary), or ""."""
    for i, ((shape, a), e) in enumerate(zip(actual, _flat_tensors(expected))):
        if a is None or e.layout != torch.strided or e.numel() == 0 or shape != tuple(e.shape):
            continue
        if [s for s, n in zip(a, shape) if n > 1] != [
            s for s, n in zip(e.stride(), shape) if n > 1
        ]:
            return f"output {i}: strides {a} vs CPU's {e.stride()} for shape {list(shape)}"
    return ""


def _storage_copy(x):
    """tpu copy of CPU tensor ``x`` with the same view geometry: a view or a
    non-contiguous tensor copies its whole storage and is rebuilt with
    ``as_strided``, so partial views (``as_strided`` reads outside the view)
    and overlapping strides reach the tpu kernels as they reach CPU's."""
    if x.layout != torch.strided or x.is_conj() or x.is_neg() or x.numel() == 0:
        return x.to("tpu")
    if x._base is None and x.is_contiguous() and x.storage_offset() == 0:
        return x.to("tpu")
    n = x.untyped_storage().nbytes() // x.element_size()
    flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (n,), (1,))
    return flat.to("tpu").as_strided(x.size(), x.stride(), x.storage_offset())


def to_tpu(x):
    """Copies a sample argument to tpu: tensors (leaf copies that keep
    ``requires_grad`` and strides), recursively inside lists, tuples and dicts;
    a cpu device (object or string) becomes tpu so factory functions and
    ``Tensor.to`` samples target tpu."""
    if isinstance(x, torch.Tensor):
        return _storage_copy(x.detach()).requires_grad_(x.requires_grad)
    if isinstance(x, torch.device) and x.type == "cpu":
        return torch.device("tpu")
    if isinstance(x, str) and x == "cpu":  # e.g. Tensor.to("cpu", ...) samples
        return "tpu"
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        moved = [to_tpu(v) for v in x]
        return type(x)(*moved) if hasattr(x, "_fields") else type(x)(moved)
    if isinstance(x, dict):
        return {k: to_tpu(v) for k, v in x.items()}
    return x


def to_cpu(x):
    """Copies tpu results back to CPU (recursively), detached; other values pass."""
    if isinstance(x, torch.Tensor):
        if x.device.type != "tpu" and x.numel() > 0:
            raise AssertionError(f"result on {x.device}, expected tpu")
        return x.detach().cpu()
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        moved = [to_cpu(v) for v in x]
        return type(x)(*moved) if hasattr(x, "_fields") else type(x)(moved)
    return x


def _compare(actual, expected, values=True):
    """Raises AssertionError when tpu ``actual`` (already on CPU) differs from
    ``expected``: values (default tolerances, NaN == NaN), dtype and shape."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise AssertionError(f"expected a tensor, got {type(actual).__name__}")
        if actual.dtype != expected.dtype or actual.shape != expected.shape:
            raise AssertionError(f"dtype/shape {actual.dtype}{list(actual.shape)} "
                                 f"vs CPU {expected.dtype}{list(expected.shape)}")
        if values:
            torch.testing.assert_close(actual, expected, equal_nan=True)
        return
    if isinstance(expected, (list, tuple)) and not isinstance(expected, torch.Size):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise AssertionError(f"structure {type(actual).__name__} vs {type(expected).__name__}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            try:
                _compare(a, e, values)
            except AssertionError as exc:
                raise AssertionError(f"output {i}: {exc}") from None
        return
    if values:
        torch.testing.assert_close(actual, expected, equal_nan=True)


def _move(op, sample, fn):
    """A copy of ``sample`` with ``fn`` applied to its arguments, except the
    ones PyTorch wants on CPU (``CPU_ARGS``)."""
    keep = CPU_ARGS.get(op.name, ())
    with torch.no_grad():
        args = tuple(a if i in keep else fn(a) for i, a in enumerate(sample.args))
        return SampleInput(fn(sample.input), args=args, kwargs=fn(sample.kwargs),
                           output_process_fn_grad=sample.output_process_fn_grad)


def _grads(op, sample, inputs):
    """Gradients of the sum of the op's floating outputs w.r.t. ``inputs``
    (after the sample's ``output_process_fn_grad``); None for unused inputs."""
    out = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
    outs = out if isinstance(out, (list, tuple)) else [out]
    outs = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    if not outs or not inputs:
        return None
    total = sum(o.sum() for o in outs)
    return torch.autograd.grad(total, inputs, allow_unused=True)


def _grad_inputs(sample):
    """Leaf tensors of a sample that require grad, in a fixed order."""
    flat = [sample.input, *sample.args, *sample.kwargs.values()]
    found = []
    for x in flat:
        xs = x if isinstance(x, (list, tuple)) else [x]
        found += [t for t in xs if isinstance(t, torch.Tensor) and t.requires_grad]
    return found


def _run_sample(op, sample, backward, check_strides=False):
    """Runs one sample on CPU and tpu. Returns (category, detail, fallbacks);
    ``check_strides`` makes matching values with other output strides than
    CPU's category ``layout``."""
    # Copied before the CPU run, which may mutate the sample (in-place OpInfos);
    # CPU runs the original so its strides (even overlapping ones) are kept.
    try:
        tpu_sample = _move(op, sample, to_tpu)
    except Exception as exc:  # noqa: BLE001 - e.g. sparse layouts
        return "error", f"copy to tpu: {type(exc).__name__}: {_first_line(exc)}", {}
    cpu_sample = sample
    compute = _grads if backward else None
    ref_sample = _float64_copy(op, sample)
    try:
        if backward:
            expected = compute(op, cpu_sample, _grad_inputs(cpu_sample))
        else:
            expected = op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
        cpu_exc = None
    except Exception as exc:  # noqa: BLE001 - any CPU exception is the reference
        expected, cpu_exc = None, exc

    # A delta, not metrics.reset(): the sweep leaves the process's counters alone.
    before = torchtpu.metrics.fallback_counts()
    try:
        if backward:
            actual = compute(op, tpu_sample, _grad_inputs(tpu_sample))
        else:
            actual = op(tpu_sample.input, *tpu_sample.args, **tpu_sample.kwargs)
        # Before to_cpu, whose copies need not keep the tpu tensors' strides.
        tpu_strides = _strides(actual) if check_strides else None
        actual = to_cpu(actual)
        torchtpu.sync()
        tpu_exc = None
    except Exception as exc:  # noqa: BLE001 - classified below
        actual, tpu_exc = None, exc
    fallbacks = {op: n - before.get(op, 0)
                 for op, n in torchtpu.metrics.fallback_counts().items() if n > before.get(op, 0)}

    if cpu_exc is not None:
        if tpu_exc is None:
            return "error", f"CPU raised {type(cpu_exc).__name__}, tpu did not", fallbacks
        if not isinstance(tpu_exc, type(cpu_exc)):
            return "error", (f"tpu raised {type(tpu_exc).__name__} ({_first_line(tpu_exc)}), "
                             f"CPU {type(cpu_exc).__name__}"), fallbacks
        return "cpu_raised", "", fallbacks
    if tpu_exc is not None:
        if isinstance(tpu_exc, AssertionError):  # result landed on the wrong device
            return "wrong", _first_line(tpu_exc), fallbacks
        return "error", f"{type(tpu_exc).__name__}: {_first_line(tpu_exc)}", fallbacks
    try:
        _compare(actual, expected, values=not _random_sample(op, sample))
    except AssertionError as exc:
        return "wrong", _summary(exc) + _float64_errors(op, ref_sample, actual, expected,
                                                        backward), fallbacks
    mismatch = _stride_mismatch(tpu_strides, expected) if check_strides else ""
    if mismatch:
        return "layout", mismatch, fallbacks
    return ("fallback" if fallbacks else "native"), "", fallbacks


def _float64_copy(op, sample):
    """The sample with floating tensors as float64 CPU copies (None when the
    sample has no floating tensor): the reference that tells a rounding
    difference from a wrong result."""
    found = []

    def widen(x):
        if isinstance(x, torch.Tensor):
            if x.is_floating_point() and x.dtype != torch.float64:
                found.append(x)
                return x.detach().to(torch.float64).requires_grad_(x.requires_grad)
            return x.detach().clone().requires_grad_(x.requires_grad)
        if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
            moved = [widen(v) for v in x]
            return type(x)(*moved) if hasattr(x, "_fields") else type(x)(moved)
        if isinstance(x, dict):
            return {k: widen(v) for k, v in x.items()}
        return x

    try:
        copy = _move(op, sample, widen)
    except Exception:  # noqa: BLE001 - no reference then
        return None
    return copy if found else None


def _flat_tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        return [t for v in x for t in _flat_tensors(v)]
    return []


def _float64_errors(op, ref_sample, actual, expected, backward):
    """" | vs float64: tpu err A, CPU err B" (largest absolute errors of the
    floating outputs against the op run in float64 on the same inputs), or ""
    when there is no such reference. tpu err <= CPU err marks a rounding
    difference in which tpu is the more accurate side."""
    if ref_sample is None or _random_sample(op, ref_sample):
        return ""
    try:
        if backward:
            ref = _grads(op, ref_sample, _grad_inputs(ref_sample))
        else:
            ref = op(ref_sample.input, *ref_sample.args, **ref_sample.kwargs)
    except Exception:  # noqa: BLE001 - some ops have no float64 kernel
        return ""
    triples = zip(_flat_tensors(actual), _flat_tensors(expected), _flat_tensors(ref))
    tpu_err = cpu_err = 0.0
    for a, e, r in triples:
        if not (e.is_floating_point() and r.is_floating_point()) or a.shape != r.shape:
            continue
        r = r.detach().double()
        finite = r.isfinite()
        tpu_err = max(tpu_err, (a.double() - r)[finite].abs().max().item() if finite.any() else 0)
        cpu_err = max(cpu_err, (e.double() - r)[finite].abs().max().item() if finite.any() else 0)
    return f" | vs float64: tpu err {tpu_err:.3g}, CPU err {cpu_err:.3g}"


def _first_line(exc):
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else ""


def _summary(exc):
    """The informative lines of an assert_close message, one line."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return " | ".join(lines[:4])[:500]


def describe_sample(sample):
    """Short text of a sample's shapes and arguments, for repro lines."""
    def fmt(x):
        if isinstance(x, torch.Tensor):
            if x.layout != torch.strided:
                return f"T{list(x.shape)} {x.layout}"
            strided = "" if x.is_contiguous() else f" stride={x.stride()}"
            return f"T{list(x.shape)}{strided}"
        if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
            return "[" + ", ".join(fmt(v) for v in x) + "]"
        return repr(x)
    parts = [fmt(sample.input)] + [fmt(a) for a in sample.args]
    parts += [f"{k}={fmt(v)}" for k, v in sample.kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def run_opinfo(op, dtype, limit_samples=8, backward=False, on_sample=None,
               layout="contiguous"):
    """Sweeps the first ``limit_samples`` sample inputs of OpInfo ``op`` for
    ``dtype`` (a torch.dtype) and returns a :class:`Result`.

    ``backward=True`` compares gradients instead of outputs (inputs get
    ``requires_grad=True``). ``layout`` (one of ``LAYOUTS``) lays the sample
    tensors out so; other than contiguous, the samples are the first
    ``limit_samples`` of ``_SCAN_SAMPLES`` that the layout changes.
    ``on_sample(index)`` is called before each sample so a supervising process
    can name the sample that crashed it.

    Raises:
        ValueError: an unknown ``layout``.
    """
    samples = op.sample_inputs("cpu", dtype, requires_grad=backward)
    return run_samples(op, dtype, samples, limit_samples, backward, on_sample, layout)


def run_samples(op, dtype, samples, limit_samples=8, backward=False, on_sample=None,
                layout="contiguous"):
    """:func:`run_opinfo` over ``samples`` (CPU SampleInputs of ``dtype``, e.g.
    made by hand where ``op_db`` has none of a shape a layout needs)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}, want one of {LAYOUTS}")
    name = full_name(op)
    result = Result(name, str(dtype).removeprefix("torch."), "no_samples")
    check_strides = layout == "channels_last" and not backward and checks_strides(op)
    scan = limit_samples if layout == "contiguous" else _SCAN_SAMPLES
    worst = SEVERITY.index("no_samples")
    taken = 0
    for index, sample in enumerate(itertools.islice(samples, scan)):
        if taken == limit_samples:
            break
        laid_out = apply_layout(sample, layout)
        if laid_out is None:
            continue
        taken += 1
        if on_sample is not None:
            on_sample(index)
        category, detail, fallbacks = _run_sample(op, laid_out, backward, check_strides)
        for key, count in fallbacks.items():
            result.fallbacks[key] = result.fallbacks.get(key, 0) + count
        if category == "cpu_raised":
            continue
        result.samples += 1
        rank = SEVERITY.index(category)
        if rank < worst:
            worst = rank
            if detail:
                result.detail = f"sample {index} {describe_sample(laid_out)}: {detail}"
            if layout != "contiguous" and category in ("wrong", "error", "layout"):
                # An in-place op may have mutated tensors the layout kept;
                # CPU and tpu still get the same (mutated) values.
                result.contiguous = _run_sample(op, sample, backward)[0]
    result.category = SEVERITY[worst]
    return result

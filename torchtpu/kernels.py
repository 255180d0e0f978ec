"""User kernels: JAX functions and StableHLO text as tpu ops (issue 13).

    @torchtpu.jax_kernel
    def rms_norm(x, w, eps):            # eps: a Python scalar, static
        v = jnp.mean(x * x, axis=-1, keepdims=True)
        return x * jax.lax.rsqrt(v + eps) * w

    y = rms_norm(x, w, 1e-6)            # x, w: tpu tensors; y: a tpu tensor

    clip = torchtpu.stablehlo_op(text)  # a module whose @main takes/returns tensors
    y = clip(x)

Both run as ONE op, ``torch.ops.torchtpu.kernel_call(kernel, tensors)``: the
kernel's StableHLO is inlined into our program as a private function and called
(csrc/aten/user_kernel.h). In strict and debug mode each call is its own cached
program; in fused mode and under ``torch.compile(backend="tpu")`` the call sits
inside the one fused program, and XLA inlines it and fuses across it. The op is
a ``torch.library`` custom op with a fake implementation, so Dynamo traces it
without a graph break, and with an autograd formula: a JAX kernel's backward is
the JAX VJP of the function, lowered the same way (itself a kernel, so double
backward works too); a StableHLO op's backward is the ``vjp`` op given to it.

JAX is optional: importing torchtpu never imports it; decorating a function
without JAX installed raises ImportError naming the package
(``pip install torchtpu[jax]``).
"""

import functools
import sys

import torch

from torchtpu import _C

_DTYPES = {
    "i1": torch.bool, "ui8": torch.uint8, "i8": torch.int8, "i16": torch.int16,
    "i32": torch.int32, "i64": torch.int64, "ui16": torch.uint16, "ui32": torch.uint32,
    "ui64": torch.uint64,
    "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
    "complex<f32>": torch.complex64, "complex<f64>": torch.complex128,
    "f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2,
    "f8E4M3FNUZ": torch.float8_e4m3fnuz, "f8E5M2FNUZ": torch.float8_e5m2fnuz,
    "f8E8M0FNU": torch.float8_e8m0fnu,
}

# kernel key (the op's string argument) -> _Spec; filled outside traced code.
_SPECS = {}


def _import_jax():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        raise ImportError(
            "torchtpu.jax_kernel needs the 'jax' package: pip install 'torchtpu[jax]' "
            "(or pip install jax)") from e
    return jax, jnp


def _types(pairs):
    return [(tuple(shape), _DTYPES[dtype]) for shape, dtype in pairs]


def _describe(tensors):
    return ", ".join(f"{t.dtype}{list(t.shape)}" for t in tensors) or "no tensors"


class _Spec:
    """One kernel identity: resolves argument tensors to a registered program."""

    name = "?"

    def resolve(self, tensors):
        """-> (handle for _C._kernel_run, [(shape, dtype)] of the results)."""
        raise NotImplementedError

    def backward(self, tensors, grads):
        """-> one gradient (or None) per input tensor."""
        raise NotImplementedError

    def register(self, key):
        _SPECS.setdefault(key, self)
        return key


def _spec(kernel):
    spec = _SPECS.get(kernel)
    if spec is None:
        raise RuntimeError(f"torchtpu: no kernel registered as {kernel!r}")
    return spec


# ---------------------------------------------------------------- the op

@torch.library.custom_op("torchtpu::kernel_call", mutates_args=())
def kernel_call(kernel: str, args: list[torch.Tensor]) -> list[torch.Tensor]:
    """Runs registered kernel ``kernel`` on tpu tensors ``args``; one new tensor
    per kernel result. Raises TypeError (a non-tpu tensor, a dtype the kernel
    does not take), ValueError (a shape it does not take), RuntimeError (the
    kernel could not be lowered or compiled), each naming the kernel."""
    spec = _spec(kernel)
    for i, t in enumerate(args):
        if t.device.type != "tpu":
            raise TypeError(f"kernel '{spec.name}': argument {i} must be a tpu tensor, "
                            f"got one on {t.device}")
    handle, _ = spec.resolve(args)
    return _C._kernel_run(handle, list(args))


@kernel_call.register_fake
def _kernel_call_fake(kernel, args):
    _, results = _spec(kernel).resolve(args)
    device = args[0].device if args else torch.device("tpu")
    return [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in results]


def _setup_context(ctx, inputs, output):
    kernel, args = inputs
    ctx.kernel = kernel
    ctx.out_meta = [(o.shape, o.dtype, o.device) for o in output]
    ctx.save_for_backward(*args)


def _backward(ctx, grads):
    grads = [torch.zeros(s, dtype=d, device=dev) if g is None else g
             for g, (s, d, dev) in zip(grads, ctx.out_meta)]
    return None, _spec(ctx.kernel).backward(list(ctx.saved_tensors), grads)


kernel_call.register_autograd(_backward, setup_context=_setup_context)


def _outputs(outs, single):
    return outs[0] if single else tuple(outs)


# ---------------------------------------------------------------- JAX kernels

class _JaxSpec(_Spec):
    """A JAX function of arrays only (statics already bound), lowered per
    argument signature (shapes and dtypes)."""

    def __init__(self, name, fn):
        self.name = name
        self.fn = fn
        self.lowered = {}   # ((shape, dtype), ...) -> (handle, results, treedef)
        self.single = None  # whether fn returns one array (set at the first lowering)
        self.vjps = {}      # (differentiable inputs, float outputs) -> key

    def resolve(self, tensors):
        # int() of a symbolic size (torch.compile with dynamic shapes)
        # specializes the graph on it: a kernel is lowered for static shapes.
        sig = tuple((tuple(int(d) for d in t.shape), t.dtype) for t in tensors)
        hit = self.lowered.get(sig)
        if hit is None:
            hit = self.lowered[sig] = self._lower(sig)
        return hit[0], hit[1]

    def _lower(self, sig):
        jax, jnp = _import_jax()
        desc = ", ".join(f"{d}{list(s)}" for s, d in sig) or "no tensors"
        try:
            structs = [jax.ShapeDtypeStruct(s, _jax_dtype(jnp, d)) for s, d in sig]
            lowered = jax.jit(self.fn, keep_unused=True).lower(*structs)
        except TypeError as e:
            raise TypeError(f"kernel '{self.name}': JAX rejected arguments ({desc}): {e}") from e
        except Exception as e:  # JAX's errors have many types (ConcretizationTypeError, ...)
            raise RuntimeError(f"kernel '{self.name}': JAX could not lower it for arguments "
                               f"({desc}); output shapes must not depend on values: "
                               f"{type(e).__name__}: {e}") from e
        leaves, treedef = jax.tree_util.tree_flatten(lowered.out_info)
        single = treedef.num_leaves == 1 and treedef == jax.tree_util.tree_structure(0)
        if not single and treedef != jax.tree_util.tree_structure(tuple(range(len(leaves)))) \
                and treedef != jax.tree_util.tree_structure(list(range(len(leaves)))):
            raise TypeError(f"kernel '{self.name}' must return an array or a tuple/list of "
                            f"arrays, returned {treedef}")
        if not leaves:
            raise TypeError(f"kernel '{self.name}' returns no arrays")
        handle, params, results = _C._kernel_register(self.name, lowered.as_text())
        for i, ((s, d), (ps, pd)) in enumerate(zip(sig, _types(params))):
            if d != pd or tuple(s) != ps:
                raise TypeError(
                    f"kernel '{self.name}': JAX lowered argument {i} ({d}{list(s)}) as "
                    f"{pd}{list(ps)}; 64-bit types need jax.config.update('jax_enable_x64', True)")
        self.single = single
        return handle, _types(results), treedef

    def backward(self, tensors, grads):
        diff = tuple(i for i, t in enumerate(tensors) if t.is_floating_point() or t.is_complex())
        if not diff:
            return [None] * len(tensors)
        fouts = tuple(i for i, g in enumerate(grads) if g.is_floating_point() or g.is_complex())
        key = self.vjps.get((diff, fouts))
        if key is None:
            key = _JaxSpec(
                self.name + ".vjp", self._vjp_fn(diff, fouts, len(tensors), len(grads))
            ).register(f"{self.name}.vjp#{id(self)}/{diff}/{fouts}")
            self.vjps[(diff, fouts)] = key
        got = torch.ops.torchtpu.kernel_call(key, list(tensors) + [grads[i] for i in fouts])
        out = [None] * len(tensors)
        for i, g in zip(diff, got):
            out[i] = g
        return out

    def _vjp_fn(self, diff, fouts, n_in, n_out):
        """(primals..., cotangents of the float outputs...) -> the gradients of
        the `diff` inputs, by jax.vjp of self.fn."""
        fn = self.fn

        def vjp(*arrays):
            import numpy as np

            jax, _ = _import_jax()
            primals, cts = list(arrays[:n_in]), arrays[n_in:]

            def f(*d):
                full = list(primals)
                for i, v in zip(diff, d):
                    full[i] = v
                return fn(*full)

            out, pullback = jax.vjp(f, *[primals[i] for i in diff])
            leaves, treedef = jax.tree_util.tree_flatten(out)
            ct = [np.zeros(x.shape, jax.dtypes.float0) for x in leaves]
            for i, c in zip(fouts, cts):
                ct[i] = c
            return tuple(pullback(jax.tree_util.tree_unflatten(treedef, ct)))

        return vjp


def _jax_dtype(jnp, dtype):
    names = {torch.bool: "bool_", torch.bfloat16: "bfloat16"}
    name = names.get(dtype, str(dtype).replace("torch.", ""))
    if not hasattr(jnp, name):
        raise TypeError(f"dtype {dtype} has no JAX equivalent")
    return getattr(jnp, name)


_JAX_KERNELS = {}  # id -> JaxKernel


def _check_static(name, where, value):
    """Raises TypeError for a static argument the kernel key cannot tell
    apart by value: the key holds repr(value), and an array's repr elides its
    middle (two different arrays would share one lowered kernel)."""
    if isinstance(value, (tuple, list)):
        for v in value:
            _check_static(name, where, v)
    elif isinstance(value, dict):
        for v in value.values():
            _check_static(name, where, v)
    elif isinstance(value, torch.Tensor) or (
            hasattr(value, "shape") and getattr(value, "ndim", 0) > 0
            and type(value).__module__.split(".")[0] in ("numpy", "jax", "jaxlib")):
        what = f"argument {where}" if isinstance(where, int) else f"keyword argument {where!r}"
        raise TypeError(f"kernel '{name}': {what} is or holds an array "
                        f"({type(value).__name__}), which cannot be a static value; pass "
                        "arrays as tensor arguments of their own")


def _jax_call_key(kernel_id: int, statics: tuple) -> str:
    """The op key of a JaxKernel called with these static arguments. Dynamo
    calls it while tracing and keeps the string, so a compiled graph holds only
    the custom op."""
    kernel = _JAX_KERNELS[kernel_id]
    for where, value in statics:
        _check_static(kernel.name, where, value)
    key = f"{kernel.name}#{kernel_id}{statics!r}"
    if key not in _SPECS:
        _JaxSpec(kernel.name, kernel.bind(statics)).register(key)
    return key


def _single_output(key: str) -> bool:
    return _SPECS[key].single is not False


def _mark_constant_results():
    """Marks the two key functions as constant for Dynamo (it calls them while
    tracing and keeps their results). Done when the first JaxKernel is made,
    not at import: the marker imports torch._dynamo, and `import torchtpu`
    keeps torch light."""
    global _jax_call_key, _single_output
    if not getattr(_jax_call_key, "_ttpu_marked", False):
        _jax_call_key = torch.compiler.assume_constant_result(_jax_call_key)
        _single_output = torch.compiler.assume_constant_result(_single_output)
        _jax_call_key._ttpu_marked = True


def _concrete(value):
    """A number static argument as a plain Python value. Under torch.compile
    an int or float passed into the compiled function arrives symbolic (Dynamo
    makes a changing int, and any float, a graph input), and a static argument
    must be a constant. Dynamo specializes a symbolic number used as a dict
    key (guarding the graph on its value), so the round trip through a dict
    makes it one; in plain Python it returns the value unchanged."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        from torch.fx.experimental.symbolic_shapes import guard_scalar
        return guard_scalar(value)
    if isinstance(value, (bool, int, float)):
        return next(iter({value: None}))
    if isinstance(value, (tuple, list)):  # e.g. axes=(0, 2): each int may be symbolic
        return type(value)(_concrete(v) for v in value)
    return value


class JaxKernel:
    """A JAX function callable on tpu tensors (see :func:`jax_kernel`)."""

    def __init__(self, fn, name):
        _mark_constant_results()
        self.fn = fn
        self.name = name
        self.id = len(_JAX_KERNELS)
        _JAX_KERNELS[self.id] = self
        # Not functools.update_wrapper: a __wrapped__ would invite tools (and
        # Dynamo) to look through to the JAX function.
        self.__name__ = getattr(fn, "__name__", name)
        self.__doc__ = fn.__doc__
        self.__module__ = getattr(fn, "__module__", None)
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)

    def __reduce__(self):
        # A decorated module-level function pickles by reference, as functions
        # do (the id and lowerings are per process); otherwise by value: the
        # JAX function (by reference) and the name, lowered again on use.
        found = sys.modules.get(self.__module__)
        for part in self.__qualname__.split("."):
            found = getattr(found, part, None)
        if found is self:
            return self.__qualname__
        return JaxKernel, (self.fn, self.name)

    def bind(self, statics):
        """fn with its static arguments bound: a function of the tensors only
        (the positional tensors in order, then the keyword tensors, whose
        names are the statics entries keyed by a ("tensor", name) tuple)."""
        positional = {k: v for k, v in statics if isinstance(k, int)}
        keywords = {k: v for k, v in statics if isinstance(k, str)}
        tensor_kw = [k[1] for k, _ in statics if isinstance(k, tuple)]
        fn = self.fn

        def bound(*arrays):
            n_pos = len(arrays) - len(tensor_kw)
            rest = iter(arrays[:n_pos])
            n = n_pos + len(positional)
            kw = dict(keywords, **dict(zip(tensor_kw, arrays[n_pos:])))
            return fn(*[positional[i] if i in positional else next(rest) for i in range(n)], **kw)

        return bound

    def __call__(self, *args, **kwargs):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        statics = tuple((i, _concrete(a)) for i, a in enumerate(args)
                        if not isinstance(a, torch.Tensor))
        for k in sorted(kwargs):
            v = kwargs[k]
            if isinstance(v, torch.Tensor):
                # A tensor keyword argument is an input like a positional one;
                # only its name is part of the kernel's identity.
                tensors.append(v)
                statics += ((("tensor", k), None),)
            else:
                statics += ((k, _concrete(v)),)
        key = _jax_call_key(self.id, statics)
        outs = torch.ops.torchtpu.kernel_call(key, tensors)
        return _outputs(outs, _single_output(key))


def jax_kernel(fn=None, *, name=None):
    """Decorates a JAX function so it runs on tpu tensors as one tpu op.

    Call the result with tpu tensors (any dtype JAX has, any shape, any strides)
    and Python scalars/strings/tuples (static: part of the kernel, a new value
    lowers a new program), positionally or by keyword (a tensor given by keyword
    is an input like a positional one). Returns a tpu tensor
    per array the function returns (one tensor, or a tuple). The function is
    lowered with ``jax.jit(fn, keep_unused=True).lower(...)`` once per argument
    signature; gradients flow through ``jax.vjp`` of the function, with respect
    to the floating-point tensor arguments.

    Raises:
        ImportError: JAX is not installed (at decoration).
        TypeError: an argument is not on tpu, JAX rejects a dtype, or a 64-bit
            dtype while ``jax_enable_x64`` is off (at the call).
        RuntimeError: JAX cannot lower the function, e.g. an output shape that
            depends on values (at the call), naming the kernel.
    """
    if fn is None:
        return functools.partial(jax_kernel, name=name)
    _import_jax()
    return JaxKernel(fn, name or getattr(fn, "__qualname__", "jax_kernel"))


# ---------------------------------------------------------------- StableHLO ops

class _StableHloSpec(_Spec):
    def __init__(self, name, handle, params, results, vjp):
        self.name, self.handle, self.params, self.results, self.vjp = \
            name, handle, params, results, vjp

    def resolve(self, tensors):
        return self.handle, self.results

    def backward(self, tensors, grads):
        if self.vjp is None:
            raise RuntimeError(f"kernel '{self.name}' (stablehlo_op) has no gradient: pass "
                               "vjp=stablehlo_op(...) taking (inputs..., output grads...)")
        got = self.vjp(*tensors, *grads)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        if len(got) != len(tensors):
            raise RuntimeError(f"kernel '{self.name}': its vjp returned {len(got)} gradients "
                               f"for {len(tensors)} inputs")
        return got


class StableHloOp:
    """A StableHLO module callable on tpu tensors (see :func:`stablehlo_op`)."""

    def __init__(self, text, out_types, name, vjp):
        if not isinstance(text, str):
            text = str(text)  # an MLIR module object prints as its text
        self.name = name
        self._args = (text, out_types, name, vjp)  # for pickling: registered again on load
        handle, params, results = _C._kernel_register(name, text)
        self.params, self.results = _types(params), _types(results)
        if out_types is not None:
            single = len(out_types) == 2 and isinstance(out_types[1], torch.dtype)
            want = [out_types] if single else list(out_types)
            want = [(tuple(s), d) for s, d in want]
            if want != self.results:
                raise ValueError(f"kernel '{name}': out_types {want} differ from the module's "
                                 f"results {self.results}")
        self.key = _StableHloSpec(name, handle, self.params, self.results, vjp) \
            .register(f"stablehlo:{name}:{handle}")

    def __reduce__(self):
        return StableHloOp, self._args

    def __call__(self, *tensors):
        outs = torch.ops.torchtpu.kernel_call(self.key, list(tensors))
        return _outputs(outs, len(self.results) == 1)


def stablehlo_op(text, out_types=None, *, name="stablehlo_op", vjp=None):
    """Hand-written StableHLO as a tpu op.

    Args:
        text: an MLIR module (``module { func.func public @main(...) ... }``;
            private helper functions allowed; generic or pretty syntax) or an
            object whose ``str()`` is one. Static shapes only.
        out_types: optional, checked against the module's results: one
            ``(shape, torch.dtype)`` pair or a list of them.
        name: named in every error message.
        vjp: optional op (another ``stablehlo_op``) taking (inputs..., output
            gradients...) and returning one gradient per input: the backward.

    The text is parsed and compiled here, once. Calling the op with tpu tensors
    of exactly @main's argument types returns one tensor (one result) or a
    tuple.

    Raises:
        RuntimeError: the text does not parse or the plugin rejects it (here,
            naming ``name``).
        ValueError: out_types differ from the module's results.
        TypeError / ValueError: at a call, an argument of another device, dtype
            or shape.
    """
    return StableHloOp(text, out_types, name, vjp)

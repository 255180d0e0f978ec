"""The op table and input generator of :mod:`torchtpu.tools.fuzz`.

A program is a function of one integer seed: ``random.Random(seed)`` draws the
inputs (shape, dtype, view) and then, step by step, an op and its arguments.
The draws depend only on the shapes and dtypes of the values seen so far, so the
CPU run and the tpu run draw the same program as long as they agree (the runner
stops at the first disagreement).
"""
import math

import torch

DTYPES = [torch.float32, torch.float32, torch.float64, torch.bfloat16, torch.int64,
          torch.int32, torch.uint8, torch.bool]
FLOATS = (torch.float32, torch.float64, torch.bfloat16)
SIZES = [1, 1, 2, 3, 3, 4, 5, 0]
VIEWS = ["plain", "plain", "transpose", "slice", "expand", "permute"]


def _shape(rng):
    return [rng.choice(SIZES) for _ in range(rng.choice([0, 1, 1, 2, 2, 2, 3]))]


def _values(gen, shape, dtype, rng):
    """A CPU tensor of ``shape``: floats ~N(0, 2) with some NaN/Inf/0 mixed in,
    integers in [-5, 5] ([0, 9] for uint8), random bools."""
    if dtype.is_floating_point:
        t = torch.randn(shape, generator=gen, dtype=torch.float64) * 2
        if t.numel() and rng.random() < 0.2:
            flat = t.view(-1)
            flat[rng.randrange(flat.numel())] = rng.choice([math.nan, math.inf, -math.inf, 0.0])
        return t.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    low, high = (0, 10) if dtype == torch.uint8 else (-5, 6)
    return torch.randint(low, high, shape, generator=gen).to(dtype)


def make_input(rng, gen, shape, dtype):
    """(CPU base tensor, view function, view name): the view of the base has
    ``shape``; the same function applied to the tpu copy of the base gives the
    same view there."""
    view = rng.choice(VIEWS)
    n = len(shape)
    if view == "transpose" and n >= 2:
        base_shape = shape[:-2] + [shape[-1], shape[-2]]
        return _values(gen, base_shape, dtype, rng), lambda t: t.transpose(-1, -2), view
    if view == "permute" and n >= 2:
        perm = list(range(n))
        rng.shuffle(perm)
        # base.permute(perm) has shape[i] == base_shape[perm[i]]
        base_shape = [0] * n
        for i in range(n):
            base_shape[perm[i]] = shape[i]
        return _values(gen, base_shape, dtype, rng), lambda t: t.permute(perm), view
    if view == "slice" and n >= 1:
        d = rng.randrange(n)
        base_shape = list(shape)
        base_shape[d] = 2 * shape[d] + 1
        idx = tuple([slice(None)] * d + [slice(1, None, 2)])
        return _values(gen, base_shape, dtype, rng), lambda t: t[idx][:shape[d]] if d == 0 \
            else t[idx], view
    if view == "expand" and n >= 1:
        base_shape = [1 if rng.random() < 0.5 else s for s in shape]
        return _values(gen, base_shape, dtype, rng), lambda t: t.expand(shape), view
    return _values(gen, shape, dtype, rng), lambda t: t, "plain"


def broadcast_shape(rng, shape):
    """A shape that broadcasts with ``shape`` (dims set to 1, leading dims dropped)."""
    out = [1 if rng.random() < 0.3 else s for s in shape]
    if out and rng.random() < 0.3:
        out = out[1:]
    return out


def _dim(rng, x):
    return rng.randrange(-x.dim(), x.dim()) if x.dim() else rng.choice([0, -1])


def _scalar(rng, x):
    if x.dtype.is_floating_point or rng.random() < 0.3:
        return rng.choice([0.5, -1.5, 2.0, 0.0, 3.0])
    return rng.choice([0, 1, 2, -3, 7, True])


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log,
    "sqrt": torch.sqrt, "sin": torch.sin, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "floor": torch.floor, "round": torch.round, "sign": torch.sign,
    "reciprocal": torch.reciprocal, "bitwise_not": torch.bitwise_not,
    "logical_not": torch.logical_not, "relu": torch.relu, "square": torch.square,
    "nan_to_num": torch.nan_to_num, "isnan": torch.isnan, "trunc": torch.trunc,
    "expm1": torch.expm1, "rsqrt": torch.rsqrt, "erf": torch.erf,
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "floor_divide": torch.floor_divide, "remainder": torch.remainder, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2,
    "bitwise_and": torch.bitwise_and, "eq": torch.eq, "lt": torch.lt, "ge": torch.ge,
    "ne": torch.ne, "logical_and": torch.logical_and, "fmod": torch.fmod,
}
ELEMENTWISE = set(UNARY) | {f"{k}.{s}" for k in BINARY for s in ("t", "s")} | {
    "clamp", "where", "add_alpha", "div_floor", "to", "add_", "mul_", "clamp_", "neg_",
    "masked_fill_"}


def draw_op(rng, x):
    """(name, fn(x, y) -> result) for the next step on value ``x`` (a tensor) with
    the program's second input ``y``; the arguments are drawn here."""
    kind = rng.random()
    if kind < 0.25:
        name = rng.choice(sorted(UNARY))
        return name, UNARY[name]
    if kind < 0.5:
        name = rng.choice(sorted(BINARY))
        if rng.random() < 0.6:
            return name + ".t", lambda a, b: BINARY[name](a, b)
        s = _scalar(rng, x)
        return name + ".s", lambda a, b: BINARY[name](a, s)
    return rng.choice(_OTHER)(rng, x)


def _reduce(rng, x):
    name = rng.choice(["sum", "mean", "prod", "amax", "amin", "argmax", "std", "var",
                       "any", "all", "logsumexp", "max.dim", "norm"])
    keep = rng.random() < 0.5
    d = _dim(rng, x) if rng.random() < 0.7 else None
    def fn(a, b):
        if name == "max.dim":
            return torch.max(a, d if d is not None else 0, keep)
        if d is None and name not in ("logsumexp",):
            return getattr(torch, name)(a)
        return getattr(torch, name)(a, d if d is not None else 0, keepdim=keep)
    return name, fn


def _clamp(rng, x):
    lo, hi = rng.choice([(-1, 1), (0, None), (None, 2), (1, -1)])
    return "clamp", lambda a, b: torch.clamp(a, lo, hi)


def _where(rng, x):
    return "where", lambda a, b: torch.where(a > 0, a, b)


def _cum(rng, x):
    name, d = rng.choice(["cumsum", "cumprod"]), _dim(rng, x)
    return name, lambda a, b: getattr(torch, name)(a, d)


def _softmax(rng, x):
    name, d = rng.choice(["softmax", "log_softmax"]), _dim(rng, x)
    return name, lambda a, b: getattr(torch, name)(a, d)


def _sort(rng, x):
    d, desc = _dim(rng, x), rng.random() < 0.5
    name = rng.choice(["sort", "argsort", "topk"])
    if name == "topk":
        k = rng.choice([0, 1, 2])
        # topk's indices among equal values are unspecified: compare the values only
        return "topk", lambda a, b: torch.topk(a, k, d, largest=not desc).values
    if name == "argsort":
        return name, lambda a, b: torch.argsort(a, dim=d, descending=desc, stable=True)
    return name, lambda a, b: torch.sort(a, dim=d, descending=desc, stable=True)


def _index(rng, x):
    d = _dim(rng, x)
    n = x.shape[d] if x.dim() else 1
    # one index in ten may be out of range (negative past -n)
    low = -n - 1 if rng.random() < 0.1 else 0
    idx = [rng.randrange(low, max(n, 1)) for _ in range(rng.choice([0, 1, 3]))]
    name = rng.choice(["index_select", "getitem", "gather", "narrow"])
    if name == "index_select":
        return name, lambda a, b: torch.index_select(
            a, d, torch.tensor(idx, dtype=torch.long, device=a.device))
    if name == "getitem":
        return name, lambda a, b: a[torch.tensor(idx, dtype=torch.long, device=a.device)]
    if name == "narrow":
        start = rng.randrange(0, max(n, 1))
        return name, lambda a, b: a.narrow(d, start, min(1, n - start))
    def gather(a, b):
        shape = list(a.shape) or []
        i = torch.tensor(idx[:1] or [0], dtype=torch.long, device=a.device)
        if not shape:
            return torch.gather(a, d, i.reshape(()))
        i = i.reshape([1] * len(shape)).expand([min(s, 1) for s in shape])
        return torch.gather(a, d, i.contiguous())
    return name, gather


def _join(rng, x):
    name, d = rng.choice(["cat", "stack"]), _dim(rng, x)
    return name, lambda a, b: getattr(torch, name)([a, a * 2], d)


def _matmul(rng, x):
    return "matmul", lambda a, b: torch.matmul(a, a.transpose(-1, -2) if a.dim() >= 2 else a)


def _shape_op(rng, x):
    name = rng.choice(["flip", "roll", "t_contig", "reshape", "unsqueeze", "squeeze",
                       "masked_select"])
    d = _dim(rng, x)
    fns = {
        "flip": lambda a, b: torch.flip(a, [d]),
        "roll": lambda a, b: torch.roll(a, 1, d),
        "t_contig": lambda a, b: a.mT.contiguous() if a.dim() >= 2 else a.contiguous(),
        "reshape": lambda a, b: a.reshape(-1),
        "unsqueeze": lambda a, b: a.unsqueeze(0),
        "squeeze": lambda a, b: a.squeeze(),
        "masked_select": lambda a, b: torch.masked_select(a, a != 0),
    }
    return name, fns[name]


def _cast(rng, x):
    dt = rng.choice(DTYPES)
    return "to", lambda a, b: a.to(dt)


def _misc(rng, x):
    name = rng.choice(["add_alpha", "div_floor"])
    if name == "add_alpha":
        alpha = rng.choice([2, 0.5])
        return name, lambda a, b: torch.add(a, b, alpha=alpha)
    return name, lambda a, b: torch.div(a, b, rounding_mode="floor")


def _inplace(rng, x):
    """An in-place op on the value itself (an input view: expanded inputs overlap,
    so CPU refuses some writes) with the second input or a scalar."""
    name = rng.choice(["add_", "mul_", "clamp_", "neg_", "masked_fill_", "copy_"])
    s = _scalar(rng, x)
    fns = {
        "add_": lambda a, b: a.add_(b),
        "mul_": lambda a, b: a.mul_(s),
        "clamp_": lambda a, b: a.clamp_(min=0),
        "neg_": lambda a, b: a.neg_(),
        "masked_fill_": lambda a, b: a.masked_fill_(a != 0, s),
        "copy_": lambda a, b: a.copy_(b),
    }
    return name, fns[name]


def _select(rng, x):
    name, d = rng.choice(["kthvalue", "nonzero", "argwhere", "median"]), _dim(rng, x)
    k = rng.choice([1, 2])
    fns = {
        "kthvalue": lambda a, b: torch.kthvalue(a, k, d).values,
        "nonzero": lambda a, b: torch.nonzero(a),
        "argwhere": lambda a, b: torch.argwhere(a),
        "median": lambda a, b: torch.median(a),
    }
    return name, fns[name]


_OTHER = [_inplace, _select, _reduce, _reduce, _clamp, _where, _cum, _softmax, _sort, _index,
          _index, _join,
          _matmul, _shape_op, _shape_op, _cast, _misc]


def draw_inputs(rng, seed):
    """((cpu_x, view_x, name_x), (cpu_y, view_y, name_y)): the program's two inputs,
    ``y`` broadcasting against ``x`` and of the same or a random dtype."""
    gen = torch.Generator().manual_seed(seed)
    shape, dtype = _shape(rng), rng.choice(DTYPES)
    x = make_input(rng, gen, shape, dtype)
    ydtype = dtype if rng.random() < 0.6 else rng.choice(DTYPES)
    y = make_input(rng, gen, broadcast_shape(rng, shape), ydtype)
    return x, y

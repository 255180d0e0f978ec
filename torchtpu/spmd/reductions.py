"""Max/min reductions that XLA's SPMD partitioner can split over a sharded dim.

torchtpu emits float max/min reductions with a NaN-propagating reducer,
``select(isnan(b), b, select(isnan(a), a, max(a, b)))`` (csrc/stablehlo,
emit_regions.cc): the CPU plugin's plain ``maximum`` drops NaN. XLA's SPMD
partitioner splits a reduction over a sharded dim only when its reducer is a
plain ``maximum``/``minimum``/``add`` ("Unsupported reduction computation"
otherwise), and the cross-device combine of a max all-reduce drops NaN on the
CPU plugin whatever the reducer. So in a program compiled for a mesh each such
reduction becomes a plain max/min reduction plus a sum of the NaN count over
the same dims, and the result is NaN where that count is positive: the same
values (PyTorch's ``amax`` of a row holding NaN is NaN), two reductions the
partitioner splits.
"""

import re

# One single-operand reduce whose region is the NaN-propagating max/min:
# groups: result, operand, init, combining op, the region's last select,
# dimensions, operand type, init type, result type.
_REDUCE = re.compile(
    r'(?P<res>%\w+) = "stablehlo\.reduce"\((?P<x>%\w+), (?P<init>%\w+)\) \(\{\n'
    r'\s+\^bb0\((?P<a>%\w+): [^,]+, (?P<b>%\w+): [^)]+\):\n'
    r'\s+(?P<m>%\w+) = "stablehlo\.(?P<op>maximum|minimum)"\((?P=a), (?P=b)\)[^\n]*\n'
    r'\s+%\w+ = "stablehlo\.compare"\((?P=a), (?P=a)\)[^\n]*\n'
    r'\s+%\w+ = "stablehlo\.compare"\((?P=b), (?P=b)\)[^\n]*\n'
    r'\s+%\w+ = "stablehlo\.select"[^\n]*\n'
    r'\s+(?P<last>%\w+) = "stablehlo\.select"[^\n]*\n'
    r'\s+"stablehlo\.return"\((?P=last)\)[^\n]*\n'
    r'(?P<close>\s+\}\) \{dimensions = (?P<dims>array<i64[^>]*>)\} : '
    r'\((?P<xt>tensor<[^>]*>), (?P<it>tensor<[^>]*>)\) -> (?P<rt>tensor<[^>]*>))')


def float_compare(direction):
    """The attributes of a float ``stablehlo.compare`` (generic syntax)."""
    return ("{comparison_direction = #stablehlo<comparison_direction " + direction
            + ">, compare_type = #stablehlo<comparison_type FLOAT>}")


def _bool_type(tensor_type):
    """``tensor<8x16xf32>`` -> ``tensor<8x16xi1>`` (same shape, i1)."""
    head = tensor_type[len("tensor<"):-1]
    dims = head.rsplit("x", 1)[0] + "x" if "x" in head and head[0].isdigit() else ""
    return f"tensor<{dims}i1>"


def _f32_type(tensor_type):
    return _bool_type(tensor_type)[:-3] + "f32>"


def _rewrite(m):
    r, x, rt, xt = m["res"], m["x"], m["rt"], m["xt"]
    n = "nanred_" + r.lstrip("%")  # (a numeric SSA name takes no suffix)
    plain = m.group(0).replace(f"{r} = ", f"%{n}_v = ", 1)
    plain = plain.replace(f'"stablehlo.return"({m["last"]})', f'"stablehlo.return"({m["m"]})')
    fb, ff = _bool_type(xt), _f32_type(xt)
    rb, rf = _bool_type(rt), _f32_type(rt)
    indent = "\n    "
    return indent.join([
        plain,
        f'%{n}_isnan = "stablehlo.compare"({x}, {x}) {float_compare("NE")} : ({xt}, {xt}) -> {fb}',
        f'%{n}_ones = "stablehlo.convert"(%{n}_isnan) : ({fb}) -> {ff}',
        f'%{n}_zero = "stablehlo.constant"() {{value = dense<0.0> : tensor<f32>}} : () -> '
        'tensor<f32>',
        f'%{n}_count = "stablehlo.reduce"(%{n}_ones, %{n}_zero) ({{',
        f'  ^bb0(%{n}_p: tensor<f32>, %{n}_q: tensor<f32>):',
        f'    %{n}_s = "stablehlo.add"(%{n}_p, %{n}_q) : (tensor<f32>, tensor<f32>) -> '
        'tensor<f32>',
        f'    "stablehlo.return"(%{n}_s) : (tensor<f32>) -> ()',
        f'  }}) {{dimensions = {m["dims"]}}} : ({ff}, tensor<f32>) -> {rf}',
        f'%{n}_none = "stablehlo.constant"() {{value = dense<0.0> : {rf}}} : () -> {rf}',
        f'%{n}_has = "stablehlo.compare"(%{n}_count, %{n}_none) {float_compare("GT")} : '
        f'({rf}, {rf}) -> {rb}',
        f'%{n}_z = "stablehlo.subtract"(%{n}_v, %{n}_v) : ({rt}, {rt}) -> {rt}',
        f'%{n}_nan = "stablehlo.divide"(%{n}_z, %{n}_z) : ({rt}, {rt}) -> {rt}',
        f'{r} = "stablehlo.select"(%{n}_has, %{n}_nan, %{n}_v) : ({rb}, {rt}, {rt}) -> {rt}',
    ])


def partitionable(text):
    """``text`` with each NaN-propagating max/min reduce written as a plain
    one plus a NaN count (see the module docstring)."""
    return _REDUCE.sub(_rewrite, text)

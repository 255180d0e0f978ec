"""Differential fuzzing: random small op programs on tpu and on CPU PyTorch.

``python -m torchtpu.tools.fuzz --programs N --seed S [--json F] [--mode strict|fused]
[--jobs J] [--expected FILE]`` draws N programs (program i from seed ``S * 1_000_003 + i``,
so the same seed gives the same programs), runs each in a worker subprocess on
both devices step by step, and prints a table by category and by op.

A program is two inputs (random shape with 0-dim, size-0, size-1 and broadcasting
cases; random dtype; plain, transposed, step-sliced, expanded or permuted view)
and 1-4 ops drawn from :mod:`torchtpu.tools._fuzz_ops`. After every step the
results are compared: exception type (both raising the same type is a match and
ends the program), dtype, shape, values (NaN positions equal; float32 rtol 1e-4
atol 1e-5, float64 1e-7, bfloat16 rtol 1.6e-2 atol 1e-2, integers and bools
exact) and, for elementwise ops, strides. The first disagreement is the
program's category, attributed to that step's op. When values agree within
tolerance but not exactly, the tpu side continues from the CPU values (same
strides) so rounding is not amplified by later steps.

Categories: match, value, dtype, shape, stride, exception, crash (the worker
died: it is restarted after that program), hang (no result within
``--timeout`` seconds: the worker is killed and restarted).

Mismatches listed in the expected file (default: the source tree's
``tests/fuzz_expected_mismatches.txt``; lines ``<op-glob> <category>
<dtype-glob>  # <reason>``) are "explained"; the rest are "unexplained".
"""
import argparse
import fnmatch
import json
import os
import queue
import subprocess
import sys
import threading
import time
from torchtpu.tools._expected_file import entry_lines

CATEGORIES = ["match", "value", "dtype", "shape", "stride", "exception", "crash", "hang"]
_DEFAULT_EXPECTED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tests", "fuzz_expected_mismatches.txt")


def program_seed(seed, i):
    return seed * 1_000_003 + i


# ---------------------------------------------------------------- worker side

_TOL = {"float32": (1e-4, 1e-5), "float64": (1e-7, 1e-7), "bfloat16": (1.6e-2, 1e-2)}


def _compare(c, t, elementwise):
    """(category, detail) of tpu result ``t`` against CPU result ``c`` (tensors)."""
    import torch
    if c.dtype != t.dtype:
        return "dtype", f"cpu {c.dtype} tpu {t.dtype}"
    if c.shape != t.shape:
        return "shape", f"cpu {tuple(c.shape)} tpu {tuple(t.shape)}"
    tc = t.cpu()
    if c.dtype.is_floating_point:
        rtol, atol = _TOL[str(c.dtype).split(".")[1]]
        ok = torch.isclose(tc.double(), c.double(), rtol=rtol, atol=atol, equal_nan=True)
        if not bool(ok.all()):
            bad = (~ok).nonzero()[0].tolist()
            return "value", f"at {bad}: cpu {c[tuple(bad)].item()} tpu {tc[tuple(bad)].item()}"
    elif not torch.equal(tc, c):
        bad = (tc != c).nonzero()[0].tolist()
        return "value", f"at {bad}: cpu {c[tuple(bad)].item()} tpu {tc[tuple(bad)].item()}"
    # a size-1 dim's stride is arbitrary in PyTorch: compare the others only
    if elementwise and c.numel() > 1 and any(
            n > 1 and a != b for n, a, b in zip(c.shape, c.stride(), t.stride())):
        return "stride", f"cpu {c.stride()} tpu {t.stride()}"
    return "match", ""


def _resync(c, t):
    """The tpu value to continue from: ``t`` if equal to ``c``, else ``c`` copied
    to tpu with ``c``'s strides (where they are dense), so later steps start equal."""
    import torch
    if torch.equal(t.cpu(), c) or (c.dtype.is_floating_point and
                                   torch.equal(t.cpu().isnan(), c.isnan()) and
                                   torch.equal(t.cpu().nan_to_num(), c.nan_to_num())):
        return t
    # empty_like keeps the strides of a dense tensor (preserve_format)
    return torch.empty_like(c, device="tpu").copy_(c)


def _run(fn, *args, device=None):
    """(result, None) or (None, exception) of ``fn(*args)``; on tpu it also waits
    for the step so an asynchronous error is raised by the step that caused it,
    and drains pending errors after a failure so the next step starts clean."""
    import torch
    try:
        out = fn(*args)
        if device == "tpu":
            torch.tpu.synchronize()
        return out, None
    except Exception as e:  # noqa: BLE001 - the exception type is the result
        if device == "tpu":
            try:
                torch.tpu.synchronize()
            except Exception:  # noqa: BLE001 - a second error of the same step
                pass
        return None, e


def run_program(pseed, on_step=None):
    """Runs program ``pseed`` on CPU and tpu; returns its result record (a dict).
    ``on_step(record)`` is called before each step runs (the worker reports it, so
    a crash is attributed to the op that was running)."""
    import random
    from torchtpu.tools import _fuzz_ops as ops
    rng = random.Random(pseed)
    (xc, xv, xn), (yc, yv, yn) = ops.draw_inputs(rng, pseed)
    x_cpu, y_cpu = xv(xc), yv(yc)
    x_tpu, y_tpu = xv(xc.to("tpu")), yv(yc.to("tpu"))
    rec = {"seed": pseed, "inputs": f"{x_cpu.dtype}{list(x_cpu.shape)}:{xn} "
           f"{y_cpu.dtype}{list(y_cpu.shape)}:{yn}", "ops": [],
           "category": "match", "op": "", "dtype": "", "kind": "", "detail": ""}
    for _ in range(rng.choice([1, 2, 3, 4])):
        name, fn = ops.draw_op(rng, x_cpu)
        rec["ops"].append(name)
        if on_step:
            on_step(dict(rec, op=name, dtype=str(x_cpu.dtype).split(".")[1]))
        c, ce = _run(fn, x_cpu, y_cpu)
        t, te = _run(fn, x_tpu, y_tpu, device="tpu")
        cat, detail, kind = "match", "", ""
        if ce is not None or te is not None:
            if ce is None or te is None or type(ce) is not type(te):
                cat = "exception"
                kind = f"{type(ce).__name__ if ce else 'ok'}/{type(te).__name__ if te else 'ok'}"
                detail = (f"cpu {type(ce).__name__ if ce else 'ok'} tpu "
                          f"{type(te).__name__ if te else 'ok'}: "
                          f"{str(te or ce).splitlines()[0][:120] if str(te or ce) else ''}")
            else:
                break  # both raise the same type: a match, nothing to continue with
        else:
            cs = c if isinstance(c, tuple) else (c,)
            ts = t if isinstance(t, tuple) else (t,)
            for ci, ti in zip(cs, ts):
                cat, detail = _compare(ci, ti, name in ops.ELEMENTWISE)
                if cat != "match":
                    break
        if cat != "match":
            rec.update(category=cat, op=name, dtype=str(x_cpu.dtype).split(".")[1],
                       kind=kind, detail=detail)
            return rec
        c, t = (c[0], t[0]) if isinstance(c, tuple) else (c, t)
        x_cpu, x_tpu = c, _resync(c, t)
    return rec


def _worker(seeds):
    import torch  # noqa: F401
    import torchtpu  # noqa: F401
    # Test hooks of the harness itself (tests/ops/test_fuzz.py): die or stall on one seed.
    abort_on = os.environ.get("_TORCHTPU_FUZZ_ABORT_SEED")
    stall_on = os.environ.get("_TORCHTPU_FUZZ_STALL_SEED")
    for pseed in seeds:
        print(json.dumps({"start": pseed}), flush=True)
        if str(pseed) == abort_on:
            os.abort()
        if str(pseed) == stall_on:
            time.sleep(3600)
        try:
            rec = run_program(pseed, lambda step: print(json.dumps({"step": step}), flush=True))
        except Exception as e:  # noqa: BLE001 - a bug of the harness, not of tpu
            rec = _failed(pseed, "crash", f"harness error {type(e).__name__}: {e}")
        print(json.dumps(rec), flush=True)


# ---------------------------------------------------------------- parent side

def _spawn(seeds, mode):
    env = dict(os.environ, TORCHTPU_EAGER_MODE=mode, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchtpu.tools.fuzz", "--worker", ",".join(map(str, seeds))],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    lines = queue.Queue()
    def pump():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)
    threading.Thread(target=pump, daemon=True).start()
    return proc, lines


def _failed(pseed, category, detail, step=None):
    """The record of a program that crashed or hung during ``step`` (the record
    its worker sent before that step, if any)."""
    rec = {"seed": pseed, "inputs": "", "ops": [], "op": "?", "dtype": "", "kind": ""}
    rec.update(step or {})
    rec.update(category=category, detail=detail)
    return rec


def run_batch(seeds, mode, timeout):
    """Results of ``seeds`` run in worker subprocesses, restarting a worker after a
    crash (exit before a program's result) or a hang (no line for ``timeout`` s)."""
    results, todo = [], list(seeds)
    while todo:
        proc, lines = _spawn(todo, mode)
        current, step = None, None
        while True:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                proc.kill()
                proc.wait()
                results.append(_failed(current or todo[0], "hang", f"no result in {timeout} s",
                                       step))
                todo = todo[todo.index(current or todo[0]) + 1:]
                break
            if line is None:
                rc = proc.wait()
                if current is not None:
                    results.append(_failed(current, "crash", f"worker exit code {rc}", step))
                    todo = todo[todo.index(current) + 1:]
                else:
                    todo = [] if rc == 0 else todo[1:]
                break
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # stray output of the plugin
            if "start" in msg:
                current, step = msg["start"], None
            elif "step" in msg:
                step = msg["step"]
            else:
                results.append(msg)
                current = None
                todo = todo[todo.index(msg["seed"]) + 1:]
                if not todo:
                    proc.wait()
                    break
    return results


def read_expected(path):
    """[(op_glob, category, dtype_glob, kind_glob, reason)] from the expected-mismatches
    file: one ``<op-glob> <category> <dtype-glob> [<kind-glob>]  # <reason>`` per
    line; ``kind`` tells exception mismatches apart: ``<cpu type>/<tpu type>``
    (``ok`` for no exception), e.g. ``NotImplementedError/RuntimeError``.

    Raises:
        ValueError: a line without three or four fields, a known category or a reason.
    """
    entries = []
    for number, fields, reason, raw in entry_lines(path):
        if len(fields) not in (3, 4) or fields[1] not in CATEGORIES[1:] or not reason:
            raise ValueError(f"{path}:{number}: want 'op-glob category dtype-glob "
                             f"[kind-glob]  # reason', got {raw!r}")
        kind = fields[3] if len(fields) == 4 else "*"
        entries.append((fields[0], fields[1], fields[2], kind, reason))
    return entries


def explain(results, entries):
    """Sets ``reason`` on each mismatch (the first matching entry's, or None)."""
    for r in results:
        r["reason"] = None
        if r["category"] == "match":
            continue
        for op, cat, dt, kind, reason in entries:
            if (cat == r["category"] and fnmatch.fnmatchcase(r["op"], op)
                    and fnmatch.fnmatchcase(r["dtype"], dt)
                    and fnmatch.fnmatchcase(r.get("kind", ""), kind)):
                r["reason"] = reason
                break
    return results


def fuzz(programs, seed, mode="strict", jobs=1, timeout=60.0, expected=_DEFAULT_EXPECTED):
    """Runs ``programs`` programs of ``seed``; returns the result records, each with
    ``category`` (one of CATEGORIES), ``op``, ``dtype``, ``detail`` and ``reason``
    (why a mismatch is expected, None if unexplained)."""
    seeds = [program_seed(seed, i) for i in range(programs)]
    chunks = [seeds[j::jobs] for j in range(jobs)]
    out = [None] * jobs
    def run_chunk(j):
        out[j] = run_batch(chunks[j], mode, timeout)
    threads = [threading.Thread(target=run_chunk, args=(j,)) for j in range(jobs)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    results = sorted((r for part in out for r in part), key=lambda r: r["seed"])
    listed = read_expected(expected) if expected and os.path.exists(expected) else []
    return explain(results, listed)


def print_tables(results, elapsed):
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    console = Console(width=220)
    table = Table(title=f"{len(results)} programs in {elapsed:.0f} s")
    for col in CATEGORIES + ["explained", "unexplained"]:
        table.add_column(col, justify="right")
    counts = [sum(r["category"] == c for r in results) for c in CATEGORIES]
    bad = [r for r in results if r["category"] != "match"]
    unexplained = sum(r["reason"] is None for r in bad)
    table.add_row(*map(str, counts), str(len(bad) - unexplained), str(unexplained))
    console.print(table)
    console.print(f"unexplained rate: {100.0 * unexplained / max(len(results), 1):.2f}%")
    per_op = {}
    for r in bad:
        per_op.setdefault((r["op"], r["category"]), []).append(r)
    ops = Table(title="mismatches per op")
    for col in ("op", "category", "count", "unexplained", "example (first unexplained)",
                "expected because"):
        ops.add_column(col)
    for (op, cat), rs in sorted(per_op.items(), key=lambda kv: -len(kv[1])):
        un = [r for r in rs if r["reason"] is None]
        ex = (un or rs)[0]
        text = (f"seed {ex['seed']} {ex['inputs']} {'->'.join(ex['ops'])} [{ex['dtype']}]: "
                f"{ex['detail']}")
        why = "" if un else rs[0]["reason"][:70]
        # escape: details hold brackets (x[index], shapes) that rich reads as markup
        ops.add_row(op, cat, str(len(rs)), str(len(un)), escape(text), escape(why))
    console.print(ops)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", choices=["strict", "fused"], default="strict")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds without a result before a program counts as a hang")
    parser.add_argument("--json", help="write the result records to this file")
    parser.add_argument("--expected", default=_DEFAULT_EXPECTED)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        _worker([int(s) for s in args.worker.split(",") if s])
        return 0
    start = time.monotonic()
    results = fuzz(args.programs, args.seed, args.mode, args.jobs, args.timeout, args.expected)
    elapsed = time.monotonic() - start
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "mode": args.mode, "elapsed_s": elapsed,
                       "results": results}, f, indent=1)
    print_tables(results, elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

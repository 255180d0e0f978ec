"""OpInfo coverage sweep: PyTorch's ``op_db`` run on tpu against CPU.

Usage::

    python -m torchtpu.tools.coverage [--dtypes float32,int64,bool,bfloat16]
        [--ops name,...] [--backward] [--limit-samples 8] [--json out.json]
        [--chunk 50] [--op-timeout 120] [--mode strict|debug|fused]
        [--layout contiguous|noncontiguous|channels_last]

For every OpInfo whose op CPU supports for a dtype (``op.supported_dtypes("cpu")``;
``supported_backward_dtypes`` and ``supports_autograd`` with ``--backward``), the
first ``--limit-samples`` sample inputs run on CPU and on tpu copies, and the pair
is classified as native / fallback / wrong / error (see
:mod:`torchtpu.tools._opinfo_sweep`). An op that kills or hangs the process is
``crash``: the sweep runs in one child process per chunk of OpInfos, a supervisor
notes which OpInfo and sample each child is on, and a dead or silent (more than
``--op-timeout`` seconds on one OpInfo) child costs only that OpInfo.

Prints a table of counts per category and dtype with the percentage of native
OpInfos (among those with at least one sample CPU runs), the ten most common CPU
fallbacks, and writes every result as JSON. Wrong results, errors and crashes
are matched against the expected-failures file (``--expected``, by default the
source tree's ``tests/opinfo_expected_failures.txt``): each result gets the
file's reason or none, and the table counts the ``unexpected`` ones, which
should be zero.

``--layout`` lays the sample tensors out non-contiguous (PyTorch's
``SampleInput.noncontiguous()``) or channels_last (4-D and 5-D floating
tensors) on both sides; for pointwise ops, convolutions, pools and norms a
channels_last output with other strides than CPU's is category ``layout``. Its
results are labelled e.g. ``float32 channels_last``; the expected-failures file
is read under ``float32_channels_last`` first and then under ``float32`` (a
failure of the contiguous op is expected in every layout). A layout run also
counts the failures the layout introduces (``layout_introduced``: the sample
that failed is native or fallback when run contiguous).
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

CATEGORIES = ("native", "fallback", "wrong", "error", "layout", "crash", "no_samples")
FAILURES = ("wrong", "error", "layout", "crash")


def _op_db():
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def _select(op_db, names, dtype, backward):
    """OpInfos (full names) that CPU supports for ``dtype``, in op_db order."""
    from torchtpu.tools._opinfo_sweep import full_name

    chosen = []
    for op in op_db:
        name = full_name(op)
        if names and name not in names and op.name not in names:
            continue
        if backward:
            if not op.supports_autograd or dtype not in op.supported_backward_dtypes("cpu"):
                continue
        elif dtype not in op.supported_dtypes("cpu"):
            continue
        chosen.append(name)
    return chosen


# ----------------------------------------------------------------- worker side


def _worker(args):
    """Child process: sweeps ``args.names`` for one dtype, one JSON line per event."""
    import dataclasses

    import torch

    import torchtpu
    from torchtpu.tools._opinfo_sweep import dtype_from_name, full_name, run_opinfo

    torch.set_num_threads(1)
    torchtpu.set_eager_mode(args.mode)
    by_name = {full_name(op): op for op in _op_db()}
    dtype = dtype_from_name(args.dtype)
    with open(args.events, "a", buffering=1) as events:
        for name in args.names.split(","):
            def on_sample(index, name=name):
                events.write(json.dumps({"start": name, "sample": index}) + "\n")
                events.flush()

            on_sample(-1)
            torch.manual_seed(0)
            result = run_opinfo(by_name[name], dtype, args.limit_samples, args.backward,
                                on_sample, layout=args.layout)
            events.write(json.dumps({"result": dataclasses.asdict(result)}) + "\n")
            events.flush()


# ------------------------------------------------------------- supervisor side


def _read_events(path, offset):
    """New complete JSON lines of ``path`` after byte ``offset``."""
    with open(path) as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind("\n") + 1
    return [json.loads(line) for line in data[:end].splitlines() if line], offset + end


def _run_chunk(names, dtype, args, log):
    """Sweeps ``names`` in child processes, restarting after a crash or hang.

    Returns result dicts (see ``_opinfo_sweep.Result``); a crashed or hung
    OpInfo gets category ``crash`` with the sample index and exit status.
    """
    results, pending = [], list(names)
    while pending:
        fd, events_path = tempfile.mkstemp(prefix="torchtpu-coverage-", suffix=".jsonl")
        os.close(fd)
        cmd = [sys.executable, "-m", "torchtpu.tools.coverage", "--worker",
               "--dtype", dtype, "--names", ",".join(pending), "--events", events_path,
               "--limit-samples", str(args.limit_samples), "--mode", args.mode,
               "--layout", args.layout]
        if args.backward:
            cmd.append("--backward")
        stderr = tempfile.TemporaryFile(mode="w+")
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr)
        offset, current, since = 0, None, time.monotonic()
        while True:
            rc = child.poll()
            events, offset = _read_events(events_path, offset)
            for event in events:
                if "start" in event:
                    if event["start"] != (current or {}).get("start"):
                        since = time.monotonic()
                    current = event
                else:
                    results.append(event["result"])
                    pending.remove(event["result"]["op"])
                    log(event["result"])
                    current = None
            if rc is not None:
                break
            if current is not None and time.monotonic() - since > args.op_timeout:
                child.kill()
                child.wait()
                rc = f"killed after {args.op_timeout}s without finishing"
                break
            time.sleep(0.2)
        os.unlink(events_path)
        if not pending:
            break
        if current is None:
            stderr.seek(0)
            raise RuntimeError(f"coverage worker exited ({rc}) before starting an op:\n"
                               + stderr.read()[-2000:])
        stderr.seek(0)
        tail = [ln for ln in stderr.read().splitlines() if ln.strip()][-3:]
        crashed = {"op": current["start"], "dtype": dtype, "category": "crash",
                   "samples": 0, "fallbacks": {}, "contiguous": "",
                   "detail": f"sample {current['sample']}: exit {rc}: " + " | ".join(tail)[-600:]}
        results.append(crashed)
        pending.remove(current["start"])
        log(crashed)
    return results


def _summarize(results):
    """(counts per (dtype label, category), fallback -> [OpInfos hitting it, calls])."""
    counts = collections.defaultdict(collections.Counter)
    fallbacks = collections.defaultdict(lambda: [0, 0])
    for r in results:
        counts[r["label"]][r["category"]] += 1
        for op, n in r["fallbacks"].items():
            fallbacks[op][0] += 1
            fallbacks[op][1] += n
    return counts, fallbacks


_DEFAULT_EXPECTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                 "tests", "opinfo_expected_failures.txt")


def _expected_labels(label):
    """The expected-failures file's names for a result label, most specific
    first: "float32 backward channels_last" -> "float32_grad_channels_last",
    then "float32_grad" (what fails contiguous is expected in any layout)."""
    from torchtpu.tools._opinfo_sweep import LAYOUTS

    words = label.replace(" backward", " grad").split()
    names = ["_".join(words)]
    if words[-1] in LAYOUTS:
        names.append("_".join(words[:-1]))
    return names


def _mark_expected(bad, path):
    """Sets ``expected`` (the file's reason, or None) on each failed result."""
    from torchtpu.tools._opinfo_sweep import accepts, read_expected

    listed = read_expected(path) if path and os.path.exists(path) else {}
    for r in bad:
        r["expected"] = None
        for label in _expected_labels(r["label"]):
            entry = listed.get((r["op"], label))
            if entry and accepts(entry[0], r["category"]):
                r["expected"] = entry[1]
                break


def _introduced(r):
    """Whether failed result ``r`` of a layout run passes when run contiguous."""
    return r.get("contiguous") in ("native", "fallback")


def _print_report(counts, fallbacks, wrong, categories):
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(120, Console().width))
    table = Table(title="OpInfo coverage on tpu (vs CPU)")
    table.add_column("dtype")
    for cat in categories:
        table.add_column(cat, justify="right")
    table.add_column("% native", justify="right")
    table.add_column("unexpected", justify="right")
    for label, c in counts.items():
        run = sum(c.values()) - c["no_samples"]
        pct = f"{100.0 * c['native'] / run:.1f}" if run else "-"
        unexpected = sum(1 for r in wrong if r["label"] == label and r["expected"] is None)
        table.add_row(label, *(str(c[cat]) for cat in categories), pct, str(unexpected))
    console.print(table)
    top = Table(title="Most common CPU fallbacks")
    for col in ("ATen op", "OpInfos", "calls"):
        top.add_column(col, justify="left" if col == "ATen op" else "right")
    for op, (n_ops, calls) in sorted(fallbacks.items(), key=lambda kv: -kv[1][0])[:10]:
        top.add_row(op, str(n_ops), str(calls))
    console.print(top)
    if wrong:
        bad = Table(title="Wrong results, errors, layout mismatches and crashes")
        for col in ("OpInfo", "dtype", "category", "detail / expected because"):
            bad.add_column(col, overflow="fold")
        for r in wrong:
            why = f"expected: {r['expected']}" if r["expected"] else r["detail"]
            if r.get("contiguous"):
                why += f" [contiguous: {r['contiguous']}]"
            bad.add_row(r["op"], r["label"], r["category"], why)
        console.print(bad)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torchtpu.tools.coverage",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--ops", default="", help="comma-separated OpInfo names")
    parser.add_argument("--backward", action="store_true",
                        help="compare gradients instead of outputs")
    parser.add_argument("--limit-samples", type=int, default=8)
    parser.add_argument("--json", default="opinfo_coverage.json")
    parser.add_argument("--chunk", type=int, default=50, help="OpInfos per child process")
    parser.add_argument("--op-timeout", type=float, default=120.0,
                        help="seconds one OpInfo may run before it counts as crash")
    parser.add_argument("--mode", default="strict", choices=("strict", "debug", "fused"))
    parser.add_argument("--expected", default=_DEFAULT_EXPECTED,
                        help="expected-failures file (default: the source tree's tests/"
                        "opinfo_expected_failures.txt)")
    parser.add_argument("--layout", default="contiguous",
                        # _opinfo_sweep.LAYOUTS; not imported: it loads torch.
                        choices=("contiguous", "noncontiguous", "channels_last"),
                        help="how sample tensors are laid out on CPU and tpu alike")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", help=argparse.SUPPRESS)
    parser.add_argument("--names", help=argparse.SUPPRESS)
    parser.add_argument("--events", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args)

    import torch  # noqa: F401  (the supervisor only selects OpInfos; no device)

    from torchtpu.tools._opinfo_sweep import dtype_from_name

    op_db = _op_db()
    names = {n for n in args.ops.split(",") if n}
    results = []
    start = time.monotonic()
    for dtype in [d for d in args.dtypes.split(",") if d]:
        label = dtype + (" backward" if args.backward else "")
        if args.layout != "contiguous":
            label += " " + args.layout
        selected = _select(op_db, names, dtype_from_name(dtype), args.backward)

        def log(r, label=label):
            r["label"] = label
            if not args.quiet:
                print(f"[{time.monotonic() - start:7.1f}s] {label:18} {r['category']:10} "
                      f"{r['op']}  {r['detail'][:160]}", flush=True)

        for i in range(0, len(selected), args.chunk):
            results += _run_chunk(selected[i:i + args.chunk], dtype, args, log)

    counts, fallbacks = _summarize(results)
    bad = [r for r in results if r["category"] in FAILURES]
    _mark_expected(bad, args.expected)
    # The layout column only where a stride comparison ran.
    categories = [c for c in CATEGORIES if c != "layout" or args.layout == "channels_last"]
    _print_report(counts, fallbacks, bad, categories)
    summary = {label: dict(c) for label, c in counts.items()}
    for label, c in summary.items():
        c["unexpected"] = sum(1 for r in bad if r["label"] == label and r["expected"] is None)
        if args.layout != "contiguous":
            c["layout_introduced"] = sum(1 for r in bad if r["label"] == label and _introduced(r))
            print(f"{label}: {c['layout_introduced']} failures the layout introduces "
                  "(the failing sample passes contiguous)")
    top = sorted(fallbacks.items(), key=lambda kv: -kv[1][0])[:10]
    command = " ".join(["python -m torchtpu.tools.coverage", *(argv or sys.argv[1:])])
    with open(args.json, "w") as f:
        json.dump({"command": command,
                   "limit_samples": args.limit_samples, "mode": args.mode,
                   "layout": args.layout,
                   "summary": summary,
                   "top_fallbacks": [{"op": op, "opinfos": n, "calls": c} for op, (n, c) in top],
                   "results": results}, f, indent=1)
    print(f"wrote {args.json} ({len(results)} results, {time.monotonic() - start:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

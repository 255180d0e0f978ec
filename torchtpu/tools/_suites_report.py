"""Comparison, classification and reporting of ``python -m torchtpu.tools.pytorch_suites``.

Each test has one result per device (see :mod:`torchtpu.tools._suites_plugin` for
the outcomes; the runner adds crash, timeout and not_run). A test's category
is read from its tpu result, with its CPU result as the reference:

- passed: passed (or an expected failure that failed) on tpu, not failed on CPU;
- tpu_fail: failed on tpu, passed or skipped on CPU: the interesting ones;
- expected: a tpu_fail listed in the expected file (an intended difference);
- both_fail: failed on both for the same reason (a test that does not run on this
  torch, or a CPU bug);
- both_fail_differ: failed on both, but not alike (another exception type, or
  another message once device names and numbers are set aside): the CPU failure
  can hide a tpu bug behind it, so these are listed as tpu_fail is (and, like
  it, counted as expected when the expected file explains them);
- skipped: skipped on tpu (the reason is in the report);
- tpu_only_pass: passed on tpu, failed on CPU;
- not_run: not reached on tpu within ``--budget``.

A tpu failure's kind: crash (the worker died in it), timeout, wrong_value (an
AssertionError: assertEqual and friends), missing_check (an expected exception
was not raised), missing_warning, message (raised, but the message does not
match the regex), not_implemented (NotImplementedError), unexpected_success
(an expectedFailure that passed), error:<type> (any other exception).
"""
import csv
import fnmatch
import json
import re
from torchtpu.tools._expected_file import entry_lines

CATEGORIES = ["passed", "tpu_fail", "expected", "both_fail", "both_fail_differ", "skipped",
              "tpu_only_pass", "not_run"]
KINDS = ["crash", "timeout", "wrong_value", "missing_check", "missing_warning", "message",
         "not_implemented", "unexpected_success"]  # and error:<type>
_FAILED = {"failed", "error", "xpassed", "crash", "timeout"}
_PASSED = {"passed", "xfailed"}
_NOT_RAISED = re.compile(r"not raised|DID NOT RAISE|did not raise")
_NOT_WARNED = re.compile(r"not triggered|DID NOT WARN")
_NO_MATCH = re.compile(r"does not match|did not match|Regex didn't match")
_DEVICE = re.compile(r"\b(tpu|cpu|cuda|privateuseone)(:\d+)?\b", re.IGNORECASE)
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|[-+]?\d+(\.\d+)?([eE][-+]?\d+)?")


def kind_of(rec):
    """The kind of a failed tpu result ``rec`` (a result event, see module docstring)."""
    outcome, exc, msg = rec["outcome"], rec.get("exc_type", ""), rec.get("message", "")
    if outcome in ("crash", "timeout"):
        return outcome
    if outcome == "xpassed" or (not exc and "Unexpected success" in msg):
        return "unexpected_success"
    if exc.endswith("AssertionError") or exc == "Failed":  # Failed: pytest.raises/fail
        if _NOT_RAISED.search(msg):
            return "missing_check"
        if _NOT_WARNED.search(msg):
            return "missing_warning"
        if _NO_MATCH.search(msg):
            return "message"
        return "wrong_value"
    if exc == "NotImplementedError":
        return "not_implemented"
    return "error:" + (exc or "unknown")


def failure_key(rec):
    """What two failures of one test must share to be the same failure: the
    kind, the exception type and the message's first line with device names,
    numbers and addresses replaced (values drawn by each device's generator
    differ, so a mismatch's numbers do too)."""
    first = (rec.get("message") or "").split("\n")[0]
    return (kind_of(rec), rec.get("exc_type", ""),
            _NUMBER.sub("N", _DEVICE.sub("DEV", first))[:200])


def read_expected(path):
    """[(test_glob, kind_glob, reason)] from the expected file: one ``<test-glob>
    <kind-glob>  # <reason>`` per line, the test as ``<file>::<class>::<test>``
    (class without its device suffix, test named as on tpu), fnmatch globs.

    Raises:
        ValueError: a line without two fields, a known kind or a reason.
    """
    entries = []
    for number, fields, reason, raw in entry_lines(path):
        known = fields[1:2] and (fields[1] in KINDS or fields[1] == "*"
                                 or fields[1].startswith("error:"))
        if len(fields) != 2 or not known or not reason:
            raise ValueError(f"{path}:{number}: want 'test-glob kind  # reason', got {raw!r}")
        entries.append((fields[0], fields[1], reason))
    return entries


def _expected_reason(test, kind, entries):
    for test_glob, kind_glob, reason in entries:
        if fnmatch.fnmatchcase(test, test_glob) and fnmatch.fnmatchcase(kind, kind_glob):
            return reason
    return None


def compare(file, tpu, cpu, entries):
    """Rows (dicts) of one test file: ``tpu`` and ``cpu`` map test id -> result;
    every tpu result gives one row (tests the tpu run did not reach are not_run)."""
    rows = []
    for tid, t in tpu.items():
        c = cpu.get(tid)
        test = f"{file}::{tid}"
        kind, reason = "", None
        if t["outcome"] in ("not_run", "skipped"):
            cat = t["outcome"]
        elif t["outcome"] in _PASSED:
            cat = "tpu_only_pass" if c and c["outcome"] in _FAILED else "passed"
        elif c and c["outcome"] in _FAILED:
            kind = kind_of(t)
            cat = "both_fail" if failure_key(t) == failure_key(c) else "both_fail_differ"
            if cat == "both_fail_differ":  # explained like a tpu_fail, by the expected file
                reason = _expected_reason(test, kind, entries)
                cat = cat if reason is None else "expected"
        else:
            kind = kind_of(t)
            reason = _expected_reason(test, kind, entries)
            cat = "tpu_fail" if reason is None else "expected"
        rows.append({
            "file": file, "test": test, "category": cat, "kind": kind,
            "tpu_outcome": t["outcome"], "tpu_exc_type": t.get("exc_type", ""),
            "tpu_message": t.get("message", ""), "tpu_where": t.get("where", ""),
            "tpu_duration_s": t.get("duration", 0.0),
            "cpu_outcome": c["outcome"] if c else "", "cpu_exc_type": (c or {}).get("exc_type", ""),
            "cpu_message": (c or {}).get("message", ""), "expected_reason": reason or ""})
    return rows


def stale_entries(rows, entries):
    """Expected-file lines some test matches that passed on tpu: delete them."""
    passed = [r["test"] for r in rows if r["category"] in ("passed", "tpu_only_pass")]
    return [e for e in entries if any(fnmatch.fnmatchcase(t, e[0]) for t in passed)]


def write_report(path, rows, meta):
    """``rows`` (and, for JSON, ``meta``) to ``path``: CSV if it ends in .csv, else JSON."""
    if path.endswith(".csv"):
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["file"])
            writer.writeheader()
            writer.writerows(rows)
    else:
        with open(path, "w") as f:
            json.dump(dict(meta, tests=rows), f, indent=1)


def print_tables(rows, units, elapsed, entries, console=None):
    """The table by file, the table by kind, the tpu-only failures by kind, the
    workers' errors and any stale expected lines."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    console = console or Console(width=200)
    files = sorted({r["file"] for r in rows} | {u["file"] for u in units})
    by_file = Table(title=f"tpu vs CPU, {len(rows)} tests in {elapsed:.0f} s")
    by_file.add_column("file")
    for col in ["tests"] + CATEGORIES:
        by_file.add_column(col, justify="right")
    for file in files + ["total"]:
        mine = [r for r in rows if file in (r["file"], "total")]
        by_file.add_row(file, str(len(mine)),
                        *[str(sum(r["category"] == c for r in mine)) for c in CATEGORIES])
    console.print(by_file)

    failing = [r for r in rows if r["category"] in ("tpu_fail", "expected")]
    kinds = sorted({r["kind"] for r in failing}, key=lambda k: (k not in KINDS,
                   KINDS.index(k) if k in KINDS else 0, k))
    by_kind = Table(title="tpu-only failures by kind")
    for col, justify in (("kind", "left"), ("tpu_fail", "right"), ("expected", "right"),
                         ("files", "left")):
        by_kind.add_column(col, justify=justify)
    for kind in kinds:
        mine = [r for r in failing if r["kind"] == kind]
        per_file = ", ".join(f"{f} {sum(r['file'] == f for r in mine)}" for f in files
                             if any(r["file"] == f for r in mine))
        by_kind.add_row(kind, str(sum(r["category"] == "tpu_fail" for r in mine)),
                        str(sum(r["category"] == "expected" for r in mine)), per_file)
    console.print(by_kind)

    def listing(title, mine, cpu_too=False):
        if mine:
            console.print(f"[bold]{title}[/bold] ({len(mine)})")
        for r in mine:
            # escape: messages hold brackets (shapes, indices) that rich reads as markup
            where = f" ({r['tpu_where']})" if r["tpu_where"] else ""
            console.print(f"  {escape(r['test'])}{where}: {escape(r['tpu_message'][:160])}",
                          soft_wrap=True)
            if cpu_too:
                console.print(f"    on CPU: {escape(r['cpu_exc_type'])}: "
                              f"{escape(r['cpu_message'][:160])}", soft_wrap=True)

    for kind in kinds:
        listing(kind, [r for r in failing if r["kind"] == kind and r["category"] == "tpu_fail"])
    listing("failed on both, not alike", [r for r in rows
                                          if r["category"] == "both_fail_differ"], True)
    for u in units:
        for err in u["errors"]:
            console.print(f"[bold]worker error[/bold] {u['file']} on {u['device']}: "
                          f"{escape(err)}", soft_wrap=True)
    for test_glob, kind_glob, _ in stale_entries(rows, entries):
        console.print(f"expected line now passes on tpu: {escape(test_glob)} {kind_glob}")

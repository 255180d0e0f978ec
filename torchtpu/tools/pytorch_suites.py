"""PyTorch's device-generic test files on tpu, compared test by test with CPU.

``python -m torchtpu.tools.pytorch_suites --pytorch-test-dir DIR [FILE ...] [-k EXPR]
[--dtypes float32,...] [--jobs N] [--timeout S] [--budget S] [--report PATH]
[--expected FILE]`` runs each FILE (default: :data:`FILES`) of PyTorch's ``test/``
folder DIR with pytest, first on tpu (``PYTORCH_TESTING_DEVICE_ONLY_FOR=tpu``: the
``PrivateUse1TestBase`` classes) then on CPU (``...=cpu``) for the tests the tpu
run ran, and prints a table by file and by kind (see
:mod:`torchtpu.tools._suites_report`). Only the classes that
``instantiate_device_type_tests`` made run (``TestNNDeviceType``, not ``TestNN``).
Nothing is fetched; the files are read where they are and never changed. A
2.4-era folder needs the import shims of :mod:`torchtpu.tools._suites_shims`,
which the workers install.

Each (file, device) run is a pytest process that reports test by test
(:mod:`torchtpu.tools._suites_plugin`). When it dies inside a test (SIGSEGV,
abort), that test is a crash and a new process runs the tests not yet run; a
test running longer than ``--timeout`` seconds is killed and is a timeout, and
the rest run likewise. ``--budget`` bounds each file's tpu run (seconds); the
tests it did not reach are not_run. ``--jobs`` files run at a time (each runs
its tpu then its CPU process). Worker logs go to a temp dir (``--keep-logs``).

Failures listed in the expected file (default: the source tree's
``tests/pytorch_suites_expected.txt``) are "expected". docs/pytorch-suites.md
says how to get the test files.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from torchtpu.tools import _suites_report as report

FILES = [
    "test_unary_ufuncs.py", "test_binary_ufuncs.py", "test_reductions.py",
    "test_shape_ops.py", "test_sort_and_select.py", "test_tensor_creation_ops.py",
    "test_foreach.py", "test_nn.py", "test_torch.py", "test_autograd.py", "test_linalg.py",
    "test_view_ops.py", "test_indexing.py", "test_type_promotion.py",
]
_DEFAULT_EXPECTED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tests", "pytorch_suites_expected.txt")
_POLL_S = 0.2
# lines of a worker log that say why the process died, most telling first
_FATAL = [re.compile(p, re.M) for p in (
    r"^F\d{4} .*$",                    # absl/XLA fatal log line (a failed CHECK)
    r"Check failed.*$", r"terminate called.*$",
    r"Fatal Python error: .*$")]        # after pytest's progress dots on the same line
# faulthandler's (pytest enables it) innermost Python frame of the dying thread
_TOP_FRAME = re.compile(r'^Current thread .*\n\s+File "(.+)", line (\d+) in (\S+)', re.M)


def _signal_name(rc):
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def _crash_record(rc, log_tail):
    """The result of a test its worker died in: the signal or exit code, the
    fatal log line and the innermost Python frame (``where``, ``file:line``)."""
    why = f"worker killed by {_signal_name(rc)}" if rc < 0 else f"worker exit code {rc}"
    for pattern in _FATAL:
        m = pattern.search(log_tail)
        if m:
            why += f": {m.group(0).strip()[:200]}"
            break
    m = _TOP_FRAME.search(log_tail)
    where = f"{os.path.basename(m.group(1))}:{m.group(2)}" if m else ""
    if m:
        why += f" (in {m.group(3)})"
    return {"outcome": "crash", "exc_type": "", "message": why, "where": where}


def _collect_error(log_tail):
    """The first ``E   `` line of a pytest log (the import error of a file)."""
    for line in log_tail.splitlines():
        if line.startswith("E   "):
            return line[4:].strip()
    return log_tail.strip().splitlines()[-1] if log_tail.strip() else "no output"


class _Unit:
    """One test file on one device: its pytest processes and their results."""

    def __init__(self, path, device, opts, workdir, only=None):
        self.path, self.device, self.opts, self.only = path, device, opts, only
        stem = f"{os.path.basename(path)[:-3]}-{device}"
        self.events = os.path.join(workdir, stem + ".jsonl")
        self.log = os.path.join(workdir, stem + ".log")
        self.ini = os.path.join(workdir, "pytest.ini")
        self.skip_file = os.path.join(workdir, stem + ".skip")
        self.only_file = os.path.join(workdir, stem + ".only")
        self.collected = None
        self.results = {}  # test id -> result event
        self.errors, self.attempts = [], 0

    def command(self):
        cmd = [sys.executable, "-m", "pytest", self.path, "-c", self.ini,
               "--rootdir", os.path.dirname(self.ini), "--noconftest", "-q", "-rfE",
               "-p", "no:cacheprovider", "-p", "no:warnings", "--assert=plain",
               "--capture=sys", "--tb=short", "-p", "torchtpu.tools._suites_plugin",
               "--suites-events", self.events, "--suites-device", self.device,
               "--suites-skip", self.skip_file]
        if self.only is not None:
            cmd += ["--suites-only", self.only_file]
        if self.opts.k:
            cmd += ["-k", self.opts.k]
        if self.opts.dtypes:
            cmd += ["--suites-dtypes", self.opts.dtypes]
        return cmd

    def run(self, budget=None):
        """Runs pytest processes until every collected test has a result, the
        budget (seconds) is spent or a process makes no progress."""
        env = dict(os.environ, PYTORCH_TESTING_DEVICE_ONLY_FOR=self.device,
                   # third-party pytest plugins stay out (xdist, randomly, ...)
                   PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
        if self.only is not None:
            with open(self.only_file, "w") as f:
                f.write("".join(t + "\n" for t in self.only))
        deadline = time.monotonic() + budget if budget else None
        while True:
            with open(self.skip_file, "w") as f:
                f.write("".join(t + "\n" for t in self.results))
            before = len(self.results)
            stopped = self._attempt(env, deadline)
            remaining = [t for t in self.collected or [] if t not in self.results]
            if stopped == "budget" and self.collected is None:
                self.errors.append("budget spent before the tests were collected")
            if stopped == "budget" or not remaining:
                break
            if len(self.results) == before:
                self.errors.append(f"pytest stopped before {remaining[0]} with no result "
                                   f"(see {self.log})")
                break
        for tid in self.collected or []:
            self.results.setdefault(tid, {"outcome": "not_run", "message": "budget spent"})

    def _attempt(self, env, deadline):
        """One pytest process; returns "budget" if it was stopped for the budget."""
        self.attempts += 1
        log_start = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        offset, current, started, stopped = 0, None, 0.0, None
        open(self.events, "w").close()
        with open(self.log, "a") as log:
            proc = subprocess.Popen(self.command(), cwd=os.path.dirname(self.ini), env=env,
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        while True:
            rc = proc.poll()  # before reading: every event of a finished process is on disk
            with open(self.events) as f:
                f.seek(offset)
                chunk = f.read()
            complete = chunk[:chunk.rfind("\n") + 1]
            offset += len(complete.encode())
            for line in complete.splitlines():
                event = json.loads(line)
                if event["event"] == "collected":
                    if self.collected is None:
                        self.collected = event["ids"]
                elif event["event"] == "start":
                    current, started = event["id"], time.monotonic()
                else:
                    self.results[event["id"]] = event
                    current = None
            if rc is not None:
                break
            now = time.monotonic()
            if current is not None and now - started > self.opts.timeout:
                stopped = "timeout"
            elif deadline is not None and now > deadline:
                stopped = "budget"
            if stopped:
                os.killpg(proc.pid, signal.SIGKILL)  # the worker and any child it forked
                rc = proc.wait()
                break
            time.sleep(_POLL_S)
        with open(self.log, errors="replace") as f:
            f.seek(log_start)
            tail = f.read()
        if stopped == "timeout":
            self.results[current] = {"outcome": "timeout", "exc_type": "",
                                     "message": f"still running after {self.opts.timeout} s"}
        elif stopped is None and current is not None:
            self.results[current] = _crash_record(rc, tail)
        elif stopped is None and rc not in (0, 1, 5) and not self.results:
            self.errors.append(f"pytest exit code {rc}: {_collect_error(tail)}")
        return stopped

    def summary(self):
        return {"file": os.path.basename(self.path), "device": self.device,
                "tests": len(self.results), "attempts": self.attempts,
                "crashes": sum(r["outcome"] == "crash" for r in self.results.values()),
                "timeouts": sum(r["outcome"] == "timeout" for r in self.results.values()),
                "errors": self.errors}


def run_file(path, opts, workdir):
    """Runs test file ``path`` on tpu, then on CPU the tests tpu ran (not skipped,
    not reached); returns (tpu unit, cpu unit)."""
    tpu = _Unit(path, "tpu", opts, workdir)
    tpu.run(budget=opts.budget)
    ran = [t for t, r in tpu.results.items() if r["outcome"] not in ("skipped", "not_run")]
    cpu = _Unit(path, "cpu", opts, workdir, only=ran)
    if ran:
        cpu.run()
    for unit in (tpu, cpu):
        s = unit.summary()
        print(f"{s['file']} on {s['device']}: {s['tests']} tests, {s['attempts']} "
              f"process(es), {s['crashes']} crash(es), {s['timeouts']} timeout(s)",
              file=sys.stderr, flush=True)
    return tpu, cpu


def run(files, opts):
    """Runs ``files`` (paths); returns (rows, unit summaries, entries of the expected file)."""
    entries = report.read_expected(opts.expected) if os.path.exists(opts.expected) else []
    workdir = tempfile.mkdtemp(prefix="torchtpu-suites-")
    with open(os.path.join(workdir, "pytest.ini"), "w") as f:
        # an empty ini: PyTorch's own pytest.ini and conftest.py (which need its CI
        # plugins) stay out; the worker's flags are all on the command line
        f.write("[pytest]\n")
    rows, units = [], []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
            for tpu, cpu in pool.map(lambda p: run_file(p, opts, workdir), files):
                rows += report.compare(os.path.basename(tpu.path), tpu.results,
                                       cpu.results, entries)
                units += [tpu.summary(), cpu.summary()]
    finally:
        if opts.keep_logs:
            print(f"worker logs: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return rows, units, entries


def _parser():
    p = argparse.ArgumentParser(prog="python -m torchtpu.tools.pytorch_suites",
                                description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", help=f"test files of DIR (default: {len(FILES)} "
                   "device-generic files, see docs/pytorch-suites.md)")
    p.add_argument("--pytorch-test-dir", required=True, metavar="DIR",
                   help="PyTorch's test/ folder (a checkout; nothing is fetched)")
    p.add_argument("-k", metavar="EXPR", help="pytest -k expression, the same on both devices")
    p.add_argument("--dtypes", help="comma list, e.g. float32: run only tests of these "
                   "dtypes and tests without a dtype")
    p.add_argument("--jobs", type=int, default=1, help="files run at a time")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds one test may run before it is killed (a timeout)")
    p.add_argument("--budget", type=float, help="seconds for each file's tpu run")
    p.add_argument("--report", help="write every test's row here (.csv, else JSON)")
    p.add_argument("--expected", default=_DEFAULT_EXPECTED,
                   help="the expected-failures file (intended differences)")
    p.add_argument("--keep-logs", action="store_true", help="keep the workers' logs")
    return p


def main(argv=None):
    opts = _parser().parse_args(argv)
    names = opts.files or FILES
    paths = [os.path.join(opts.pytorch_test_dir, n if n.endswith(".py") else n + ".py")
             for n in names]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        print(f"not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    start = time.monotonic()
    rows, units, entries = run(paths, opts)
    elapsed = time.monotonic() - start
    if opts.report:
        import torch
        report.write_report(opts.report, rows, {
            "argv": sys.argv if argv is None else argv, "torch": torch.__version__,
            "pytorch_test_dir": opts.pytorch_test_dir, "elapsed_s": round(elapsed, 1),
            "units": units})
    report.print_tables(rows, units, elapsed, entries)
    return 0


if __name__ == "__main__":
    sys.exit(main())

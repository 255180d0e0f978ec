"""pytest plugin of the worker processes of ``python -m torchtpu.tools.pytorch_suites``.

Loaded with ``-p torchtpu.tools._suites_plugin`` into a pytest run of one of
PyTorch's test files on one device. It installs the import shims
(:mod:`torchtpu.tools._suites_shims`), keeps only the tests of device-generic
classes (those ``instantiate_device_type_tests`` made), narrowed by the runner's
lists and dtype filter, and appends one JSON line per event to the
``--suites-events`` file, flushed at once, so the runner knows which test was
running when the process died or stalled:

- ``{"event": "collected", "ids": [...]}`` once, the tests that will run;
- ``{"event": "start", "id": ...}`` before each test;
- ``{"event": "result", "id": ..., "outcome": ..., "exc_type": ..., "message": ...,
  "where": ..., "duration": ...}`` after it; outcome is passed, failed, error
  (setup or teardown failed), skipped, xfailed or xpassed; where is the
  ``file:line`` in the test file the failure came from.

A test id is ``<generic class>::<test name>`` with the device suffix written as
on tpu (``TestShapeOps::test_flip_tpu_float32`` for ``TestShapeOpsCPU::
test_flip_cpu_float32`` too), so the tpu and CPU runs of a test share an id.
"""
import json
import re
import time

import pytest

TPU = "tpu"
_CLASS_SUFFIX = re.compile(r"(PRIVATEUSE1|TPU|CPU)$")


def device_suffix_at(name, device):
    """Index of the ``_<device>`` suffix in test ``name``, or -1.

    ``instantiate_device_type_tests`` names a test ``<base><params>_<device>[_<dtypes>]``
    (torch/testing/_internal/common_device_type.py, ``instantiate_test``); dtype
    names never contain a device name, so the last ``_<device>`` token ending at
    ``_`` or at the end is the suffix even when the base holds the word too
    (``test_to_cpu_cpu``).
    """
    token = "_" + device
    i = name.rfind(token)
    while i >= 0 and not (i + len(token) == len(name) or name[i + len(token)] == "_"):
        i = name.rfind(token, 0, i)
    return i


def shared_id(cls_name, name, device):
    """The id shared by the tpu and CPU runs of a test (see the module docstring)."""
    i = device_suffix_at(name, device)
    if i >= 0:
        name = name[:i] + "_" + TPU + name[i + 1 + len(device):]
    return _CLASS_SUFFIX.sub("", cls_name) + "::" + name


def dtypes_of(name, known):
    """The dtype names after the tpu suffix of test ``name`` ([] if it has none,
    None if what follows is not a list of names in ``known``)."""
    i = device_suffix_at(name, TPU)
    tail = name[i + len(TPU) + 2:] if i >= 0 else ""
    out = []
    while tail:
        for dt in sorted(known, key=len, reverse=True):  # float8_e4m3fn before float8
            if tail == dt or tail.startswith(dt + "_"):
                out.append(dt)
                tail = tail[len(dt) + 1:]
                break
        else:
            return None
    return out


def one_line(text, limit=300):
    """``text``'s non-empty lines joined by `` | ``, cut at ``limit`` characters."""
    line = " | ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _message(exc):
    """One line of ``exc``'s message, without the rerun hint PyTorch's TestCase
    appends ("To execute this test, run the following from the base repo dir")."""
    return one_line(str(exc).split("To execute this test, run")[0])


def _where(excinfo, item):
    """``file:line`` of the innermost frame of the failure in the test file."""
    for entry in reversed(excinfo.traceback):
        if str(entry.path) == str(item.path):
            return f"{item.path.name}:{entry.lineno + 1}"  # lineno counts from 0
    return ""


def _read_ids(path):
    if not path:
        return None
    with open(path) as f:
        return {line.strip() for line in f if line.strip()}


class _Recorder:
    def __init__(self, config):
        opt = config.getoption
        self.device = opt("suites_device")
        self.skip = _read_ids(opt("suites_skip")) or set()
        self.only = _read_ids(opt("suites_only"))
        self.dtypes = set(opt("suites_dtypes").split(",")) if opt("suites_dtypes") else None
        self.events = open(opt("suites_events"), "a")  # noqa: SIM115 - open for the session
        self.ids = {}  # nodeid -> test id
        self.state = {}  # test id -> result being assembled over setup/call/teardown

    def emit(self, **event):
        self.events.write(json.dumps(event) + "\n")
        self.events.flush()

    def keep(self, item, known):
        from torch.testing._internal.common_device_type import DeviceTypeTestBase
        cls = getattr(item, "cls", None)
        if cls is None or not issubclass(cls, DeviceTypeTestBase):
            return None
        tid = shared_id(cls.__name__, item.name, self.device)
        if tid in self.skip or (self.only is not None and tid not in self.only):
            return None
        if self.dtypes is not None:
            dts = dtypes_of(tid.split("::")[1], known)
            if dts is None or not set(dts) <= self.dtypes:
                return None
        return tid

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        import torch
        known = {str(v).split(".")[1] for v in vars(torch).values()
                 if isinstance(v, torch.dtype)}
        kept, dropped = [], []
        for item in items:
            tid = self.keep(item, known)
            if tid is None:
                dropped.append(item)
            else:
                self.ids[item.nodeid] = tid
                kept.append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept

    def pytest_collection_finish(self, session):
        self.emit(event="collected", ids=[self.ids[item.nodeid] for item in session.items])

    def pytest_runtest_logstart(self, nodeid, location):
        tid = self.ids[nodeid]
        self.state[tid] = {"event": "result", "id": tid, "outcome": "passed",
                           "exc_type": "", "message": "", "where": "",
                           "start": time.monotonic()}
        self.emit(event="start", id=tid)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        rec = self.state[self.ids[item.nodeid]]
        if rec["outcome"] not in ("passed", "skipped"):
            return report  # the first failure is the one that counts
        if report.failed:
            rec["outcome"] = "failed" if call.when == "call" else "error"
            if call.excinfo is not None:
                rec["exc_type"] = call.excinfo.typename
                rec["message"] = _message(call.excinfo.value)
                rec["where"] = _where(call.excinfo, item)
            else:  # e.g. unittest's unexpected success: no exception, only the report
                rec["message"] = one_line(report.longreprtext.strip().splitlines()[-1])
        elif hasattr(report, "wasxfail"):
            rec["outcome"] = "xfailed" if report.skipped else "xpassed"
        elif report.skipped:
            rec["outcome"] = "skipped"
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            rec["message"] = one_line(reason.removeprefix("Skipped: "))
        return report

    def pytest_runtest_logfinish(self, nodeid, location):
        rec = self.state.pop(self.ids[nodeid])
        rec["duration"] = round(time.monotonic() - rec.pop("start"), 3)
        self.emit(**rec)


def pytest_addoption(parser):
    group = parser.getgroup("torchtpu pytorch_suites worker")
    group.addoption("--suites-events", help="append the JSON-lines event stream here")
    group.addoption("--suites-device", default=TPU, help="the device the run tests (tpu, cpu)")
    group.addoption("--suites-skip", help="file of test ids to leave out (already run)")
    group.addoption("--suites-only", help="file of test ids: run only these")
    group.addoption("--suites-dtypes", help="comma list: run only tests of these dtypes "
                    "(and tests without a dtype)")


def pytest_configure(config):
    if not config.getoption("suites_events"):
        return
    from torchtpu.tools import _suites_shims
    _suites_shims.install()
    config.pluginmanager.register(_Recorder(config), "torchtpu_suites_recorder")

"""Shared output of the benchmarks: the JSON report on stdout and, optionally, a file."""

import argparse
import json
import os
import socket
import subprocess
import sys


def emit(report, out=None):
    """Prints `report` as indented JSON and writes it to `out` when given; returns it."""
    text = json.dumps(report, indent=2)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    return report


def run_two_ranks(script, sizes, iters, out, timeout_s):
    """Runs `script --rank R --port P` for ranks 0 and 1 on a free loopback port
    (one tpu device each) and exits with the worse return code; a rank still
    running after `timeout_s` seconds raises subprocess.TimeoutExpired."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = dict(os.environ, TORCHTPU_CPU_DEVICES="1", BENCH_OUT=out or "")
    procs = [subprocess.Popen([sys.executable, script, "--sizes", sizes, "--iters", str(iters),
                               "--rank", str(r), "--port", port], env=env)
             for r in range(2)]
    for proc in procs:
        proc.wait(timeout=timeout_s)
    sys.exit(max(proc.returncode for proc in procs))


def two_rank_args(description, default_sizes):
    """The two distributed benchmarks' command line: --sizes (comma-separated,
    e.g. 1M,4M), --iters, --out, and the hidden --rank/--port of a worker."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--sizes", default=default_sizes)
    p.add_argument("--iters", type=int, default=9)
    p.add_argument("--out", default=None)
    p.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--port", default=None, help=argparse.SUPPRESS)
    return p.parse_args()

"""Shared output of the benchmarks: the JSON report on stdout and, optionally, a file."""

import json


def emit(report, out=None):
    """Prints `report` as indented JSON and writes it to `out` when given; returns it."""
    text = json.dumps(report, indent=2)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    return report

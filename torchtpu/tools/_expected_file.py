"""The line format the tools' expected-differences files share
(tests/opinfo_expected_failures.txt, tests/fuzz_expected_mismatches.txt,
tests/pytorch_suites_expected.txt): one entry per line, ``<fields...>  #
<reason>``; blank lines and lines starting with ``#`` are comments."""


def entry_lines(path):
    """Yields ``(line_number, fields, reason, raw_line)`` for each entry of
    ``path``: ``fields`` are the whitespace-separated words before ``#``,
    ``reason`` the stripped text after it ("" when there is none)."""
    with open(path) as f:
        for number, raw in enumerate(f.read().splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            entry, _, reason = line.partition("#")
            yield number, entry.split(), reason.strip(), raw

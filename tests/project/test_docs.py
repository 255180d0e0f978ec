"""The documentation agrees with the code: environment variables and links.

1. Every environment variable torchtpu reads has a row in docs/environment.md,
   and every row there names a variable that is still read.
2. Every ``TORCHTPU_*`` name that README.md, docs/*.md or bench/README.md
   mentions is one the code reads (a typo or a removed variable fails).
3. Every relative link in those pages points at a file or folder that exists,
   and a ``#anchor`` into a Markdown page at one of its headings.

What counts as "read": any token ``TORCHTPU_<NAME>`` (or ``_TORCHTPU_<NAME>``,
the private test hooks) anywhere in the scanned code: C++ sources and headers
under csrc/ (csrc/tests included), Python under torchtpu/, scripts/*.sh and
setup.py, comments and messages included. A rule that matched only
``getenv("...")`` / ``os.environ`` calls would miss reads through helpers
(torchtpu/config.py's ``_env_threshold(name, default)``) and shell
assignments (``TORCHTPU_TEST_MODE=fused pytest``); a name that a comment
mentions almost always sits next to its read. The cost: a name that only a
comment mentions still needs a row. Not tokens: a name glued to a letter or
digit before it (setup.py's ``-DTORCHTPU_PACKAGE_DIR=``, a CMake definition)
and NOT_ENV below, macros the build defines; the test checks that no
getenv/os.environ call reads those.

"Documented": the name, in backticks, is the first cell of a table row in
docs/environment.md, and the row's other cells (default, meaning) are not
empty. Plain file reads, no torch import: well under a second.
"""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV_DOC = ROOT / "docs" / "environment.md"

# TORCHTPU_ tokens in code that are not environment variables.
NOT_ENV = {
    "TORCHTPU_VERSION": "a C++ macro csrc/cache/CMakeLists.txt defines from pyproject.toml",
}

_TOKEN = re.compile(r"(?<![A-Za-z0-9])_?TORCHTPU_[A-Z0-9_]*[A-Z0-9]")
# A read through the environment API, for the NOT_ENV check.
_ENV_CALL = re.compile(r"""(?:getenv|environ(?:\.get)?)\s*[(\[]\s*["'](_?TORCHTPU_[A-Z0-9_]+)""")


def _code_files():
    for sub, exts in (("csrc", (".cc", ".h")), ("torchtpu", (".py",))):
        for dirpath, _, names in os.walk(ROOT / sub):
            for name in names:
                if name.endswith(exts):
                    yield Path(dirpath) / name
    yield from sorted((ROOT / "scripts").glob("*.sh"))
    yield ROOT / "setup.py"


def tokens(text):
    """The TORCHTPU_ names in ``text`` (see the module docstring for the rule)."""
    return set(_TOKEN.findall(text))


def code_variables():
    """{name: first file naming it} over the scanned code, NOT_ENV excluded."""
    found = {}
    for path in _code_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for name in tokens(text):
            found.setdefault(name, path.relative_to(ROOT).as_posix())
    return {n: p for n, p in found.items() if n not in NOT_ENV}


def documented_rows(text):
    """{name: [other cells]} for each table row whose first cell is one
    backticked TORCHTPU_ name (``| `TORCHTPU_X` | default | meaning |``)."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*`(_?TORCHTPU_[A-Z0-9_]+)`\s*\|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    return rows


def _doc_pages():
    return [ROOT / "README.md", ROOT / "bench" / "README.md",
            *sorted((ROOT / "docs").glob("*.md"))]


def _strip_fences(text):
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _strip_code(text):
    """Markdown without fenced blocks and inline code spans (links there are text)."""
    return re.sub(r"`[^`\n]*`", "", _strip_fences(text))


def links(text):
    """Targets of the inline and reference-style links of a Markdown text."""
    body = _strip_code(text)
    found = re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", body)
    found += re.findall(r"^\s*\[[^\]]+\]:\s*(\S+)", body, flags=re.M)
    return found


def anchors(text):
    """GitHub's heading ids for a Markdown text (lower case, punctuation
    dropped, spaces to hyphens, repeats suffixed -1, -2, ...)."""
    seen, out = {}, set()
    for line in _strip_fences(text).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(page):
    """'target (why)' for each relative link of ``page`` that leads nowhere."""
    text = page.read_text(encoding="utf-8")
    bad = []
    for target in links(text):
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, mailto:, ...
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(
                dest.read_text(encoding="utf-8")):
            bad.append(f"{target} (no heading #{anchor} in {dest.name})")
    return bad


@pytest.fixture(scope="module")
def in_code():
    return code_variables()


@pytest.fixture(scope="module")
def rows():
    return documented_rows(ENV_DOC.read_text(encoding="utf-8"))


def test_every_variable_the_code_reads_is_documented(in_code, rows):
    missing = sorted(f"{n} (in {p})" for n, p in in_code.items() if n not in rows)
    assert not missing, f"not in a table row of docs/environment.md: {missing}"


def test_every_documented_variable_is_read(in_code, rows):
    unread = sorted(set(rows) - set(in_code))
    assert not unread, f"docs/environment.md documents variables no code reads: {unread}"


def test_every_row_gives_a_default_and_a_meaning(rows):
    thin = sorted(n for n, cells in rows.items() if len(cells) < 2 or not all(cells[:2]))
    assert not thin, f"rows without a default or a meaning: {thin}"


def test_names_in_the_docs_are_read_by_the_code(in_code):
    stale = sorted(f"{name} ({page.relative_to(ROOT)})" for page in _doc_pages()
                   for name in tokens(page.read_text(encoding="utf-8"))
                   if name not in in_code)
    assert not stale, f"the docs name variables no code reads: {stale}"


def test_not_env_names_are_never_read_from_the_environment():
    read = set()
    for path in _code_files():
        read |= set(_ENV_CALL.findall(path.read_text(encoding="utf-8", errors="replace")))
    assert not read & set(NOT_ENV), "a NOT_ENV name is read from the environment: document it"


def test_the_cpp_core_reads_variables_only_through_settings():
    # csrc/settings parses every TORCHTPU_* variable by one rule; a direct
    # getenv elsewhere would bring back a rule of its own.
    direct = re.compile(r"getenv\(\s*\"_?TORCHTPU_")
    offenders = [
        str(path.relative_to(ROOT)) for path in _code_files()
        if path.suffix in (".cc", ".h") and "csrc/settings" not in str(path)
        and "csrc/tests" not in str(path) and direct.search(path.read_text())
    ]
    assert offenders == []


def test_relative_links_lead_somewhere():
    bad = {page.relative_to(ROOT).as_posix(): broken_links(page) for page in _doc_pages()}
    bad = {page: b for page, b in bad.items() if b}
    assert not bad, f"broken links: {bad}"


# The checks above pass vacuously if the scanners find nothing; these pin them.

def test_scanner_finds_known_reads(in_code):
    # Read in C++ (runtime.cc), in Python through a helper (config.py), in shell
    # (run_tests.sh), in setup.py, and a private test hook (tools/fuzz.py).
    for name in ("TORCHTPU_EAGER_MODE", "TORCHTPU_RECOMPILE_WARN", "TORCHTPU_TEST_MODE",
                 "TORCHTPU_BUILD_JOBS", "_TORCHTPU_FUZZ_ABORT_SEED"):
        assert name in in_code, name
    assert "TORCHTPU_PACKAGE_DIR" not in in_code  # a CMake definition in setup.py
    assert tokens("-DTORCHTPU_X=1 `TORCHTPU_Y` TORCHTPU_* _TORCHTPU_Z") == {
        "TORCHTPU_Y", "_TORCHTPU_Z"}


def test_link_checker_flags_a_missing_file(tmp_path):
    (tmp_path / "there.md").write_text("# A heading: with `code`\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md) [ok](there.md#a-heading-with-code) [web](https://x.y)\n"
                    "[gone](missing.md) [bad anchor](there.md#nope) `[code](ignored.md)`\n"
                    "```\n[fenced](ignored.md)\n```\n")
    assert broken_links(page) == ["missing.md (no such file)",
                                  "there.md#nope (no heading #nope in there.md)"]


def named_test_paths(text):
    """The repository paths ``tests/...py`` and ``tests/...txt`` a text names."""
    return set(re.findall(r"(?<![\w/.])tests/[\w/]+\.(?:py|txt)", text))


def test_named_test_files_exist():
    # Test files move (tests by capability); every path the docs, the scripts,
    # the benchmarks and the code comments name must still lead to a file.
    sources = [*_doc_pages(), *(ROOT / "docs").glob("*.md"), *(ROOT / "csrc").rglob("*.md"),
               *(ROOT / "scripts").glob("*.sh"), *(ROOT / "bench").glob("*.py"),
               *(ROOT / "torchtpu").rglob("*.py"), *(ROOT / "tests").rglob("*.py"),
               *(ROOT / "csrc").rglob("*.cc"), *(ROOT / "csrc").rglob("*.h")]
    missing = sorted(f"{path} ({src.relative_to(ROOT)})" for src in set(sources)
                     for path in named_test_paths(src.read_text(encoding="utf-8"))
                     if not (ROOT / path).exists())
    assert not missing, missing
    assert named_test_paths("see tests/ops/test_pool.py, not xtests/a.py") == {
        "tests/ops/test_pool.py"}

"""The C++ build compiles several files of a target as one unit (CMake's unity
build, TORCHTPU_UNITY_BATCH in CMakeLists.txt). Names in a file's anonymous
namespace then share one scope with its neighbours': the same name in two
files fails to compile, or, worse, a call meant for a header's function of
that name quietly takes the other file's. Which files are neighbours depends
on the batch size and on every file added, so each name defined in an
anonymous namespace must be unique in its target and must not be the name of
a free function its target's headers declare."""

import re
from collections import defaultdict
from pathlib import Path

CSRC = Path(__file__).resolve().parents[2] / "csrc"

# One CMake target each: _C takes aten/ (rules/ included), python/ and
# distributed/; every other folder is its own library.
TARGETS = {
    "_C": ["aten/**/*", "python/*", "distributed/*"],
    **{lib: [f"{lib}/*"] for lib in ("settings", "pjrt", "ir", "stablehlo", "cache", "runtime")},
}

_TYPE = r"[\w:]+(?:<.*?>)?(?:\s*[*&])*"
_QUALIFIERS = r"^(?:(?:static|inline|constexpr|const|thread_local)\s+)*"
_DEFINITION = re.compile(_QUALIFIERS + _TYPE + r"\s+[*&]?(\w+)\s*[(\[={;]")
_TYPE_NAME = re.compile(r"^(?:struct|class|union)\s+(\w+)")
_ENUM = re.compile(r"^enum\s+(class\s+|struct\s+)?(\w+)[^{]*\{([^}]*)")
_DECLARATION = re.compile(r"^(?:(?:inline|constexpr|static)\s+)*" + _TYPE + r"\s+[*&]?(\w+)\s*\(")
_NOT_A_NAME = {"if", "for", "while", "switch", "return", "operator", "namespace"}


def anonymous_names(text):
    """Names defined at column 0 inside `namespace {` ... `}  // namespace`:
    functions, variables, types, an unscoped enum's values, and aliases as
    "Name = type;" (a name and what it stands for, namespaces left out)."""
    names, inside = set(), False
    for line in text.splitlines():
        if re.match(r"^namespace\s*\{(?!\s*\})", line):
            inside = True
        elif inside and re.match(r"^\}\s*//\s*namespace\s*$", line):
            inside = False
        elif inside and line[:1].isalpha() and not line.startswith(("template", "using namespace")):
            enum = _ENUM.match(line)
            if enum:
                names.add(enum.group(2))
                if not enum.group(1):
                    names.update(re.findall(r"(\w+)\s*(?:=[^,]*)?(?:,|$)", enum.group(3)))
                continue
            alias = re.match(r"^using\s+(\w+)\s*=(.*)", line)
            if alias:  # the same alias twice is allowed; another type under its name is not
                names.add(alias.group(1) + " =" + re.sub(r"\b\w+::", "", alias.group(2)))
                continue
            kind = _TYPE_NAME.match(line) or _DEFINITION.match(line)
            if kind:
                names.update(n for n in kind.groups() if n and n not in _NOT_A_NAME)
    return names


def files_of(target, suffix):
    return sorted({p for pattern in TARGETS[target] for p in CSRC.glob(pattern + suffix)})


def test_anonymous_names_unique_in_each_target():
    problems = []
    for target in TARGETS:
        defined = defaultdict(list)
        for path in files_of(target, ".cc"):
            for name in anonymous_names(path.read_text()):
                defined[name].append(path.relative_to(CSRC).as_posix())
        # An alias is a name, too: two different types under one name clash.
        aliases = defaultdict(set)
        for entry in defined:
            if " =" in entry:
                aliases[entry.split(" =")[0]].add(entry)
        for name, forms in aliases.items():
            if len(forms) > 1:
                problems.append(f"{target}: alias {name} of {len(forms)} types: {sorted(forms)}")
        declared = {}
        for path in files_of(target, ".h"):
            for line in path.read_text().splitlines():
                m = _DECLARATION.match(line)
                if m and m.group(1) not in _NOT_A_NAME:
                    declared.setdefault(m.group(1), path.relative_to(CSRC).as_posix())
        for name, where in sorted(defined.items()):
            if " =" in name:
                name = name.split(" =")[0]
            elif len(where) > 1:
                problems.append(f"{target}: {name} in {', '.join(where)}")
            if name in declared:
                problems.append(f"{target}: {name} in {where[0]} and declared in {declared[name]}")
    assert not problems, "names a unity build would mix up:\n" + "\n".join(problems)


def test_the_check_sees_each_kind_of_name():
    # The parser behind the check above, on one sample of each form.
    text = """namespace ttpu::aten {
namespace {
constexpr int64_t kLimit = 3;
std::vector<std::pair<int, int>> pairs_of(int n) {
  return {};
}
enum Mode : int64_t { kFirst = 0, kSecond };
enum class Scoped { kHidden };
struct Window {
  int inside;
};
using Dims = std::vector<int64_t>;
RegisterLowering r_op("op", op);
}  // namespace
int outside() { return 0; }
}  // namespace ttpu::aten
"""
    assert anonymous_names(text) == {"kLimit", "pairs_of", "Mode", "kFirst", "kSecond", "Scoped",
                                     "Window", "Dims = vector<int64_t>;", "r_op"}

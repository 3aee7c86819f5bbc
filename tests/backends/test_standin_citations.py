"""Every rule of a stand-in cites its source (issue 31 item 11c): each refusal site of the host AIE API
(tests/aie_host/aie_api/aie.hpp: host::fail, static_assert, #error), the IRON stand-in (tests/iron_recorder.py:
raise), the aiecc stand-in (tests/fake_aiecc.py: raise, exit 1) and the pyxrt stand-in (tests/fake_pyxrt.py:
raise) has a source next to it, so that a new rule cannot go uncited.

A site is cited when one of these names a file (a path with its extension, e.g. detail/aie2p/array_helpers.hpp or
AIEDialect.cpp, with a line or commit where known), a PR or issue (#1234), a manual (UG1583, AM020) or a commit
(@2b7eedf): the site's own lines and the few above it; the comment block or docstring of the function, struct or
class that holds it (a rule documented once for its whole function); or, for the IRON stand-in, the refusal table
tests/data/iron_1_4_3_refusals.json, whose entry with the site's message names where 1.4.3 says it. A site whose
message or comment says what it refuses is unpublished ("... is unpublished") or only the stand-in's own limit
("the host models ... only", "the stand-in's own") is not a rule of the real tool, and says so instead.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).parents[1]
CITATION = re.compile(r"[\w./-]+\.(?:hpp|h|cpp|cc|td|py|mlir|json|html|md|txt|toml)\b|\bPR #\d+|#\d{3,}|"
                      r"\b(?:UG|AM)\d{3,4}\b|@[0-9a-f]{7,}")
NOT_A_RULE = re.compile(r"unpublished|the host models|stand-in's own")
ABOVE = 6  # lines above a site that count as next to it


def _cited(text: str) -> bool:
    return bool(CITATION.search(text))


# ---- C++: the host AIE API ---------------------------------------------------------------------------------
CPP_SITE = re.compile(r"\bfail\(|static_assert\(|^#error")


def _cpp_comment_above(lines: list[str], at: int) -> str:
    """The contiguous comment lines right above line `at` (and any template line between)."""
    out = []
    i = at - 1
    while i >= 0 and (lines[i].strip().startswith(("//", "template")) or not lines[i].strip()):
        if not lines[i].strip() and out:
            break
        out.append(lines[i])
        i -= 1
    return "\n".join(out)


def _cpp_enclosing(lines: list[str], at: int) -> list[int]:
    """Lines of the declarations enclosing line `at` (by brace depth): each function or struct header."""
    heads, depth = [], 0
    for i in range(at, -1, -1):
        line = re.sub(r"//.*|\"(?:\\.|[^\"\\])*\"", "", lines[i])
        depth += line.count("}") - line.count("{")
        if depth < 0:  # an opening brace of a block holding the site
            heads.append(i)
            depth = 0
    return heads


def cpp_uncited(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    bad = []
    for at, line in enumerate(lines):
        code = line.split("//")[0]
        if not CPP_SITE.search(code.strip()) or "inline void fail(" in code:
            continue
        near = "\n".join(lines[max(0, at - ABOVE): at + 3])
        if _cited(near) or NOT_A_RULE.search(near):
            continue
        if any(_cited(lines[h] + "\n" + _cpp_comment_above(lines, h)) for h in _cpp_enclosing(lines, at)):
            continue
        bad.append(f"{path.name}:{at + 1}: {line.strip()[:90]}")
    return bad


# ---- Python: the IRON, aiecc and pyxrt stand-ins -----------------------------------------------------------
def _literal_stem(node: ast.AST) -> str:
    """The first literal text of a raise's message (up to its first placeholder)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.strip():
            return sub.value.split("{")[0].strip()
    return ""


def _refusal_stems() -> list[str]:
    table = json.loads((TESTS / "data" / "iron_1_4_3_refusals.json").read_text())["refusals"]
    return [s for s in (r["message"].split("{")[0].strip() for r in table if r.get("source")) if len(s) >= 8]


def py_uncited(path: Path, table: list[str] | None = None) -> list[str]:
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    sites = [n for n in ast.walk(tree) if isinstance(n, ast.Raise) and n.exc is not None]
    sites += [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (ast.unparse(n.func) == "sys.exit" and n.args and ast.unparse(n.args[0]) == "1")
        or ast.unparse(n.func) == "fail")]  # fake_aiecc's exits
    bad = []
    for site in sites:
        at = site.lineno - 1
        near = "\n".join(lines[max(0, at - ABOVE): getattr(site, "end_lineno", at + 1)])
        if _cited(near) or NOT_A_RULE.search(near):
            continue
        stem = _literal_stem(site)
        if table is not None and stem and any(s.startswith(stem[:30]) or stem.startswith(s[:30]) for s in table):
            continue
        node: ast.AST | None = site
        documented = False
        while node is not None and not documented:
            node = parents.get(node)
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node) or ""
                first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
                comments = _py_comment_above(lines, first - 1)
                documented = _cited(doc + "\n" + comments)
        if not documented:
            bad.append(f"{path.name}:{site.lineno}: {lines[at].strip()[:90]}")
    return bad


def _py_comment_above(lines: list[str], at: int) -> str:
    out = []
    i = at - 1
    while i >= 0 and lines[i].strip().startswith("#"):
        out.append(lines[i])
        i -= 1
    return "\n".join(out)


STANDINS = {
    "aie.hpp": lambda: cpp_uncited(TESTS / "aie_host" / "aie_api" / "aie.hpp"),
    "iron_recorder.py": lambda: py_uncited(TESTS / "iron_recorder.py", _refusal_stems()),
    "fake_aiecc.py": lambda: py_uncited(TESTS / "fake_aiecc.py"),
    "fake_pyxrt.py": lambda: py_uncited(TESTS / "fake_pyxrt.py"),
}


@pytest.mark.parametrize("name", STANDINS)
def test_every_refusal_cites_its_source(name: str) -> None:
    bad = STANDINS[name]()
    assert not bad, f"{len(bad)} refusal site(s) without a source next to them:\n" + "\n".join(bad)


def test_the_check_finds_an_uncited_rule(tmp_path: Path) -> None:
    """A rule added without a source fails the check; the same rule with one passes."""
    cpp = tmp_path / "aie.hpp"
    cpp.write_text("inline void f(int x) {\n  if (x) host::fail(\"x must be 0\");\n}\n")
    assert cpp_uncited(cpp)
    cpp.write_text("// REQUIRES(x == 0): detail/aie2/accum.hpp line 12 @2b7eedf\n"
                   "inline void f(int x) {\n  if (x) host::fail(\"x must be 0\");\n}\n")
    assert not cpp_uncited(cpp)
    py = tmp_path / "standin.py"
    py.write_text("def f(x):\n    if x:\n        raise ValueError('x must be 0')\n")
    assert py_uncited(py)
    py.write_text("def f(x):\n    if x:\n        raise ValueError('x must be 0')  # pyxrt.cpp line 40 @0123abc\n")
    assert not py_uncited(py)

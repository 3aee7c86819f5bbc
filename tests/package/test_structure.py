"""The package's imports go one way (issue 19, docs/structure.md): every module of gemm_gen is parsed
with `ast`, imports inside functions included, and each import of the package's own code is mapped to
its unit (a sub-package such as `backends`, or a root module such as `config`). The units form no
circle, at most MAX_INSIDE_FUNCTIONS imports hide inside functions, no unit imports a unit of a
higher layer (LAYERS), and a fenced sub-package (FENCED: the model's fitting) is imported only from the
modules its entry allows. Each check is also run on small synthetic packages that break it."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "gemm_gen"
MAX_INSIDE_FUNCTIONS = 10
# Folders of the layers whose modules (and sub-packages) are units of their own: facts.dtypes, spec.rules, spec.config.
# Every other folder (design, sim, backends, model, search, app, llm) is one unit; so is a root module (version).
FOLDERS = frozenset({"facts", "spec"})
# Bottom to top, the pipeline: facts -> spec (request -> rules -> config) -> design -> its readers -> search -> app.
# A unit imports units of lower layers only. The units of a layer in BAGS (small modules that build on each other)
# may also import each other, the circle check keeping them in an order; units that share any other layer never
# do: the simulator, the back ends and the model each read the design and nothing of one another. Each folder's
# units fill consecutive layers, so that the folders show the pipeline (test_each_folder_is_a_band_of_layers).
LAYERS: tuple[tuple[str, ...], ...] = (
    # facts: hardware, types, numerics, errors, file writing; weight formats (llm: files -> QuantB); the version
    ("facts.accuracy", "facts.atomic", "facts.bfp16", "facts.devices", "facts.dtypes", "facts.epilogue",
     "facts.epilogue_args", "facts.errors", "facts.groupquant", "facts.inputs", "facts.l1_layout", "facts.lanes",
     "facts.numerics", "facts.precision", "facts.quant_b", "facts.rounding", "llm", "version"),
    ("spec.request",),  # what a user asks for: Problem, Options, Tiling, Pins, Request (only what was given)
    ("spec.rules",),  # every legality and size rule once, and the DMA walks the limits apply to
    ("spec.call", "spec.checks", "spec.config"),  # a finished config, its checks, its call plan
    ("design",),  # the Design built from a config, its DMA walks (tap), L1 plan, host buffers
    ("sim", "backends", "model"),  # the design's readers: simulated, built and run (kernel sources too), priced
    ("search",),  # choosing a design: the space of candidates, the model over them
    ("app",),  # the CLI, the operator, flags <-> config, text renderers, the wiring of runner and model
    ("__init__",),  # the package's front door: it re-exports the operator
)
BAGS = frozenset({0, 2, 3})
# Sub-packages inside a unit that only some modules may import (dotted below the package: each key is
# imported only from within itself or the prefixes of its value). The model's fitting and the papers'
# data serve `gemm-gen calibrate`, `roofline` and `make validate`'s sweep; the pipeline that prices and
# chooses (model's pricing, search, design, sim, back ends) never reads them.
FENCED: dict[str, frozenset[str]] = {"model.fit": frozenset({"app"})}


@dataclass(frozen=True)
class Import:
    """One import of the package's own code: from which unit to which, where, and whether it sits
    inside a function."""

    source: str
    target: str
    where: str  # path:line
    inside_function: bool
    module: str  # the importing module and the imported one, dotted below the package
    imported: str


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    """The dotted name of a module under `root` (the package directory) and whether it is a package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def unit_of(module: str, package: str, folders: frozenset[str] = FOLDERS) -> str:
    """A sub-package or root module: the first name below the package, or inside a folder of FOLDERS the first two
    (facts.dtypes, spec.rules); the package itself is __init__."""
    parts = module.split(".")
    if len(parts) > 2 and parts[0] == package and parts[1] in folders:
        return f"{parts[1]}.{parts[2]}"
    return parts[1] if len(parts) > 1 and parts[0] == package else "__init__"


def below(module: str, package: str) -> str:
    """A module's dotted name below the package ("" for the package itself)."""
    return module.removeprefix(package).removeprefix(".")


def within(module: str, prefix: str) -> bool:
    """Whether a dotted module name is `prefix` or lies inside it."""
    return module == prefix or module.startswith(prefix + ".")


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, root: Path) -> list[str]:
    """The package's own modules an import statement names (absolute dotted names)."""
    package = root.name
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == package]
    if node.level:
        base = module.split(".")[: len(module.split(".")) - (node.level - 1 if is_package else node.level)]
        named = ".".join(base + ([node.module] if node.module else []))
    else:
        named = node.module or ""
    if named.split(".")[0] != package:
        return []
    found = []
    for alias in node.names:  # `from pkg import sub` names a module; `from pkg import Name` the package
        sub = root.parent.joinpath(*f"{named}.{alias.name}".split("."))
        found.append(f"{named}.{alias.name}" if sub.is_dir() or sub.with_suffix(".py").exists() else named)
    return found


def imports(root: Path) -> list[Import]:
    """Every import of the package's own code in the package under `root`, between different units."""
    out: list[Import] = []
    for path in sorted(root.rglob("*.py")):
        module, is_package = _module_name(path, root)
        tree = ast.parse(path.read_text(), str(path))
        inside: set[ast.AST] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                inside.update(ast.walk(fn))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in dict.fromkeys(_targets(node, module, is_package, root)):
                source, to = unit_of(module, root.name), unit_of(target, root.name)
                where = f"{path.relative_to(root.parent)}:{node.lineno}"
                out.append(Import(source, to, where, node in inside, below(module, root.name),
                                  below(target, root.name)))
    return out


def circles(found: list[Import]) -> list[set[str]]:
    """The strongly connected groups of two or more units (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for i in found:
        if i.source != i.target:
            graph.setdefault(i.source, set()).add(i.target)
            graph.setdefault(i.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def circle_report(group: set[str], found: list[Import]) -> str:
    """A circle's members and the import lines that close it."""
    lines = [f"  {i.where}: {i.source} -> {i.target}" for i in found
             if i.source in group and i.target in group and i.source != i.target]
    return f"circle {sorted(group)}:\n" + "\n".join(lines)


def upward(found: list[Import], layers: tuple[tuple[str, ...], ...], bags: frozenset[int] = frozenset({0})
           ) -> list[str]:
    """Imports of a unit from a higher layer (or, outside the layers in `bags`, from its own layer),
    and units the table does not place."""
    layer_of = {unit: n for n, units in enumerate(layers) for unit in units}
    bad = []
    for i in found:
        if i.source == i.target:
            continue
        if i.source not in layer_of or i.target not in layer_of:
            unplaced = i.source if i.source not in layer_of else i.target
            bad.append(f"{i.where}: {unplaced} is in no layer (add it to LAYERS)")
        elif layer_of[i.target] > layer_of[i.source] or (layer_of[i.target] == layer_of[i.source]
                                                          and layer_of[i.source] not in bags):
            bad.append(f"{i.where}: {i.source} (layer {layer_of[i.source]}) imports {i.target} "
                       f"(layer {layer_of[i.target]})")
    return bad


def fence_breaches(found: list[Import], fenced: dict[str, frozenset[str]]) -> list[str]:
    """Imports of a fenced sub-package from a module that is neither inside it nor allowed in."""
    bad = []
    for i in found:
        for inner, allowed in sorted(fenced.items()):
            if within(i.imported, inner) and not any(within(i.module, where) for where in {inner, *allowed}):
                bad.append(f"{i.where}: {i.module} imports {i.imported} (only {', '.join(sorted(allowed))} "
                           f"and {inner} itself may)")
    return bad


def inside_functions(found: list[Import]) -> list[str]:
    """Where the package's own imports sit inside functions (one line per statement)."""
    return sorted({i.where for i in found if i.inside_function})


# ---- the package ---------------------------------------------------------------------------------------
def test_the_units_form_no_circle():
    found = imports(PACKAGE)
    found_circles = circles(found)
    assert not found_circles, "\n".join(circle_report(group, found) for group in found_circles)


def test_few_imports_hide_inside_functions():
    where = inside_functions(imports(PACKAGE))
    assert len(where) <= MAX_INSIDE_FUNCTIONS, "imports inside functions (hoist them):\n" + "\n".join(where)


def test_no_unit_imports_a_higher_layer():
    bad = upward(imports(PACKAGE), LAYERS, BAGS)
    assert not bad, "imports against the layers (docs/structure.md):\n" + "\n".join(bad)


def test_fenced_subpackages_are_imported_only_where_allowed():
    bad = fence_breaches(imports(PACKAGE), FENCED)
    assert not bad, "imports of a fenced sub-package (docs/structure.md):\n" + "\n".join(bad)


def test_every_fence_names_a_subpackage():
    for inner in FENCED:
        assert (PACKAGE / inner.replace(".", "/") / "__init__.py").exists(), inner


def test_every_unit_is_in_one_layer():
    units = {unit_of(_module_name(p, PACKAGE)[0], PACKAGE.name) for p in PACKAGE.rglob("*.py")} - set(FOLDERS)
    placed = [unit for layer in LAYERS for unit in layer]
    assert len(placed) == len(set(placed)) and set(placed) == units, (sorted(units - set(placed)),
                                                                     sorted(set(placed) - units))


def test_a_folder_of_units_holds_no_code_of_its_own():
    """facts/ and spec/ are folders, not units: their __init__ is a docstring, so importing one loads nothing."""
    for folder in FOLDERS:
        body = ast.parse((PACKAGE / folder / "__init__.py").read_text()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), folder


def bands(layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Folders whose units do not fill consecutive layers, or whose layers interleave with another folder's (two
    folders may share one layer: the design's readers)."""
    span: dict[str, list[int]] = {}
    for n, units in enumerate(layers):
        for unit in units:
            span.setdefault(unit.split(".")[0], []).append(n)
    bad = [f"{f} fills layers {sorted(set(ns))}, not consecutive ones" for f, ns in sorted(span.items())
           if sorted(set(ns)) != list(range(min(ns), max(ns) + 1))]
    ranges = {f: (min(ns), max(ns)) for f, ns in span.items()}
    for f, (lo, hi) in sorted(ranges.items()):
        for g, (lo2, hi2) in sorted(ranges.items()):
            if f < g and lo <= hi2 and lo2 <= hi and not (lo == hi == lo2 == hi2):
                bad.append(f"{f} (layers {lo}-{hi}) and {g} (layers {lo2}-{hi2}) interleave")
    return bad


def test_each_folder_is_a_band_of_layers():
    assert not bands(LAYERS), bands(LAYERS)


# ---- the checks themselves, on synthetic packages ----------------------------------------------------
def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"__init__.py": "", **files}.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_circle_is_reported_with_the_lines_that_close_it(tmp_path):
    pkg = _package(tmp_path, {"low.py": "def f():\n    from .high import g\n", "high.py": "from . import low\n",
                              "free.py": "from pkg.low import f\n"})
    found = imports(pkg)
    assert circles(found) == [{"high", "low"}]
    text = circle_report({"high", "low"}, found)
    assert "pkg/low.py:2: low -> high" in text and "pkg/high.py:1: high -> low" in text and "free" not in text


def test_a_circle_through_a_subpackage_is_one_unit(tmp_path):
    pkg = _package(tmp_path, {"sub/__init__.py": "", "sub/a.py": "from ..root import x\n",
                              "sub/b.py": "import pkg.sub.a\n", "root.py": "from .sub.b import y\n"})
    assert circles(imports(pkg)) == [{"root", "sub"}]


def test_imports_inside_functions_are_counted(tmp_path):
    a = "import os\n\ndef f():\n    from . import b\n    import json\n\ng = lambda: __import__('x')\n"
    b = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n"
         "class C:\n    def m(self):\n        from .a import f\n        from pkg import a\n")
    found = imports(_package(tmp_path, {"a.py": a, "b.py": b}))
    assert inside_functions(found) == ["pkg/a.py:4", "pkg/b.py:6", "pkg/b.py:7"]  # TYPE_CHECKING: module level


def test_an_upward_import_and_an_unplaced_unit_are_reported(tmp_path):
    pkg = _package(tmp_path, {"base.py": "from .top.x import y\n", "top/__init__.py": "from ..base import z\n",
                              "top/x.py": "", "side.py": "from .mid import m\n", "mid.py": "from .other import o\n",
                              "other.py": ""})
    bad = upward(imports(pkg), (("base",), ("mid", "other"), ("top", "side")))
    assert bad == ["pkg/base.py:1: base (layer 0) imports top (layer 2)",
                   "pkg/mid.py:1: mid (layer 1) imports other (layer 1)"]
    # a layer named in bags may import itself (the rest is judged as before)
    assert upward(imports(pkg), (("base",), ("mid", "other"), ("top", "side")), frozenset({1})) == bad[:1]
    assert upward(imports(pkg), (("base", "top"),)) == ["pkg/mid.py:1: mid is in no layer (add it to LAYERS)",
                                                        "pkg/side.py:1: side is in no layer (add it to LAYERS)"]


def test_an_import_through_a_fence_is_reported(tmp_path):
    pkg = _package(tmp_path, {
        "model/__init__.py": "", "model/fit/__init__.py": "", "model/fit/data.py": "",
        "model/fit/calib.py": "from . import data\nfrom ..price import p\n",  # inside the fence: free
        "model/price.py": "def p():\n    from .fit.data import rows\n",  # pricing reads the fitting
        "model/fitness.py": "",  # a name that starts like the fence is not inside it
        "search.py": "import pkg.model.fit.data\nfrom .model import fitness\n",
        "app/__init__.py": "", "app/cmd.py": "from ..model.fit import calib\nfrom pkg.model import fit\n"})
    found = imports(pkg)
    assert fence_breaches(found, {"model.fit": frozenset({"app"})}) == [
        "pkg/model/price.py:2: model.price imports model.fit.data (only app and model.fit itself may)",
        "pkg/search.py:1: search imports model.fit.data (only app and model.fit itself may)"]
    assert fence_breaches(found, {"model.fit": frozenset({"app", "model.price", "search"})}) == []


def test_a_folder_of_units_is_judged_module_by_module(tmp_path):
    pkg = _package(tmp_path, {"facts/__init__.py": "", "facts/low.py": "", "facts/high.py": "from .low import x\n",
                              "spec/__init__.py": "", "spec/rules/__init__.py": "", "spec/rules/a.py": "",
                              "spec/config.py": "from .rules import a\nfrom ..facts.high import y\n",
                              "design.py": "from .spec.config import c\n"})
    found = imports(pkg)
    assert {(i.source, i.target) for i in found} == {("facts.high", "facts.low"), ("spec.config", "spec.rules"),
                                                     ("spec.config", "facts.high"), ("design", "spec.config")}
    layers = (("facts.high", "facts.low"), ("spec.rules",), ("spec.config",), ("design",))
    assert upward(found, layers, frozenset()) == [
        "pkg/facts/high.py:1: facts.high (layer 0) imports facts.low (layer 0)"]
    assert upward(found, layers, frozenset({0})) == []
    assert upward(found, (("facts.high", "facts.low"), ("spec.config",), ("spec.rules",), ("design",)),
                  frozenset({0})) == ["pkg/spec/config.py:1: spec.config (layer 1) imports spec.rules (layer 2)"]
    assert bands(layers) == []
    assert bands((("facts.low",), ("spec.rules",), ("facts.high",))) == [
        "facts fills layers [0, 2], not consecutive ones", "facts (layers 0-2) and spec (layers 1-1) interleave"]


def test_the_checks_pass_a_clean_package(tmp_path):
    pkg = _package(tmp_path, {"base.py": "", "top.py": "from .base import x\n\ndef f():\n    import numpy\n"})
    found = imports(pkg)
    assert circles(found) == [] and inside_functions(found) == [] and upward(found, (("base",), ("top",))) == []

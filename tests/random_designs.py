"""How many random designs a run simulated, and of which option families (issue 33 item 5).

The random-design tests (hypothesis-driven and seeded) call `record` for each design they draw, after checking it:
"equal" (simulated, equal to its exact reference), "refused" (refused in one line before anything ran) or "caught"
(a design broken on purpose, whose error the simulator found). tests/conftest.py sums the counts over the
pytest-xdist workers and prints them at the end of the run, per test module and per option family.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from typing import Any

from gemm_gen.facts.devices import device
from gemm_gen.facts.precision import PRESETS

# the option families the issue names, in its order (a design belongs to every family it exercises)
FAMILIES = ("types", "accumulators", "layouts", "epilogues", "int4", "W4A16", "decode", "spans", "columns",
            "runtime sizes", "presets")
OUTCOMES = ("equal", "refused", "caught")

COUNTS: Counter[str] = Counter()  # "outcome|name|module", "family|name", "types|A x B -> C": this process's records
CPU = {"seconds": 0.0}  # CPU time of the tests that recorded designs (tests/conftest.py adds it up)


def drawn() -> int:
    """How many designs this process has recorded."""
    return sum(n for key, n in COUNTS.items() if key.startswith("outcome|"))


def record(outcome: str, families: Iterable[str], types: str) -> None:
    """One random design of the current test (`PYTEST_CURRENT_TEST` names it): its outcome, the option families
    it exercised and its type combination ("A x B -> C")."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome {outcome!r} is not one of {OUTCOMES}")
    test = os.environ.get("PYTEST_CURRENT_TEST", "outside a test").split("::")[0]
    COUNTS[f"outcome|{outcome}|{os.path.basename(test).removesuffix('.py')}"] += 1
    for family in families:
        if family not in FAMILIES:
            raise ValueError(f"family {family!r} is not one of {FAMILIES}")
        COUNTS[f"family|{family}"] += 1
    COUNTS[f"types|{types}"] += 1


def families_of(c: Any, calls: int = 1) -> set[str]:
    """The option families a GemmConfig exercises (`calls`: how many sizes it served in the test)."""
    fam = {"types"}
    ty = c.types
    preset = any((p.a, p.b, p.out, p.acc) == (ty.dtype_in, ty.dtype_b, ty.dtype_out, ty.acc) for p in PRESETS.values())
    checks = {
        "accumulators": c.types.acc != c.default_acc,
        "layouts": c.layout.a_col_maj or c.layout.b_col_maj or c.layout.c_col_maj,
        "epilogues": not c.epilogue.is_identity,
        "int4": c.types.dtype_b == "i4" and c.types.dtype_in == "i8",
        "W4A16": bool(c.groups.group_size),
        "decode": c.array.rows == 1,
        "spans": c.runtime.task_span != 1,
        "columns": c.array.cols < device(c.array.device).columns,
        "runtime sizes": c.runtime.runtime_sizes != "fixed" or calls > 1,
        "presets": preset,
    }
    return fam | {name for name, on in checks.items() if on}


def types_of(c: Any) -> str:
    return f"{c.types.dtype_in} x {c.types.dtype_b} -> {c.types.dtype_out}"


def record_config(c: Any, outcome: str = "equal", calls: int = 1) -> None:
    """`record` for a GemmConfig the test simulated (or refused, or broke on purpose)."""
    record(outcome, families_of(c, calls), types_of(c))


def _flag(argv: list[str], name: str) -> str | None:
    """The value of `name` on a command line (`--flag VALUE` or `--flag=VALUE`; "" for a bare switch), or None."""
    for i, arg in enumerate(argv):
        if arg == name:
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            return "" if nxt.startswith("-") and not nxt.lstrip("-").isdigit() else nxt
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def families_of_argv(argv: list[str]) -> tuple[set[str], str]:
    """The option families a gemm-gen command line asks for, and its type combination as given (flags left out
    are named by their defaults' words: "default")."""
    given = {flag: _flag(argv, flag) for flag in ("--acc", "--a-col-maj", "--b-col-maj", "--c-col-maj", "--bias",
                                                   "--activation", "--clamp", "--requant", "--dtype_in", "--dtype_b",
                                                   "--dtype_out", "--group-size", "--mapping", "--task-span",
                                                   "--n-aie-cols", "--runtime-sizes", "--preset")}
    t_in, t_b = given["--dtype_in"] or "bf16", given["--dtype_b"]
    checks = {
        "accumulators": given["--acc"] is not None,
        "layouts": any(given[f] in ("", "1") for f in ("--a-col-maj", "--b-col-maj", "--c-col-maj")),
        "epilogues": given["--bias"] is not None or given["--activation"] not in (None, "none")
        or given["--clamp"] is not None or given["--requant"] is not None,
        "int4": t_b == "i4" and t_in == "i8",
        "W4A16": t_b == "i4" and t_in == "bf16",
        "decode": given["--mapping"] in ("decode", "decode-split"),
        "spans": given["--task-span"] not in (None, "1"),
        "columns": given["--n-aie-cols"] is not None,
        "runtime sizes": given["--runtime-sizes"] is not None,
        "presets": given["--preset"] is not None,
    }
    types = (f"preset {given['--preset']}" if given["--preset"] else
             f"{t_in} x {t_b or t_in} -> {given['--dtype_out'] or 'default'}")
    return {"types"} | {name for name, on in checks.items() if on}, types


def summary(counts: dict[str, int], cpu_s: float) -> list[str]:
    """The end-of-run lines: designs per outcome and test module, then per option family, and the CPU time of the
    tests that drew them."""
    if not counts:
        return []
    by_outcome: dict[str, dict[str, int]] = {}
    for key, n in counts.items():
        kind, *rest = key.split("|")
        if kind == "outcome":
            by_outcome.setdefault(rest[0], {})[rest[1]] = n
    parts = []
    for outcome in OUTCOMES:
        modules = by_outcome.get(outcome, {})
        if modules:
            words = {"equal": "simulated, each equal to its exact reference", "refused": "refused in one line",
                     "caught": "broken on purpose and caught"}[outcome]
            ranked = sorted(modules.items(), key=lambda x: -x[1])
            each = ", ".join(f"{m.removeprefix('test_')} {n:,}" for m, n in ranked)
            parts.append(f"{sum(modules.values()):,} {words} ({each})")
    total = sum(sum(m.values()) for m in by_outcome.values())
    combos = sum(1 for key in counts if key.startswith("types|"))
    fams = ", ".join(f"{f} {counts.get(f'family|{f}', 0):,}" for f in FAMILIES)
    return [f"random designs: {total:,} in {cpu_s:.0f} s of CPU time (the tests that drew them): " + "; ".join(parts),
            f"random designs by option family: {fams} ({combos} type combinations)"]


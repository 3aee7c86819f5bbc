"""The objects with static storage a rendered kernel source defines, read from its text.

A module of its own, with nothing but the standard library: the tests' compiler stand-ins load it by its path to
say what an object file would hold, without loading the package."""

from __future__ import annotations

import math
import re

# The element sizes of the types our templates name (C_TYPES and the C spellings of their storage).
_C_SIZES = {"float": 4, "double": 8, "int": 4, "unsigned": 4, "int32": 4, "int32_t": 4, "uint32_t": 4, "int16": 2,
            "int16_t": 2, "uint16_t": 2, "int8": 1, "int8_t": 1, "uint8": 1, "uint8_t": 1, "char": 1,
            "unsigned char": 1, "bfloat16": 2}
# A variable with static storage: `static` (or thread_local) and not a function, static_assert or constexpr (a
# constexpr object needs storage only when its address is taken: our templates never take one); or an array
# defined at namespace scope (column 0 in a render). The type, the name and the array extents.
_STATIC = re.compile(r"(?m)^[ \t]*(?:alignas\(\s*\d+\s*\)\s*)?(?:static|thread_local)\s+(?!constexpr\b)"
                     r"(?:alignas\(\s*\d+\s*\)\s*)?(?:const\s+|volatile\s+)*"
                     r"(?P<type>[A-Za-z_][\w:]*(?:\s+[A-Za-z_]\w*)?)\s+\**(?P<name>[A-Za-z_]\w*)"
                     r"\s*(?P<dims>(?:\[[^\]]*\]\s*)*)(?:=|;|\{)")
_GLOBAL_ARRAY = re.compile(r"(?m)^(?!constexpr\b)(?:alignas\(\s*\d+\s*\)\s*)?(?:const\s+)?"
                           r"(?P<type>[A-Za-z_]\w*(?:\s+[A-Za-z_]\w*)?)\s+(?P<name>[A-Za-z_]\w*)"
                           r"\s*(?P<dims>(?:\[[^\]]*\]\s*)+)(?:=|;|\{)")


def static_data(source: str) -> tuple[tuple[str, int], ...]:
    """The objects with static storage a rendered kernel defines (its .data / .rodata / .bss, what aiecc's
    measured_data_size counts of it), (name, bytes) each, in source order. Comments are skipped; an object
    whose size cannot be read from the source is refused (ValueError)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", source, flags=re.S)
    out = []
    for m in sorted([*_STATIC.finditer(text), *_GLOBAL_ARRAY.finditer(text)], key=lambda m: m.start()):
        size = _C_SIZES.get(" ".join(m["type"].split()))
        dims = re.findall(r"\[([^\]]*)\]", m["dims"])
        if size is None or not all(d.strip().isdigit() for d in dims):
            raise ValueError(f"static object {m['name']}: its size cannot be read from the source "
                             f"({m['type']}{m['dims'].strip()})")
        out.append((m["name"], size * math.prod(int(d) for d in dims)))
    return tuple(out)

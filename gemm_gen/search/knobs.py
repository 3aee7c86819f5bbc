"""The discrete knobs as data, as Triton's list of `Config`s or CUTLASS's kernel descriptions: KNOBS
declares each option the search chooses when a request leaves it open (the kernel, the mapping, B's
packing, the task span), and `variants` lists every combination of the open ones the rules allow, one
frozen `Variant` each. The search gives every variant its own tiles (the tile space ranks them) and the
fastest predicted wins; on a tie the first in the list's order (each knob's values in its option row's
order: the emulated kernel before convert-once, the whole array before decode before decode-split,
tiles before strips). A new discrete knob is one entry of KNOBS (and one field of Variant).

A knob's values are its option row's (spec.OPTIONS: `choices`, or 0 / 1 for a bool); it is open when
the options do not give it (spec.given), the search weighs it for the call (`weighed`) and the rules
allow more than one of its values (`allows`, asked of the config with the knobs before it applied). A
knob `with_tiles` (the task span) is weighed per tiling inside the tile search itself (tune.py), so it
adds no variants; it is listed here so that what the search may fill is read from one place."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from itertools import product
from typing import Any

from ..spec.config import GemmConfig, b_packs
from ..spec.request import MAPPINGS, ROWS, Pins, given
from ..spec.rules import array, decode_split, shared_l1


def several_sizes(pins: Pins) -> bool:
    """Whether the pins ask for one design serving several sizes (search/tune_many.py)."""
    return pins.sizes is not None and len(set(pins.sizes)) > 1


def decode_weighed(base: GemmConfig, pins: Pins) -> bool:
    """Whether the search weighs the decode mappings against the whole array: a call it serves is decode
    shaped (M <= DECODE_M_MAX) on a device with more than one core row."""
    if base.dev.core_rows == 1:
        return False
    sizes = tuple(pins.sizes or ()) if several_sizes(pins) else (base.size,)
    return any(array.decode_call(s.M) for s in sizes)


def _split(c: GemmConfig) -> bool:
    return decode_split.is_split(c.dev, c.array.rows, c.array.cols)


def _map(c: GemmConfig, mapping: str) -> GemmConfig:
    """`c` in `mapping`: the whole array keeps the open rows (0), the decode mappings give one row, and the
    split placement its virtual columns (spec/rules/decode_split.py)."""
    if mapping == MAPPINGS[0]:
        return c
    cols = array.mapping_cols(c.dev, mapping)
    return c.with_(rows=array.mapping_rows(c.dev, mapping), **({"cols": cols} if cols else {}))


@dataclass(frozen=True)
class Knob:
    """One discrete option the search chooses: `name` (Variant's field, and what Choice.filled says),
    `option` (its row of spec.OPTIONS), whether the search weighs it for a config and pins, which of its
    values the rules allow for a config, and how a value is written into a config."""

    name: str
    option: str
    weighed: Callable[[GemmConfig, Pins], bool]
    allows: Callable[[GemmConfig, Any], bool]
    write: Callable[[GemmConfig, Any], GemmConfig]
    with_tiles: bool = False  # weighed per tiling by the tile search (tune.py), no variants of its own

    @property
    def values(self) -> tuple[Any, ...]:
        row = ROWS[self.option]
        return tuple(row.choices) if row.choices is not None else (False, True) if row.reader == "bool" else ()

    def left_open(self, c: GemmConfig) -> bool:
        """Whether the options leave it to the search (not given; for the mapping, nor the columns it fixes)."""
        return self.option not in given(c.options)


KNOBS: tuple[Knob, ...] = (
    # npu2 bf16 on the bfp16 datapath: the emulated kernel, or the one converting A and B once
    Knob("convert_once", "convert_once", lambda c, pins: c.convert_once_open, lambda c, v: True,
         lambda c, v: c.with_(convert_once=v)),
    # a decode-shaped call: the whole array, one core row, or the split placement where the columns are open
    Knob("mapping", "rows", decode_weighed,
         lambda c, v: not array.mapping_cols(c.dev, v) or c.options.cols == 0, _map),
    # a bfp16 or int4 B's DRAM packing (one design for several sizes keeps the default)
    Knob("b_pack", "b_pack", lambda c, pins: not several_sizes(pins),
         lambda c, v: v in b_packs(c.types.t_b, c.groups.group_size, _split(c)), lambda c, v: c.with_(b_pack=v)),
    # neighbour-shared L1 (spec/rules/shared_l1.py): weighed once every back end runs it (shared_l1.searchable),
    # each value where its rules place the buffers
    Knob("share_l1", "share_l1", lambda c, pins: shared_l1.searchable(),
         lambda c, v: c.with_(share_l1=v).shared_l1_problem is None, lambda c, v: c.with_(share_l1=v)),
    # output blocks per shim task: one, or spanned where the tiling's patterns allow (design/spans.py)
    Knob("task_span", "task_span", lambda c, pins: True, lambda c, v: True, lambda c, v: c, with_tiles=True),
)


@dataclass(frozen=True)
class Variant:
    """One combination of the discrete knobs a request leaves open: each field a knob's value (None:
    not open for this request, the options' own)."""

    convert_once: bool | None = None
    mapping: str | None = None
    b_pack: str | None = None
    share_l1: str | None = None

    def apply(self, c: GemmConfig) -> GemmConfig:
        """`c` with this variant's values written into its options."""
        for knob in KNOBS:
            value = getattr(self, knob.name, None)
            if value is not None:
                c = knob.write(c, value)
        return c

    @property
    def chosen(self) -> tuple[str, ...]:
        """The knobs this variant sets (what Choice.filled names), in KNOBS' order."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name) is not None)


def open_knobs(c: GemmConfig, pins: Pins) -> tuple[Knob, ...]:
    """The knobs of KNOBS that make variants for `c` (the request's config, tiling open) and `pins`: left
    open by the options and weighed for the call (whether the rules allow more than one value is asked
    per variant, by `variants`)."""
    return tuple(k for k in KNOBS if not k.with_tiles and k.left_open(c) and k.weighed(c, pins))


def variants(c: GemmConfig, pins: Pins) -> tuple[Variant, ...]:
    """Every combination of the open knobs' values the rules allow, in the order ties go (each knob's values
    in its row's order, the knobs in KNOBS' order). A knob whose rules allow only one value for a
    combination is not a choice there: it stays the options' own (None). (Variant(),) when nothing is open."""
    out: list[Variant] = []
    knobs = open_knobs(c, pins)
    for combo in product(*(k.values for k in knobs)):
        v, cur, ok = Variant(), c, True
        for knob, value in zip(knobs, combo):
            allowed = [x for x in knob.values if knob.allows(cur, x)]
            if value not in allowed:
                ok = False
                break
            if len(allowed) > 1:
                v, cur = replace(v, **{knob.name: value}), knob.write(cur, value)
        if ok and v not in out:
            out.append(v)
    return tuple(out)

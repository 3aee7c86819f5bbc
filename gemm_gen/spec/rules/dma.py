"""The BD bounds: how far one dimension of a buffer descriptor can count, per tile kind.

The limits are facts.devices' DMA field widths (DmaSpec). mlir-aie 1.4.3's verifier applies a static
(memtile or core) BD's fields to its dims in elements of the buffer's type (tap.Tap.check_static_bd);
a shim BD counts its wraps in 32-bit words (tap.WordTap.check). The design's checks call
`static_size_ok`, `static_stride_max` and `wrap_ok`; the tuner bounds its tile extents with
`static_extent_max` and `shim_extent_max`, which are the same limits solved for the extent.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...facts.devices import DmaSpec, TileKind
from ...facts.dtypes import WORD_BYTES, DType, dtype
from ...facts.errors import DmaLimitError, GemmGenError
from . import Ints


def wrap_ok(spec: DmaSpec, size: Ints) -> Ints:
    """Whether a wrapped dimension of `size` counts (words on a shim, elements on static BDs) fits
    the tile kind's wrap field."""
    return np.asarray(size) <= spec.max_wrap if isinstance(size, np.ndarray) else size <= spec.max_wrap


def static_size_ok(spec: DmaSpec, size: Ints) -> Ints:
    """mlir-aie's verifier of a memtile or core BD: a dim's size in elements within the wrap field."""
    return wrap_ok(spec, size)


def static_stride_max(spec: DmaSpec, buffer_elems: int) -> int:
    """mlir-aie's verifier of a memtile or core BD: the largest stride in elements, within the step
    field and within the buffer."""
    return min(spec.max_stride, buffer_elems)


def static_extent_max(spec: DmaSpec, unit: int) -> int:
    """The largest extent (in elements) a static BD dim can walk in steps of `unit` elements (e.g.
    an A tile's m rows in r-row blocks): the largest size `static_size_ok` accepts, times unit."""
    return spec.max_wrap * unit


def run_bytes(dtype_name: str) -> float:
    """DRAM bytes per column of one contiguous run of an operand: its element size, or for bfp16
    a tile's column of 8 rows (tiles are stored whole, 72 bytes for 8 columns)."""
    t = dtype(dtype_name)
    return t.unit_bytes / t.tile_cols


def packed_words(t: DType, count: Ints) -> Ints:
    """Whether a run of `count` half-byte values is whole 32-bit words of them (any run of other types is)."""
    return count % t.unit_elems == 0 if t.is_packed else count == count


def byte_words(t: DType, count: Ints) -> Ints:
    """Whether a run of `count` values of `t` is whole 32-bit words of bytes (bfp16 moves in 72-byte tiles, whole
    words always)."""
    return count == count if t.is_block else t.nbytes(count) % WORD_BYTES == 0


def shim_extent_max(spec: DmaSpec, dtype_name: str) -> int:
    """The most columns of an operand one shim wrap (counted in words) can cover: the largest
    extent `wrap_ok` accepts once converted to words."""
    return int(spec.max_wrap * WORD_BYTES // run_bytes(dtype_name))


# ---- a BD's fields against a walk, over one walk or a whole array of candidate walks ------------------------
# A walk is written as tap.Tap writes it (offset; sizes and strides outermost first, in units of its operand's
# type), with ints, or NumPy arrays holding one value per candidate design. Each rule below returns the limits
# a walk must keep, in the order the design's check raises them: `Limit.ok` says per candidate whether it
# keeps one, `Limit.what(i)` says for candidate i what broke (the value and the limit). design/patterns.py's
# check raises the first broken one of one design; the search space (gemm_gen/search/space.py) keeps the candidates
# that keep them all.


class Walk(NamedTuple):
    """offset, sizes, strides of a DMA walk (outermost first), each an int or one array per candidate."""

    offset: Ints
    sizes: tuple[Ints, ...]
    strides: tuple[Ints, ...]

    @classmethod
    def linear(cls, length: Ints, offset: Ints = 0) -> Walk:
        return cls(offset, (length,), (1,))


class Limit(NamedTuple):
    """One limit a walk keeps per candidate (`ok`), what breaking it means (`text`, formatted with candidate i's
    `values` only when asked: `what(i)`), the fix to offer (None: the walk's own) and the error it raises."""

    ok: Ints
    text: str
    values: tuple[object, ...] = ()
    fix: str | None = None
    error: type[GemmGenError] = DmaLimitError

    def what(self, i: int = 0) -> str:
        return self.text.format(*(v[i] if isinstance(v, np.ndarray) and v.ndim else v for v in self.values))


# what a broken limit says (Limit.text), filled in when one is raised
UNIT_WORDS = "{} units of {} bytes are not whole 32-bit words"
INNER_STRIDE = "innermost stride {} on {} data splits 32-bit words"
INNER_RUN = "innermost run of {} x {} at offset {} is not whole 32-bit words"
OUTER_STRIDE = "stride {} x {} of dimension {} is not whole 32-bit words"
DIMS = "{}: {} address dimensions, a {} DMA has {}{}"
WRAP = "{}: d{} wrap {} words exceeds the {}-bit field of a {} BD (max {})"
STRIDE = "{}: d{} stride {} words exceeds the {}-bit field of a {} BD (1..{})"
LENGTH = "{}: length {} words exceeds the {}-bit field of a {} BD (max {})"
REPEAT = "{}: repeat {} exceeds the {} repeat count (max {})"
ITERATION_WRAP = "{}: iteration wrap {} exceeds the 6-bit field (max {})"
ITERATION_STRIDE = "{}: iteration stride {} words exceeds the {}-bit field (max {})"
STATIC_SIZE = "{}: d{} size {} elements exceeds mlir-aie's BD verifier limit for a {} BD (max {})"
STATIC_STRIDE = "{}: d{} stride {} elements exceeds mlir-aie's BD verifier limit for a {} BD (max {})"


def at(x: Ints, i: int) -> int:
    """Candidate i's value of an int or an array."""
    return int(x[i]) if isinstance(x, np.ndarray) and x.ndim else int(x)


def pick(cond: Ints, yes: Ints, no: Ints) -> Ints:
    """np.where for arrays, a plain choice for one design."""
    if isinstance(cond, np.ndarray) or isinstance(yes, np.ndarray) or isinstance(no, np.ndarray):
        return np.where(cond, yes, no)
    return yes if cond else no


def _all(conds: list[Ints]) -> Ints:
    out: Ints = True
    for c in conds:
        out = out & c
    return out


def is_linear(walk: Walk) -> Ints:
    """Whether the walk is units 0, 1, 2, ... (a DMA then needs no dims at all)."""
    expect: Ints = 1
    ok: Ints = walk.offset == 0
    for size, stride in zip(walk.sizes[::-1], walk.strides[::-1]):
        ok = ok & ((size <= 1) | (stride == expect))
        expect = expect * size
    return ok


def count(walk: Walk) -> Ints:
    """Units the walk moves."""
    out: Ints = 1
    for size in walk.sizes:
        out = out * size
    return out


def flattened(walk: Walk) -> Walk:
    """The walk, with a linear one written as one dimension (what its BD programs), the dimension count kept: a
    linear candidate's outer dimensions become units of stride 0."""
    lin = is_linear(walk)
    sizes = tuple(pick(lin, 1, s) for s in walk.sizes[:-1]) + (pick(lin, count(walk), walk.sizes[-1]),)
    strides = tuple(pick(lin, 0, s) for s in walk.strides[:-1]) + (pick(lin, 1, walk.strides[-1]),)
    return Walk(pick(lin, 0, walk.offset), sizes, strides)


def scaled(walk: Walk, parts: int) -> tuple[Walk, Ints]:
    """The same walk over `parts` consecutive sub-units per unit (a 72-byte bfp16 tile is 8 blocks of 9 bytes, or
    18 words): a unit-stride (or single-unit) innermost dimension gets longer, other walks gain an innermost
    dimension. Arrays keep one dimension count: where the innermost dimension grows, the result's outermost
    dimension is a unit one (size 1, stride 0), which no limit reads. Also returns that choice per candidate."""
    if parts == 1:
        return walk, False
    grows = (walk.strides[-1] == 1) | (walk.sizes[-1] == 1)
    outer = tuple(st * parts for st in walk.strides[:-1])
    sizes = (pick(grows, 1, walk.sizes[0]),) + tuple(
        pick(grows, a, b) for a, b in zip((*walk.sizes[:-1], walk.sizes[-1] * parts), (*walk.sizes[1:], parts)))
    strides = (pick(grows, 0, walk.strides[0] * parts),) + tuple(
        pick(grows, a, b) for a, b in zip((*outer, 1), (*(st * parts for st in walk.strides[1:]), 1)))
    return Walk(walk.offset * parts, sizes, strides), grows


def to_words(walk: Walk, elem: DType) -> tuple[Walk, list[Limit]]:
    """The walk in 32-bit words (its pattern counts DMA units of `elem`) and the limits that conversion needs:
    sub-word elements must move in whole words; a unit of several words (a bfp16 tile) moves whole."""
    b = elem.unit_bytes
    if b % WORD_BYTES == 0:
        return scaled(walk, b // WORD_BYTES)[0], []
    if b > WORD_BYTES:
        return walk, [Limit(False, UNIT_WORDS, (elem, b), "use a type whose DMA unit is a multiple of 4 bytes")]
    per = WORD_BYTES // b
    size, stride, offset = walk.sizes[-1], walk.strides[-1], walk.offset
    n = len(walk.sizes)
    limits = [
        Limit((stride == 1) | (size <= 1), INNER_STRIDE, (stride, elem),
              "DMAs move whole words; finish sub-word reordering in the kernel (e.g. transpose)"),
        Limit((size * b % WORD_BYTES == 0) & (offset * b % WORD_BYTES == 0), INNER_RUN, (size, elem, offset),
              "make tile sizes and offsets multiples of 4 bytes"),
    ]
    for j, (sz, st) in enumerate(zip(walk.sizes[:-1], walk.strides[:-1])):
        limits.append(Limit((sz <= 1) | (st * b % WORD_BYTES == 0), OUTER_STRIDE, (st, elem, n - 1 - j),
                            "make tile sizes and matrix widths multiples of 4 bytes"))
    words = Walk(offset // per, (*walk.sizes[:-1], size // per), (*(st // per for st in walk.strides[:-1]), 1))
    return words, limits


def bd_limits(spec: DmaSpec, walk: Walk, where: str) -> list[Limit]:
    """A walk in words against the BD of tile kind `spec`: its address dimensions (leading unit ones dropped;
    a shim's one more is its iteration dimension), each wrapped dimension's wrap (a linear walk programs
    none), each stride, the length, and a shim's iteration (a repeat when its stride is 0)."""
    sizes, strides = walk.sizes[::-1], walk.strides[::-1]  # innermost first
    kept: Ints = 1  # dimensions through the outermost of size > 1
    for d, size in enumerate(sizes):
        kept = pick(size > 1, d + 1, kept)
    shim = spec.kind == TileKind.SHIM
    iteration: Ints = (kept == spec.dims + 1) if shim else False
    addr = kept - (iteration * 1)
    kind = spec.kind.value
    limits = [Limit(addr <= spec.dims, DIMS, (where, addr, kind, spec.dims, " + 1 iteration" if shim else ""))]
    linear = strides[0] == 1
    for d in range(1, len(sizes)):
        linear = linear & ((sizes[d] == 1) | (addr <= d))
    length: Ints = 1
    for d, (size, stride) in enumerate(zip(sizes, strides)):
        absent = addr <= d
        if d < spec.wrapped_dims:
            limits.append(Limit(absent | linear | wrap_ok(spec, size), WRAP,
                                (where, d, size, spec.wrap_bits, kind, spec.max_wrap)))
        limits.append(Limit(absent | (size <= 1) | ((stride >= 1) & (stride <= spec.max_stride)), STRIDE,
                            (where, d, stride, spec.step_bits, kind, spec.max_stride)))
        length = length * pick(absent, 1, size)
    limits.append(Limit(length <= spec.max_length, LENGTH, (where, length, spec.length_bits, kind,
                                                            spec.max_length)))
    if not shim:
        return limits
    it_size: Ints = 1
    it_stride: Ints = 0
    for d, (size, stride) in enumerate(zip(sizes, strides)):  # the outermost kept dimension, when it iterates
        it_size, it_stride = pick(kept == d + 1, size, it_size), pick(kept == d + 1, stride, it_stride)
    repeat = iteration & (it_stride == 0)
    steps = iteration & (it_stride != 0)
    return limits + [
        Limit((repeat == False) | (it_size <= spec.max_repeat),  # noqa: E712 - elementwise on arrays
              REPEAT, (where, it_size, kind, spec.max_repeat)),
        Limit((steps == False) | (it_size <= spec.iteration_wrap_max),  # noqa: E712
              ITERATION_WRAP, (where, it_size, spec.iteration_wrap_max)),
        Limit((steps == False) | (it_stride <= spec.max_iteration_stride),  # noqa: E712
              ITERATION_STRIDE, (where, it_stride, spec.iteration_step_bits, spec.max_iteration_stride)),
    ]


def static_limits(spec: DmaSpec, walk: Walk, buffer_elems: Ints, where: str) -> list[Limit]:
    """mlir-aie 1.4.3's verifier of a memtile or core BD (facts/devices.py TILE_EXTENT_SEARCH_MAX says where): the
    tile kind's field widths applied to every dim in elements of the buffer's type, which for elements
    narrower than a word is stricter than the fields (they count words); `static_size_ok` and
    `static_stride_max`."""
    stride_max = np.minimum(spec.max_stride, buffer_elems) if isinstance(buffer_elems, np.ndarray) else \
        static_stride_max(spec, buffer_elems)
    kind = spec.kind.value
    limits = []
    for d, (size, stride) in enumerate(zip(walk.sizes[::-1], walk.strides[::-1])):
        limits.append(Limit(static_size_ok(spec, size), STATIC_SIZE, (where, d, size, kind, spec.max_wrap)))
        limits.append(Limit(stride <= stride_max, STATIC_STRIDE, (where, d, stride, kind, stride_max)))
    return limits


def keeps(limits: list[Limit]) -> Ints:
    """Per candidate: whether it keeps every limit."""
    return _all([lim.ok for lim in limits])


def first_broken(limits: list[Limit], i: int = 0) -> Limit | None:
    """The first limit candidate i breaks, or None."""
    return next((lim for lim in limits if not at(lim.ok, i)), None)


def raise_first(limits: list[Limit], fix: str = "", i: int = 0) -> None:
    """Raise the first limit candidate i breaks (its own fix, else `fix`)."""
    lim = first_broken(limits, i)
    if lim is not None:
        raise lim.error(lim.what(i), fix if lim.fix is None else lim.fix)

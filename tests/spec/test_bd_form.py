"""spec/rules/bd_form.py's shortcuts give what the plain search gives (issue 33 item 4: the tuner asks shim_walk of
every distinct walk of every candidate of the split decode placement).

- `_divisors` is the scan it replaced: the divisors from `most` down to 2, largest first.
- `_fits` and `_form` cache whether a walk keeps its BD's limits, and the form that does, by its sizes, strides and
  offset modulo a word: on random walks, offsets and every DMA unit, they say what the limits and the search say
  for the walk at its own offset.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_gen.facts.devices import DEVICES, TileKind
from gemm_gen.facts.dtypes import WORD_BYTES, dtype
from gemm_gen.facts.errors import DmaLimitError
from gemm_gen.spec.rules import bd_form
from gemm_gen.spec.rules.dma import Walk, keeps

UNITS = ("i4", "i8", "i16", "bf16", "f32", "i32", "bfp16")


@pytest.mark.parametrize("most", (1, 2, 7, 64, 1023, 1024, 4096))
def test_divisors_are_the_scan_they_replace(most: int) -> None:
    for size in range(1, 5000):
        assert bd_form._divisors(size, most) == tuple(d for d in range(most, 1, -1) if size % d == 0), (size, most)


# outer dimensions, then the innermost one: mostly unit strides and word-sized runs, so that many walks fit and the
# offset decides (a sub-word unit's walk starting inside a word does not)
outer = st.lists(st.tuples(st.integers(1, 2048), st.sampled_from((0, 8, 96, 1024, 4096, 1 << 20))), max_size=4)
inner = st.tuples(st.sampled_from((1, 4, 8, 32, 64, 4096)), st.sampled_from((1, 1, 1, 2)))


@settings(max_examples=300, deadline=None)
@given(outer, inner, st.integers(0, 1 << 20), st.sampled_from(UNITS), st.sampled_from(sorted(DEVICES)))
def test_a_cached_fit_is_what_the_limits_say(d: list[tuple[int, int]], last: tuple[int, int], offset: int, unit: str,
                                             dev: str) -> None:
    d = [*d, last]
    walk = Walk(offset, tuple(s for s, _ in d), tuple(st for _, st in d))
    spec, t = DEVICES[dev].dma[TileKind.SHIM], dtype(unit)
    want = bool(keeps(bd_form._limits(walk, t, spec, "a walk")))
    assert bd_form._fits(walk.sizes, walk.strides, offset % WORD_BYTES, t, spec) == want


@settings(max_examples=200, deadline=None)
@given(outer, inner, st.integers(0, 1 << 20), st.sampled_from(UNITS), st.sampled_from(sorted(DEVICES)))
def test_a_cached_form_is_the_search_at_the_walks_own_offset(d: list[tuple[int, int]], last: tuple[int, int],
                                                            offset: int, unit: str, dev: str) -> None:
    """shim_walk's form, cached by the offset modulo a word, is what the search finds at the walk's own offset, and
    it fits its BD there; a walk no form fits is refused with the limit the walk as given breaks."""
    d = [*d, last]
    walk = Walk(offset, tuple(s for s, _ in d), tuple(st for _, st in d))
    spec, t = DEVICES[dev].dma[TileKind.SHIM], dtype(unit)
    searched = bd_form._form.__wrapped__(walk.sizes, walk.strides, offset, t, spec)
    assert bd_form._form(walk.sizes, walk.strides, offset % WORD_BYTES, t, spec) == searched
    if searched is None:
        with pytest.raises(DmaLimitError):
            bd_form.shim_walk(walk, t, spec, "a walk", "a fix")
        return
    got = bd_form.shim_walk(walk, t, spec, "a walk", "a fix")
    assert got == Walk(offset, *searched) and keeps(bd_form._limits(got, t, spec, "a walk"))

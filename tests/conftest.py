"""Shared helpers for the tests."""

from __future__ import annotations

import pytest

from gemm_gen.config import GemmConfig


def small(dev: str = "npu1", dtype_in: str = "bf16", dtype_out: str = "bf16", b_col_maj: bool = True,
          M: int | None = None, K: int | None = None, N: int | None = None, **kw: object) -> GemmConfig:
    """A small valid config: the smallest tiles the kernel allows, two blocks each way."""
    from gemm_gen.config import emulation_default
    from gemm_gen.hw.devices import device

    emulate = kw.get("emulate_bf16_with_bfp16")
    if emulate is None:
        emulate = emulation_default(dev, dtype_in)
    r, s, t = device(dev).mmul_shape(dtype_in, bool(emulate))
    m, k, n = 2 * r, 2 * s, 2 * t
    k_mt = kw.pop("k_mt", 2 * k)
    cols = device(dev).columns
    return GemmConfig(dev, M or 2 * 4 * m, K or 2 * k_mt, N or 2 * cols * n, kw.pop("m", m), kw.pop("k", k),
                      kw.pop("n", n), k_mt, dtype_in, dtype_out, b_col_maj, **kw)  # type: ignore[arg-type]


@pytest.fixture
def small_config():
    return small

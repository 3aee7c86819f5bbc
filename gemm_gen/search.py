"""Choosing a design, one named step: from a problem (or a list of problems) and the options a user
fixed to a design. The application layer (the CLI's commands, the operator) calls `choose` and says
what it chose; nothing below it chooses."""

from __future__ import annotations

from collections.abc import Sequence

from .config import GemmConfig, default_k_mt, default_tiles
from .model.tune import tuned_b_pack, tuned_config, tuned_k_mt
from .model.tune_many import tune_many
from .spec import Problem


def choose(base: GemmConfig, m: int | None = None, k: int | None = None, n: int | None = None,
           k_mt: int | None = None, rho: int | None = None, b_pack_open: bool = False,
           sizes: Sequence[Problem] | None = None, weights: Sequence[float] | None = None) -> GemmConfig:
    """The one way from a problem (or a list of them) and the options a user fixed to a design:
    `base` carries the problem (for a list: the maxima) and every option; the tile sizes not given
    come from the model: for several `sizes`, the design with the least weighted time over them
    that keeps the given ones (model/tune_many.py); for one problem all of them when none is
    given, else the paper's defaults with the model's k_mt. A bfp16 B's packing is the model's
    choice too when `b_pack_open` (one problem only)."""
    tuned = m is None and k is None and n is None
    if sizes is not None and len(set(sizes)) > 1 and None in (m, k, n, k_mt):
        fixed = {"m": m, "k": k, "n": n, "k_mt": k_mt, "rho": rho}
        return tune_many(base.with_(m=0, k=0, n=0, k_mt=0), tuple(sizes),
                         None if weights is None else tuple(weights), fixed).config
    if tuned:
        config = base.with_(m=0, k=0, n=0, k_mt=0)
    else:
        dm, dk, dn, _ = default_tiles(base.device, base.dtype_in, base.dtype_out, None,
                                      base.emulate_bf16_with_bfp16, base.dtype_b, base.acc)
        kk = dk if k is None else k
        config = base.with_(m=dm if m is None else m, k=kk, n=dn if n is None else n,
                         k_mt=default_k_mt(base.device, base.dtype_in, base.dtype_out, kk, base.K, base.dtype_b,
                                           base.acc) if k_mt is None else k_mt)
    if b_pack_open and config.t_b.is_block:  # the packing of a bfp16 B is the model's choice too
        return tuned_b_pack(config, tuned, k_mt, rho)
    if tuned:
        return tuned_config(config, k_mt, rho)
    if k_mt is None:
        return tuned_k_mt(config)
    return config


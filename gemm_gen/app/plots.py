"""PNG plots of predictions: a roofline sweep (like Striking fig. 7-8) and a tile heat map."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..facts.errors import ConfigError, ToolchainMissing
from ..model.params import Params, load, load_ends
from ..model.perf import Workload, estimate
from ..model.predict import predict
from ..search.tune import evaluate_all
from ..spec.config import GemmConfig
from ..spec.rules.array import DECODE_M_MAX, decode_call


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (PNG files, no display), or one line saying why not."""
    backend = os.environ.get("MPLBACKEND")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ToolchainMissing(f"matplotlib cannot be imported ({e})",
                               "install it into this Python: pip install matplotlib") from None
    except ValueError as e:  # matplotlib refuses an unknown MPLBACKEND when it is imported
        if backend is None:
            raise
        raise ConfigError(f"MPLBACKEND={backend} is not a plotting backend matplotlib has ({str(e).split(';')[0]})",
                          "unset MPLBACKEND, or set MPLBACKEND=Agg (roofline only writes PNG files)") from None
    return plt


def _png(fig: Any) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    return buf.getvalue()


def sweep(c: GemmConfig, max_size: int = 8192, points: int = 500, seed: int = 0,
          params: Params | None = None) -> dict[str, np.ndarray]:
    """Predicted throughput of `c`'s kernel over problem sizes that are multiples of its native
    size, up to max_size in each dimension (a seeded sample of at most `points`)."""
    p = params or load()
    slow, fast = load_ends()
    nm, nk, nn = c.native
    if max(nm, nk, nn) > max_size:
        raise ConfigError(f"--max-size {max_size} is smaller than the design's native size {nm}x{nk}x{nn}, the "
                          "smallest problem of the sweep", f"give --max-size {max(nm, nk, nn)} or more")
    axes = [np.arange(1, max_size // d + 1) * d for d in (nm, nk, nn)]
    count = len(axes[0]) * len(axes[1]) * len(axes[2])  # the grid's points, sampled by index (it can be huge)
    chosen = np.arange(count) if count <= points else np.random.default_rng(seed).choice(count, points, replace=False)
    grid = np.stack([ax[i] for ax, i in zip(axes, np.unravel_index(chosen, [len(ax) for ax in axes]))], axis=1)
    out: dict[str, list[float]] = {"M": [], "K": [], "N": [], "tops": [], "ai": [], "tops_low": [], "tops_high": []}
    base = Workload.of(c)
    for M, K, N in grid:
        pr = base.with_(M=int(M), K=int(K), N=int(N))
        e = estimate(pr, c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt, p, rho=c.tiling.rho)
        nbytes = sum(float(t.bytes) for t in e.traffic.values())
        ops = 2.0 * pr.macs
        out["M"].append(M)
        out["K"].append(K)
        out["N"].append(N)
        out["tops"].append(float(e.tops))
        out["ai"].append(ops / nbytes)
        for end, q in (("tops_low", slow), ("tops_high", fast)):  # the spread of the loose constants
            out[end].append(float(estimate(pr, c.tiling.m, c.tiling.k, c.tiling.n, c.tiling.k_mt, q,
                                           rho=c.tiling.rho).tops))
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def roofline_png(c: GemmConfig, path: Path, max_size: int = 8192, points: int = 500,
                 params: Params | None = None) -> tuple[dict[str, Any], bytes]:
    """The predicted roofline sweep of `c`'s kernel: what `roofline` prints, and the PNG for `path`."""
    plt = pyplot()
    data = sweep(c, max_size, points, params=params)
    dev = c.dev
    peak = dev.peak_tops(dev.operands(c.types.dtype_in, c.types.dtype_b))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    sc = ax.scatter(data["ai"], data["tops"], c=np.log2(data["M"] * data["K"] * data["N"]), s=12, cmap="viridis",
                    label="predicted end-to-end throughput (one point per M x K x N)")
    ax.vlines(data["ai"], data["tops_low"], data["tops_high"], color="tab:blue", alpha=0.25, lw=1,
              label="range over the constants' spreads (pessimistic to optimistic)")
    decode = decode_call(data["M"])
    if decode.any():  # decode calls (issue 22): matrix-vector shaped, judged against the DRAM roof
        ax.scatter(data["ai"][decode], data["tops"][decode], s=40, marker="s", facecolors="none",
                   edgecolors="tab:red", label=f"decode calls (M <= {DECODE_M_MAX}, predicted)")
    own, own_decode = _own_call(c, params)  # the call asked for, named decode when it is decode shaped
    what = f"this call {c.size.M}x{c.size.K}x{c.size.N}{' (decode)' if own_decode else ''}"
    ax.scatter([own["ai"]], [own["tops"]], s=110, marker="*", color="tab:orange", zorder=3,
               label=f"{what}: {own['tops']:.3f} TOPS (predicted)")
    ai = np.linspace(0, max(data["ai"].max(), own["ai"]) * 1.05, 200)
    # the roofs are the call's own, as `predict` gives them (model/predict.py computes both): the memory roof
    # passes through its memory bound at its arithmetic intensity, the compute roof is its compute bound
    bw, roof = own["gbps"], own["compute_bound"]
    ax.plot(ai, ai * bw / 1000, "--", color="tab:red",
            label=f"memory roof: AI x {bw:.1f} GB/s (this call's predicted effective DRAM rate, as predict)")
    ax.axhline(roof, color="tab:green", ls="--",
               label=f"compute roof of the kernel: {roof:.2f} TOPS (this call's, as predict)")
    ax.axhline(peak, color="gray", ls=":", label=f"device peak {peak:.1f} TOPS")
    highest = max(data["tops_high"].max(), roof, own["tops"])
    # a design far below the device's peak (decode calls) is drawn at its own scale, the peak left off the axis
    ax.set_ylim(0, (highest * 1.15) if highest < peak / 10 else max(peak, highest) * 1.08)
    ax.set_xlim(0, ai[-1])
    ax.set_xlabel("arithmetic intensity (operations per byte of DRAM traffic)")
    ax.set_ylabel("throughput (TOPS, predicted)")
    layout = "column-major" if c.layout.b_col_maj else "row-major"
    emu = " via bfp16" if c.kernel.emulate_bf16_with_bfp16 else ""
    ax.set_title(f"Predicted roofline: {dev.name} {c.types.dtype_in}{emu}->{c.types.dtype_out}, B {layout}, "
                 f"kernel {c.tiling.m}x{c.tiling.k}x{c.tiling.n}, k_mt {c.tiling.k_mt}\n(model predictions, not "
                 f"measurements)", fontsize=10)
    cb = fig.colorbar(sc, ax=ax)
    cb.set_label("log2(M x K x N)")
    ax.legend(loc="best", fontsize=8)  # decode sweeps sit low and to the right
    ax.grid(alpha=0.3)
    fig.tight_layout()
    png = _png(fig)
    plt.close(fig)
    return {"path": str(path), "points": int(data["tops"].size), "best_tops": float(data["tops"].max()),
            "compute_roof_tops": roof, "memory_gbps": bw, "decode_points": int(decode.sum()),
            "call": {"tops": own["tops"], "ai": own["ai"], "decode": own_decode}}, png


def _own_call(c: GemmConfig, params: Params | None) -> tuple[dict[str, float], bool]:
    """`c`'s own call as `predict` prices it (the same Prediction): its throughput, arithmetic intensity, compute
    bound and the DRAM rate that makes its memory bound; and whether it is decode shaped."""
    d = predict(c, params or load())
    ai = 2.0 * c.size.M * c.size.K * c.size.N / sum(v.bytes for v in d.dram.values())
    return {"tops": d.tops, "ai": ai, "compute_bound": d.compute_bound_tops,
            "gbps": d.memory_bound_tops * 1e3 / ai}, bool(decode_call(c.size.M))


def heatmap_png(c: GemmConfig, path: Path, params: Params | None = None) -> tuple[dict[str, Any], bytes]:
    """Predicted throughput over (m*n, k) for c's problem: best over n for each m*n, best k_mt
    (what `roofline` prints, and the PNG for `path`)."""
    plt = pyplot()
    pr = Workload.of(c)
    allc = evaluate_all(pr, params)
    mn, k, tops = allc["m"] * allc["n"], allc["k"], allc["tops"]
    if not tops.size:
        raise ConfigError(f"no valid tiling of {c.size.M}x{c.size.K}x{c.size.N} on {c.dev.name} for the heat map",
                          "check the options (--stack, --mmul, --n-aie-cols) against `gemm-gen tune`")
    xs, xi = np.unique(mn, return_inverse=True)
    ys, yi = np.unique(k, return_inverse=True)
    grid = np.full((ys.size, xs.size), np.nan)
    np.fmax.at(grid, (yi, xi), tops)
    fig, ax = plt.subplots(figsize=(9, 5.5))
    mesh = ax.pcolormesh(_edges(xs), _edges(ys), np.ma.masked_invalid(grid), cmap="magma", shading="flat")
    cb = fig.colorbar(mesh, ax=ax)
    cb.set_label("throughput (TOPS, predicted; best over m/n split and k_mt)")
    best = int(np.nanargmax(tops))
    ax.plot(mn[best], k[best], "c*", ms=14, label=f"best: {allc['m'][best]}x{k[best]}x{allc['n'][best]}, "
            f"k_mt {allc['k_mt'][best]}: {tops[best]:.2f} TOPS")
    ax.plot(c.tiling.m * c.tiling.n, c.tiling.k, "wo", ms=8, mfc="none",
            label=f"this design: {c.tiling.m}x{c.tiling.k}x{c.tiling.n}")
    ax.set_xlabel("output tile per core m x n (elements)")
    ax.set_ylabel("k (reduction per kernel call, elements)")
    layout = "column-major" if c.layout.b_col_maj else "row-major"
    ax.set_title(f"Predicted throughput of every valid tiling: {c.dev.name} {c.size.M}x{c.size.K}x{c.size.N} "
                 f"{c.types.dtype_in}->{c.types.dtype_out}, B {layout}\n(model predictions, not measurements; white: "
                 "no valid tiling)", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    png = _png(fig)
    plt.close(fig)
    return {"path": str(path), "tilings": int(tops.size), "best_tops": float(tops[best])}, png


def _edges(v: np.ndarray) -> np.ndarray:
    """Cell edges around sorted, possibly uneven, centres."""
    v = v.astype(np.float64)
    if v.size == 1:
        return np.array([v[0] - 0.5, v[0] + 0.5])
    mid = (v[1:] + v[:-1]) / 2
    return np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])

"""The build cache: one directory per xclbin, named by what the xclbin is built from.

The key hashes the Design without its per-call parts (the runtime sequence and host tensors, and
for a design that serves many sizes its own M, K, N), the rendered kernel source, and the pinned
toolchain (backends/pins.py), as mlir-aie's iron/jit.py names its cache by the MLIR text and
Triton's disk cache by the compiler version and kernel source. A second `make run` or `Gemm(...)(A, B)`
with the same design finds its xclbin there; each size gets its own instruction stream beside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..design.model import Design

CACHE_ENV = "GEMM_GEN_CACHE"  # overrides the cache directory
META = "design.json"  # what an entry holds, for `gemm-gen cache list`


def cache_root() -> Path:
    """$GEMM_GEN_CACHE, else the user's cache directory ($XDG_CACHE_HOME or ~/.cache) / gemm_gen."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gemm_gen"


def xclbin_identity(design: Design) -> dict[str, object]:
    """What the xclbin depends on: the Design minus its per-call parts, the kernel and the pins."""
    from ..design.serialize import design_to_json
    from ..kernels import render_kernel
    from . import pins

    d = design_to_json(design)
    for per_call in ("runtime", "tensors", "derived"):
        d.pop(per_call, None)
    config = dict(d["config"])
    if config.get("runtime_sizes", "fixed") != "fixed":  # its own size is only the largest it serves
        for name in ("M", "K", "N"):
            config.pop(name)
    d["config"] = config
    kernel = hashlib.sha256(render_kernel(design.kernels[0].build).encode()).hexdigest()
    return {"design": d, "kernel": kernel,
            "pins": {"mlir_aie": pins.MLIR_AIE_COMMIT, "llvm_aie": pins.PEANO_VERSION, "xrt": pins.XRT_MIN_VERSION}}


def key(design: Design) -> str:
    text = json.dumps(xclbin_identity(design), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def entry_dir(design: Design) -> Path:
    return cache_root() / key(design)


@dataclass(frozen=True)
class Entry:
    key: str
    path: Path
    nbytes: int
    description: str
    sizes: tuple[str, ...]  # the sizes with an instruction stream


def entries() -> list[Entry]:
    root = cache_root()
    out = []
    for path in sorted(p for p in root.glob("*") if p.is_dir()) if root.exists() else []:
        try:
            meta = json.loads((path / META).read_text())
        except (OSError, ValueError):
            meta = {}
        nbytes = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        sizes = tuple(sorted(f.stem.removeprefix("insts_") for f in path.glob("insts_*.bin")))
        out.append(Entry(path.name, path, nbytes, str(meta.get("description", "(no description)")), sizes))
    return out


def write_meta(design: Design, path: Path) -> None:
    from ..atomic import write_atomic

    c = design.config
    served = {"fixed": f"{c.M}x{c.K}x{c.N}", "mn": f"M<={c.M} N<={c.N}, K walk of {c.K}",
              "mnk": f"M<={c.M} K<={c.K} N<={c.N}"}[c.runtime_sizes]
    text = (f"{c.device} {c.precision.name} {c.m}x{c.k}x{c.n} k_mt {c.k_mt}, {c.cols} cols, "
            f"B {'col' if c.b_col_maj else 'row'}-major, serves {served}")
    write_atomic(path / META, json.dumps({"description": text, "identity": xclbin_identity(design)}, indent=1) + "\n")


def clear() -> int:
    """Remove every entry; how many there were."""
    found = entries()
    for e in found:
        shutil.rmtree(e.path, ignore_errors=True)
    return len(found)

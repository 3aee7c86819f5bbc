"""The build cache: one directory per xclbin, named by what the xclbin is built from.

The key hashes the Design without its per-call parts (the runtime sequence and host tensors, and
for a design that serves many sizes its own M, K, N), the rendered kernel source, and the pinned
toolchain (backends/pins.py), as mlir-aie's iron/jit.py names its cache by the MLIR text and
Triton's disk cache by the compiler version and kernel source. A second `make run` or `Gemm(...)(A, B)`
with the same design finds its xclbin there; each size gets its own instruction stream beside it.

The cache directory may hold other things (GEMM_GEN_CACHE can name any folder): an entry is ours only
when it carries the marker gemm_gen writes as it creates the entry (make_entry), so `cache list` shows
only entries and `cache clear` removes only entries, never following a symbolic link.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..design.ir import Design
from ..design.serialize import design_to_json
from ..facts.atomic import write_atomic
from ..facts.errors import CacheError
from . import pins
from .kernel_source import render_kernel

CACHE_ENV = "GEMM_GEN_CACHE"  # overrides the cache directory
META = "design.json"  # what an entry holds, for `gemm-gen cache list`
MARKER = ".gemm_gen_entry"  # written by make_entry: {"gemm_gen_entry": MARKER_FORMAT, "key": <the dir's name>}
MARKER_FORMAT = 1
KEY_LENGTH = 24  # hex digits of a key (and of an entry's name)
_KEY = re.compile(f"[0-9a-f]{{{KEY_LENGTH}}}")


def cache_root() -> Path:
    """$GEMM_GEN_CACHE, else the user's cache directory ($XDG_CACHE_HOME or ~/.cache) / gemm_gen."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gemm_gen"


def xclbin_identity(design: Design) -> dict[str, object]:
    """What the xclbin depends on: the Design minus its per-call parts, the kernel and the pins."""
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
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


def entry_dir(design: Design) -> Path:
    """Where the design's entry is (or would be); make_entry creates it."""
    return cache_root() / key(design)


def is_entry(path: Path) -> bool:
    """Whether gemm_gen created `path` as a cache entry: a real directory (not a link) named like a
    key, holding a regular-file marker that parses and names that same key. A user's folder cannot
    meet this by accident, and a copied or renamed entry no longer does."""
    if path.is_symlink() or not path.is_dir() or not _KEY.fullmatch(path.name):
        return False
    marker = path / MARKER
    if marker.is_symlink() or not marker.is_file():
        return False
    try:
        with marker.open("rb") as fh:
            data = json.loads(fh.read(4096))
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict):
        return False
    version = data.get("gemm_gen_entry")
    return type(version) is int and version >= 1 and data.get("key") == path.name


def make_entry(design: Design) -> Path:
    """The design's entry directory, created with its marker if it is new. A directory already there
    under the key's name is taken over only if it is empty (an entry whose marker a crash cut off);
    anything else there was not made by gemm_gen and is refused, not written into."""
    path = entry_dir(design)
    if is_entry(path):
        return path
    _not_a_file(path.parent)
    try:
        path.mkdir(parents=True, exist_ok=True)
        taken = path.is_symlink() or any(path.iterdir())
    except OSError as e:
        raise CacheError(f"cannot create the build cache entry {path} ({e.strerror or e})",
                         f"make {path.parent} a writable folder or set {CACHE_ENV} to one") from None
    if taken:
        raise CacheError(f"{path} is in the build cache under this design's name but gemm_gen did not create it "
                         f"(no valid {MARKER})", f"move it out of {path.parent}, or set {CACHE_ENV} to another folder")
    write_atomic(path / MARKER, json.dumps({"gemm_gen_entry": MARKER_FORMAT, "key": path.name}) + "\n")
    return path


@dataclass(frozen=True)
class Entry:
    key: str
    path: Path
    nbytes: int
    description: str
    sizes: tuple[str, ...]  # the sizes with an instruction stream


@dataclass(frozen=True)
class Contents:
    """What the cache directory holds: gemm_gen's entries, and the names of everything else."""

    root: Path
    entries: tuple[Entry, ...]
    not_ours: tuple[str, ...]  # left alone by clear: gemm_gen did not create them


_ROOT_FIX = f"set {CACHE_ENV} to the build cache's folder"


def _not_a_file(root: Path) -> None:
    if root.exists() and not root.is_dir():
        raise CacheError(f"the build cache {root} is not a folder", _ROOT_FIX)


def _children(root: Path) -> list[Path]:
    """The cache directory's items, or one line saying why the directory cannot be read."""
    if not root.exists():
        raise CacheError(f"the build cache {root} does not exist (nothing has been built into it)", _ROOT_FIX)
    _not_a_file(root)
    try:
        with os.scandir(root) as it:
            return sorted(root / d.name for d in it)
    except OSError as e:
        raise CacheError(f"cannot read the build cache {root} ({e.strerror or e})",
                         f"check its permissions, or {_ROOT_FIX}") from None


def _nbytes(path: Path) -> int:
    """Bytes under `path`, links counted as links (never followed)."""
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def _entry(path: Path) -> Entry:
    try:
        meta = json.loads((path / META).read_text())
    except (OSError, ValueError):
        meta = {}
    description = meta.get("description", "(no description)") if isinstance(meta, dict) else "(no description)"
    sizes = tuple(sorted(f.stem.removeprefix("insts_") for f in path.glob("insts_*.bin")))
    return Entry(path.name, path, _nbytes(path), str(description), sizes)


def contents() -> Contents:
    root = cache_root()
    ours = {p: is_entry(p) for p in _children(root)}
    return Contents(root, tuple(_entry(p) for p, mine in ours.items() if mine),
                    tuple(p.name for p, mine in ours.items() if not mine))


def write_meta(design: Design, path: Path) -> None:
    c = design.config
    served = {"fixed": f"{c.size.M}x{c.size.K}x{c.size.N}", "mn": f"M<={c.size.M} N<={c.size.N}, K walk of {c.size.K}",
              "mnk": f"M<={c.size.M} K<={c.size.K} N<={c.size.N}"}[c.runtime.runtime_sizes]
    text = (f"{c.array.device} {c.types.precision.name} {c.tiling.m}x{c.tiling.k}x{c.tiling.n} k_mt {c.tiling.k_mt}, "
            f"{c.array.cols} cols, "
            f"B {'col' if c.layout.b_col_maj else 'row'}-major, serves {served}")
    write_atomic(path / META, json.dumps({"description": text, "identity": xclbin_identity(design)}, indent=1) + "\n")


def _remove_entry(path: Path) -> None:
    """Everything in the entry, then its marker, then the folder: a removal that stops half-way
    leaves an entry that is still recognisably ours. Links inside are removed, not followed."""
    try:
        for item in sorted(path.iterdir()):
            if item.name == MARKER:
                continue
            if item.is_dir() and not item.is_symlink():
                shutil.rmtree(item)  # fd-based: does not follow links below either
            else:
                item.unlink()
        (path / MARKER).unlink()
        path.rmdir()
    except OSError as e:
        raise CacheError(f"cannot remove the build cache entry {path} ({e.strerror or e})",
                         "check its permissions and clear again (entries before it are gone, the rest are kept)"
                         ) from None


def clear() -> Contents:
    """Remove every entry and nothing else; what was removed and what was left."""
    found = contents()
    for e in found.entries:
        _remove_entry(e.path)
    return found

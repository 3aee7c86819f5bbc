"""Write output files whole or not at all, so a failure never leaves a half-written build/.

The paths a user names (-o, --build-dir, --out-dir) are checked before anything is computed or
written, by trying (a directory made and a file written there, both removed at once): a missing parent
directory is created, anything else that cannot hold the output (a
file where a folder belongs, a directory or a special file where a file belongs, a dangling
symlink, a directory we may not write) is refused in one line naming the flag, the path and the fix.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .errors import GemmGenError


class OutputError(GemmGenError, OSError):
    """An output path that cannot hold what a command writes (still an OSError for callers that
    catch those)."""


def current_umask() -> int:
    """The process's umask, read without changing it where the OS lets us (Linux >= 4.7 shows it in
    /proc); elsewhere set and restored at once (os.umask has no read-only form)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _made_parents(directory: Path) -> list[Path]:
    """Create `directory` and its missing parents; the ones created, deepest first (to undo)."""
    missing = []
    for d in (directory, *directory.parents):
        if d.exists() or d.is_symlink():
            break
        missing.append(d)
    directory.mkdir(parents=True, exist_ok=True)
    return missing


def _remove_empty(dirs: list[Path]) -> None:
    for d in dirs:
        try:
            d.rmdir()
        except OSError:  # not empty any more, or gone: leave it
            break


def _fail(path: Path, e: OSError) -> OutputError:
    return OutputError(f"cannot write {path}: {e.strerror or e}",
                       "give a path in a directory you can write (check its permissions and free space)")


def _temp_copy(path: Path, data: str | bytes) -> Path:
    """`data` in a temporary file beside `path`, with the mode a new file gets under the umask
    (mkstemp makes 0600, which would hide a design from the user's group)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
            os.fchmod(fh.fileno(), 0o666 & ~current_umask())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory and a rename."""
    write_all({path: data})


def write_all(files: Mapping[Path, str | bytes]) -> None:
    """Write several outputs as one: every temporary file is written first (so a full disk or an
    unwritable directory stops before any output changes), then each is renamed into place; an
    interruption during the renames removes the outputs already renamed and the directories made."""
    made: list[Path] = []
    temps: dict[Path, Path] = {}
    done: list[Path] = []
    current = next(iter(files), Path("."))  # the output being written, for the message
    try:
        for current in files:
            made += _made_parents(current.parent)
        for current, data in files.items():
            temps[current] = _temp_copy(current, data)
        for current, tmp in temps.items():
            os.replace(tmp, current)
            done.append(current)
    except BaseException as e:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
        if len(done) < len(files):  # a partial set of outputs is worse than none
            for path in done:
                path.unlink(missing_ok=True)
            _remove_empty(made)
        if isinstance(e, OSError) and not isinstance(e, GemmGenError):
            raise _fail(current, e) from None
        raise


def _first_problem(path: Path, flag: str, given: Path, want: str) -> OutputError | None:
    """Why the directory `path` cannot be made or written (None: it can); messages name `flag`
    with the path the user gave and `want`, what the flag takes."""
    for d in (*reversed(path.parents), path):
        if d.is_symlink() and not d.exists():
            return OutputError(f"{flag} {given}: {d} is a symlink to {os.readlink(d)}, which does not exist",
                               f"create its target, or give {flag} {want}")
        if d.exists() and not d.is_dir():
            return OutputError(f"{flag} {given}: {d} is a file, not a directory", f"give {flag} {want}")
        if not d.exists():  # we will create it and the rest below it: its parent must be writable
            if not os.access(d.parent, os.W_OK | os.X_OK):
                return OutputError(f"{flag} {given}: cannot create {d} in {d.parent} (permission denied)",
                                   f"give {flag} {want} you can write")
            return None
    if not os.access(path, os.W_OK | os.X_OK):
        return OutputError(f"{flag} {given}: {path} is not writable (permission denied)",
                           f"give {flag} {want} you can write, or change its permissions")
    return None


def _probe(path: Path, flag: str, given: Path, want: str) -> OutputError | None:
    """Why the directory `path` cannot take a file, found by trying: its missing directories are made and a
    temporary file is written in it, then both are removed (None: it can). os.access cannot tell: it lets root
    write anywhere, /proc and read-only mounts included, where the real write fails after all the work."""
    made: list[Path] = []
    missing = [d for d in (path, *path.parents) if not (d.exists() or d.is_symlink())]
    try:
        for d in reversed(missing):  # the outermost first
            try:
                d.mkdir()
            except OSError as e:
                return OutputError(f"{flag} {given}: cannot create {d}: {e.strerror or e}",
                                   f"give {flag} {want} you can write")
            made.insert(0, d)  # deepest first, for _remove_empty
        try:
            fd, tmp = tempfile.mkstemp(dir=path, prefix=".gemm_gen_probe.", suffix=".tmp")
            os.close(fd)
            os.unlink(tmp)
        except OSError as e:
            return OutputError(f"{flag} {given}: cannot write in {path}: {e.strerror or e}",
                               f"give {flag} {want} you can write")
    finally:
        _remove_empty(made)
    return None


def check_output_dir(path: str | Path, flag: str) -> Path:
    """`path` as a directory outputs can go into (made later, with its parents, when missing)."""
    if str(path) == "":
        raise OutputError(f"{flag} is empty", f"give {flag} a directory, e.g. {flag} build")
    p = Path(path)
    problem = _first_problem(p, flag, p, "a directory") or _probe(p, flag, p, "a directory")
    if problem is not None:
        raise problem
    return p


def check_output_file(path: str | Path, flag: str) -> Path:
    """`path` as a regular file an output can replace (its directory made later when missing).
    A symlink to a regular file is followed, so the link stays and its target gets the output."""
    if str(path) == "":
        raise OutputError(f"{flag} is empty", f"give {flag} a file name, e.g. {flag} build/out.json")
    p = Path(path)
    if p.is_symlink():
        if not p.exists():
            raise OutputError(f"{flag} {p} is a symlink to {os.readlink(p)}, which does not exist",
                              f"create its target, or give {flag} another file")
        p = p.resolve()
    if p.is_dir():
        raise OutputError(f"{flag} {p} is a directory", f"give {flag} a file name, e.g. {flag} {p / 'out'}")
    if p.exists() and not stat.S_ISREG(p.stat().st_mode):
        # a rename would replace the device or pipe itself (as root, /dev/null included)
        raise OutputError(f"{flag} {p} is not a regular file (a device, pipe or socket)",
                          f"give {flag} a regular file, or leave {flag} out")
    want = "a file in a directory"
    problem = _first_problem(p.parent, flag, Path(path), want) or _probe(p.parent, flag, Path(path), want)
    if problem is not None:
        raise problem
    return p

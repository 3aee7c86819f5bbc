"""The build cache leaves a user's files alone (gemm_gen/backends/cache.py): `cache clear` removes only
the entries gemm_gen created (marked by .gemm_gen_entry), `cache list` shows only them, and a cache
directory that cannot be used is one line (defect: `GEMM_GEN_CACHE=DIR gemm-gen cache clear` deleted
every subdirectory of DIR, a folder of photos and a source tree among them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gemm_gen.app.cli import main
from gemm_gen.backends import cache
from gemm_gen.design import build_design
from gemm_gen.facts.errors import CacheError

from ..conftest import small


def _snapshot(*tops: Path) -> dict[str, tuple[str, bytes | str | None]]:
    """Every item under `tops` (links not followed): its kind and its bytes or link target."""
    out: dict[str, tuple[str, bytes | str | None]] = {}
    for top in tops:
        items = [top] if top.is_symlink() or top.is_file() else [top, *top.rglob("*")]
        for p in items:
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p))
            elif p.is_dir():
                out[str(p)] = ("dir", None)
            else:
                out[str(p)] = ("file", p.read_bytes())
    return out


def _real_entry(dev: str, dtype_out: str, outside: Path) -> Path:
    """An entry as a build leaves it, plus a folder and a link out of the cache inside it."""
    design = build_design(small(dev, "i8", dtype_out))
    entry = cache.make_entry(design)
    cache.write_meta(design, entry)
    (entry / "final_x.xclbin").write_bytes(b"xclbin")
    (entry / "insts_9x64x9.bin").write_bytes(b"\0" * 8)
    (entry / "kernels").mkdir()
    (entry / "kernels" / "mm.o").write_bytes(b"object")
    (entry / "out").symlink_to(outside)  # clear removes the link, never what it points to
    return entry


@pytest.fixture
def user_cache(tmp_path, monkeypatch):
    """A cache folder shared with a user's things, and two real entries."""
    root = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV, str(root))
    outside = tmp_path / "elsewhere"  # a folder outside the cache, reached through links
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "thesis.tex").write_text("my thesis")
    entries = [_real_entry("npu1", "i32", outside), _real_entry("npu2", "i16", outside)]
    (root / "photos").mkdir()
    for i in range(3):
        (root / "photos" / f"img_{i}.jpg").write_bytes(bytes(range(i, 200)))
    (root / "src" / ".git" / "objects").mkdir(parents=True)
    (root / "src" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "notes.txt").write_text("loose file")
    fake_key = "0123456789abcdef01234567"  # named like a key, marker malformed
    (root / fake_key).mkdir()
    (root / fake_key / cache.MARKER).write_text("{not json")
    (root / fake_key / "data.bin").write_bytes(b"keep")
    copied = root / "fedcba9876543210fedcba98"  # an entry's marker copied under another name
    copied.mkdir()
    (copied / cache.MARKER).write_bytes((entries[0] / cache.MARKER).read_bytes())
    (copied / "mine.txt").write_text("keep")
    flagged = root / "abcdefabcdefabcdefabcdef"  # a marker that is not gemm_gen's format
    flagged.mkdir()
    (flagged / cache.MARKER).write_text(json.dumps({"gemm_gen_entry": True, "key": flagged.name}))
    linked = outside / "abababababababababababab"  # a marked folder outside, linked into the cache
    linked.mkdir()
    (linked / cache.MARKER).write_text(json.dumps({"gemm_gen_entry": 1, "key": linked.name}))
    (linked / "precious").write_text("keep")
    (root / linked.name).symlink_to(linked)
    (root / "to_elsewhere").symlink_to(outside)
    users = sorted(p for p in root.iterdir() if p not in entries)
    return root, entries, users, outside


def test_clear_removes_only_gemm_gen_entries_and_follows_no_link(user_cache, capsys):
    root, entries, users, outside = user_cache
    before = _snapshot(*users, outside)
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert f"{root}: 2 cached build(s)" in out and out.count("serves ") == 2
    not_ours = [line for line in out.splitlines() if line.startswith("not ours")]
    assert len(not_ours) == 1 and all(p.name in not_ours[0] for p in users), out
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert f"removed 2 cached build(s) from {root}" in out and "not ours" in out
    assert not any(e.exists() or e.is_symlink() for e in entries)
    assert _snapshot(*users, outside) == before  # every user item byte for byte, links unfollowed
    assert sorted(root.iterdir()) == users


def test_list_and_clear_in_json_keep_the_others_apart(user_cache, capsys):
    root, entries, users, _ = user_cache
    assert main(["cache", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(e["key"] for e in listed["entries"]) == sorted(e.name for e in entries)
    assert listed["not_ours"] == [p.name for p in users] and listed["root"] == str(root)
    assert all(e["bytes"] > 0 for e in listed["entries"])
    assert main(["cache", "clear", "--json"]) == 0
    cleared = json.loads(capsys.readouterr().out)
    assert cleared["cleared"] == 2 and cleared["not_ours"] == [p.name for p in users]


def test_an_entry_is_ours_only_with_its_own_marker(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    entry = cache.make_entry(build_design(small("npu1", "i8", "i32")))
    assert cache.is_entry(entry)
    marker = json.loads((entry / cache.MARKER).read_text())
    assert marker == {"gemm_gen_entry": cache.MARKER_FORMAT, "key": entry.name}
    for broken in ("", "[]", "{}", json.dumps({"gemm_gen_entry": 1, "key": "0" * 24}),
                   json.dumps({"gemm_gen_entry": "1", "key": entry.name}), json.dumps({"key": entry.name})):
        (entry / cache.MARKER).write_text(broken)
        assert not cache.is_entry(entry), broken
    (entry / cache.MARKER).unlink()
    assert not cache.is_entry(entry)


def test_make_entry_never_takes_over_a_folder_it_did_not_create(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    design = build_design(small("npu1", "i8", "i32"))
    path = cache.entry_dir(design)
    path.mkdir()  # empty, e.g. a crash before the marker was written: taken over
    assert cache.make_entry(design) == path and cache.is_entry(path)
    (path / cache.MARKER).unlink()
    (path / "user.txt").write_text("keep")
    with pytest.raises(CacheError, match=r"gemm_gen did not create it .*; move it out of"):
        cache.make_entry(design)
    assert (path / "user.txt").read_text() == "keep" and not (path / cache.MARKER).exists()


@pytest.mark.parametrize("problem", ["missing", "file", "unreadable"])
@pytest.mark.parametrize("action", ["list", "clear"])
def test_a_cache_folder_that_cannot_be_used_is_one_line(tmp_path, monkeypatch, capsys, problem, action):
    root = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV, str(root))
    if problem == "file":
        root.write_text("a user's file")
    elif problem == "unreadable":
        root.mkdir()
        (root / "photos").mkdir()

        def refuse(path):
            raise PermissionError(13, "Permission denied", str(path))

        monkeypatch.setattr(cache.os, "scandir", refuse)  # tests run as root here: chmod would not stop them
    assert main(["cache", action]) == 2
    err = capsys.readouterr().err
    expect = {"missing": "does not exist", "file": "is not a folder", "unreadable": "Permission denied"}[problem]
    assert err.count("\n") == 1 and err.startswith("gemm-gen: error: ") and expect in err, err
    assert str(root) in err and cache.CACHE_ENV in err
    if problem == "file":
        assert root.read_text() == "a user's file"
        with pytest.raises(CacheError, match="is not a folder"):
            cache.make_entry(build_design(small("npu1", "i8", "i32")))


def test_a_clear_that_stops_half_way_is_one_line_and_keeps_the_entry_marked(user_cache, monkeypatch, capsys):
    root, entries, users, outside = user_cache
    before = _snapshot(*users, outside)

    def refuse(path, *a, **k):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cache.shutil, "rmtree", refuse)  # the entries' kernels/ folder cannot go
    assert main(["cache", "clear"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot remove the build cache entry" in err and "Permission denied" in err
    assert cache.is_entry(entries[0]) and (entries[0] / "kernels" / "mm.o").exists()  # still ours, clear again
    assert _snapshot(*users, outside) == before

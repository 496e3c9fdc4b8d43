"""georag._io: atomic writes, sealed files, folder swaps, file sets, litter sweeping."""

from __future__ import annotations

import io
import os
import time
import zipfile

import pytest

from georag import _io
from georag._io import (
    ArtifactError,
    atomic_folder,
    atomic_write,
    check_folder,
    folders,
    read_file_set,
    seal,
    sweep_stale,
    unseal,
    write_file_set,
)


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_seal_round_trip_zip_and_plain():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a", "hello")
    for payload in (buffer.getvalue(), b"plain bytes"):
        sealed = seal(payload, format="f", version=1)
        assert unseal(sealed, where="x", format="f") == (
            payload,
            unseal(sealed, where="x", format="f")[1],
        )
    zipped = seal(buffer.getvalue(), format="f", version=1)
    assert zipfile.ZipFile(io.BytesIO(zipped)).read("a") == b"hello"  # still a valid zip
    with pytest.raises(ArtifactError, match="x: format 'f', expected 'g'"):
        unseal(zipped, where="x", format="g")
    with pytest.raises(ArtifactError, match="format version 2"):
        unseal(seal(b"p", format="f", version=2), where="x", format="f", version=1)
    with pytest.raises(ArtifactError, match="no georag manifest"):
        unseal(b"p" * 40, where="x", format="f")


def test_sweep_stale_by_pid_and_age(tmp_path):
    dead = tmp_path / f".a.{_dead_pid()}.0123abcd.tmp"
    live = tmp_path / f".a.{os.getpid()}.0123abcd.tmp"
    old_live = tmp_path / f".a.{os.getppid()}.89abcdef.tmp"
    other = tmp_path / f".b.{_dead_pid()}.0123abcd.tmp"
    for path in (dead, live, old_live, other):
        path.write_text("x")
    long_ago = time.time() - _io.STALE_AFTER_S - 10
    os.utime(old_live, (long_ago, long_ago))
    assert sorted(sweep_stale(tmp_path, "a")) == sorted([dead, old_live])
    assert live.exists() and other.exists()


def test_a_moved_aside_folder_comes_back(tmp_path):
    old = tmp_path / f".store.{_dead_pid()}.0123abcd.old"
    old.mkdir()
    (old / "f").write_text("previous")
    sweep_stale(tmp_path, "store")
    assert (tmp_path / "store" / "f").read_text() == "previous"


@pytest.mark.parametrize("exchange", [True, False])
def test_atomic_folder_replaces_whole(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(folders, "_exchange", lambda a, b: False)
    for version in ("one", "two"):
        with atomic_folder(tmp_path / "art", format="t", note=version) as tmp:
            (tmp / "sub").mkdir()
            (tmp / "sub" / "x").write_text(version)
    manifest = check_folder(tmp_path / "art", format="t")
    assert manifest["note"] == "two" and set(manifest["files"]) == {"sub/x"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]
    with pytest.raises(RuntimeError), atomic_folder(tmp_path / "art", format="t") as tmp:
        (tmp / "sub").mkdir()
        raise RuntimeError("writer failed")
    assert (tmp_path / "art" / "sub" / "x").read_text() == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]


def test_file_set_rolls_forward_a_committed_set(tmp_path):
    write_file_set(tmp_path, {"a": "1", "b": "1"}, manifest="m.json", format="s")
    # a writer killed after its commit: the pending set holds the new files, half moved
    write_file_set(tmp_path / "stage", {"a": "2", "b": "2"}, manifest="m.json", format="s")
    pending = tmp_path / ".m.json.pending"
    (tmp_path / "stage").rename(pending)
    os.replace(pending / "a", tmp_path / "a")
    assert read_file_set(tmp_path, manifest="m.json", format="s") == {"a": b"2", "b": b"2"}
    assert not pending.exists()
    (tmp_path / "b").write_text("changed")
    with pytest.raises(ArtifactError, match="b: checksum mismatch"):
        read_file_set(tmp_path, manifest="m.json", format="s")


def test_atomic_write_leaves_nothing_on_error(tmp_path):
    atomic_write(tmp_path / "f", b"old")

    def fail(tmp):
        tmp.write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write(tmp_path / "f", fail)
    assert (tmp_path / "f").read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]

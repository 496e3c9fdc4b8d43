"""Folder artifacts swapped in as a whole, and file sets beside other files, each with
``manifest.json`` written last (see :mod:`georag._io`)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

from georag._io.files import (
    ArtifactError,
    _apply_umask,
    _fsync_dir,
    _temp_name,
    sha256_file,
    sweep_stale,
)
from georag._io.sealed import dump_manifest, load_manifest

MANIFEST = "manifest.json"


# ---------------------------------------------------------------------------- folders
def _manifest_of(folder: Path, *, format: str, version: int, extra: Mapping) -> dict:
    files = {}
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = file.relative_to(folder).as_posix()
        if rel == MANIFEST:
            continue
        files[rel] = {"size": file.stat().st_size, "sha256": sha256_file(file)}
    return {"format": format, "version": version, **extra, "files": files}


def _fsync_tree(folder: Path) -> None:
    for file in folder.rglob("*"):
        if file.is_file():
            with open(file, "rb+") as handle:
                os.fsync(handle.fileno())
            _apply_umask(file, folder=False)
        elif file.is_dir():
            _apply_umask(file, folder=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2``); False where unsupported."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(b))


@contextlib.contextmanager
def atomic_folder(
    target: str | os.PathLike, *, format: str, version: int = 1, **extra: object
) -> Iterator[Path]:
    """Build a folder artifact in a temporary folder, then swap it into place whole.

    Yields the temporary folder; when the block ends without error, ``manifest.json``
    (format, version, ``extra``, size and SHA-256 of every file) is written last, the
    files are flushed, and the folder replaces ``target`` in one step. On an error the
    temporary folder is removed and ``target`` is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(target.parent, target.name)
    tmp = target.parent / _temp_name(target.name)
    tmp.mkdir()
    try:
        yield tmp
        manifest = _manifest_of(tmp, format=format, version=version, extra=extra)
        (tmp / MANIFEST).write_bytes(dump_manifest(manifest))
        _fsync_tree(tmp)
        _apply_umask(tmp, folder=True)
        _fsync_dir(tmp)
        if target.is_symlink() or target.is_file():
            raise ArtifactError(f"{target}: exists and is not a folder (nothing was replaced)")
        if not target.exists():
            os.rename(tmp, target)
        elif _exchange(tmp, target):
            shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the previous version
        else:
            old = target.parent / _temp_name(target.name, "old")
            os.rename(target, old)
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def check_folder(folder: str | os.PathLike, *, format: str, version: int = 1) -> dict:
    """Read and check ``folder/manifest.json``; return it.

    Every listed file must exist with its size and SHA-256.

    Raises
    ------
    ArtifactError
        Naming the folder or the bad file.
    """
    folder = Path(folder)
    sweep_stale(folder.parent, folder.name)  # a dead writer's moved-aside folder returns
    path = folder / MANIFEST
    if not path.is_file():
        raise ArtifactError(f"{folder}: not a {format} folder ({MANIFEST} missing)")
    manifest = load_manifest(path.read_bytes(), where=path, format=format, version=version)
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise ArtifactError(f"{path}: no file list (corrupt manifest)")
    for rel, entry in files.items():
        file = folder / rel
        if not isinstance(entry, dict) or ".." in Path(rel).parts or not file.is_file():
            raise ArtifactError(f"{file}: missing (listed in {path})")
        if file.stat().st_size != entry.get("size"):
            raise ArtifactError(
                f"{file}: {file.stat().st_size} bytes, the manifest says "
                f"{entry.get('size')} (truncated or overwritten)"
            )
        if sha256_file(file) != entry.get("sha256"):
            raise ArtifactError(f"{file}: checksum mismatch (corrupt file)")
    return manifest


# ---------------------------------------------------------------------------- file sets
def _pending(folder: Path, manifest: str) -> Path:
    return folder / f".{manifest}.pending"


def _roll_forward(folder: Path, manifest: str) -> None:
    pending = _pending(folder, manifest)
    if not pending.is_dir():
        return
    names = sorted(p.name for p in pending.iterdir() if p.name != manifest)
    for name in names:
        os.replace(pending / name, folder / name)
    if (pending / manifest).is_file():
        os.replace(pending / manifest, folder / manifest)
    shutil.rmtree(pending, ignore_errors=True)
    _fsync_dir(folder)


def write_file_set(
    folder: str | os.PathLike,
    files: Mapping[str, bytes | str],
    *,
    manifest: str,
    format: str,
    version: int = 1,
) -> None:
    """Replace several files of ``folder`` as one set, with ``manifest`` written last.

    The set is staged in a temporary folder and committed by one rename to
    ``.<manifest>.pending``; the files are then moved into place. A writer killed after
    the commit leaves a pending set that the next :func:`write_file_set` or
    :func:`read_file_set` rolls forward; one killed before it leaves the old set.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sweep_stale(folder, manifest)
    _roll_forward(folder, manifest)
    tmp = folder / _temp_name(manifest)
    tmp.mkdir()
    try:
        entries = {}
        for name, data in files.items():
            if "/" in name or name in (manifest, "", ".", ".."):
                raise ValueError(f"files: bad file name {name!r}")
            blob = data.encode("utf-8") if isinstance(data, str) else data
            (tmp / name).write_bytes(blob)
            entries[name] = {"size": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}
        meta = {"format": format, "version": version, "files": entries}
        (tmp / manifest).write_bytes(dump_manifest(meta))
        _fsync_tree(tmp)
        _fsync_dir(tmp)
        os.rename(tmp, _pending(folder, manifest))  # the commit point
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _roll_forward(folder, manifest)


def read_file_set(
    folder: str | os.PathLike, *, manifest: str, format: str, version: int = 1
) -> dict[str, bytes]:
    """Read and check the set that :func:`write_file_set` wrote; ``{name: bytes}``.

    Raises
    ------
    ArtifactError
        A missing or foreign manifest, a missing file, or a checksum mismatch (a file
        changed after the set was written), naming the file.
    """
    folder = Path(folder)
    _roll_forward(folder, manifest)
    path = folder / manifest
    if not path.is_file():
        raise ArtifactError(f"{path}: missing (not a set written by georag)")
    meta = load_manifest(path.read_bytes(), where=path, format=format, version=version)
    if not isinstance(meta.get("files"), dict):
        raise ArtifactError(f"{path}: no file list (corrupt manifest)")
    out = {}
    for name, entry in meta["files"].items():
        file = folder / str(name)
        if "/" in str(name) or not file.is_file() or not isinstance(entry, dict):
            raise ArtifactError(f"{file}: missing (listed in {path})")
        blob = file.read_bytes()
        if len(blob) != entry.get("size") or hashlib.sha256(blob).hexdigest() != entry.get(
            "sha256"
        ):
            raise ArtifactError(
                f"{file}: checksum mismatch with {path} (corrupt file, or "
                "changed after georag wrote it)"
            )
        out[name] = blob
    return out

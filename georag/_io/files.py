"""Atomic single files and the sweeping of temporary litter (see :mod:`georag._io`)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path

STALE_AFTER_S = 24 * 3600.0  # a temporary entry this old is litter whatever its pid says
_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.(?P<token>[0-9a-f]{8})\.(?P<kind>tmp|old)$")


class ArtifactError(ValueError):
    """A file georag wrote is missing, foreign, truncated or corrupt (the message names it)."""


# ---------------------------------------------------------------------------- permissions
def _umask() -> int:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # no /proc: read it the racy way and put it back
    os.umask(mask)
    return mask


def _apply_umask(path: Path, *, folder: bool) -> None:
    os.chmod(path, (0o777 if folder else 0o666) & ~_umask())


# ---------------------------------------------------------------------------- litter
def _temp_name(name: str, kind: str = "tmp") -> str:
    return f".{name}.{os.getpid()}.{secrets.token_hex(4)}.{kind}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def sweep_stale(folder: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Remove temporary entries of dead writers in ``folder`` (only those of ``name``).

    An entry ``.<name>.<pid>.<token>.tmp`` is stale when process ``pid`` is gone or the
    entry is older than :data:`STALE_AFTER_S`. A ``.old`` entry is a previous folder that a
    dead writer had moved aside: it is renamed back when ``<name>`` is missing, and removed
    otherwise. Returns what was removed.
    """
    folder = Path(folder)
    removed: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        match = _TMP.match(entry.name)
        if match is None or (name is not None and match["name"] != name):
            continue
        try:
            age = now - entry.lstat().st_mtime
        except OSError:
            continue
        if _alive(int(match["pid"])) and age < STALE_AFTER_S:
            continue
        target = folder / match["name"]
        if match["kind"] == "old" and not target.exists():
            with contextlib.suppress(OSError):
                os.rename(entry, target)  # the previous artifact comes back
                continue
        _remove(entry)
        removed.append(entry)
    return removed


# ---------------------------------------------------------------------------- one file
def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform can open a folder
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: str | os.PathLike, data: bytes | str | Callable[[Path], None]) -> Path:
    """Write ``data`` to ``path`` atomically.

    Parameters
    ----------
    path : path
        The file; its folder is created when missing.
    data : bytes, str or callable
        The content (str is written as UTF-8), or ``writer(tmp_path)`` that writes it.

    The temporary file sits in the same folder (one file system, so the rename is atomic)
    and is flushed to disk before the rename; on any error it is removed and ``path`` is
    left as it was. Stale temporary files of the same name are removed first.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(path.parent, path.name)
    tmp = path.parent / _temp_name(path.name)
    try:
        if callable(data):
            tmp.touch()
            data(tmp)
        else:
            tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        _apply_umask(tmp, folder=False)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def temp_folder(parent: str | os.PathLike, name: str) -> Path:
    """A fresh temporary folder ``parent/.<name>.<pid>.<token>.tmp`` (swept when stale)."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(parent, name)
    path = parent / _temp_name(name)
    path.mkdir()
    return path

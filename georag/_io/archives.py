"""Zip extraction that refuses unsafe entries and enforces size limits (see
:mod:`georag._io`)."""

from __future__ import annotations

import os
import stat
import zipfile
import zlib
from pathlib import Path


# ---------------------------------------------------------------------------- zip archives
def safe_extract(
    archive: str | os.PathLike,
    dest: str | os.PathLike,
    *,
    max_total_bytes: int = 32 << 30,
    max_entries: int = 200_000,
    max_ratio: float = 200.0,
) -> Path:
    """Extract a zip into ``dest`` with limits; return ``dest``.

    Refuses (``ValueError`` naming the archive and the entry) absolute paths, ``..``,
    symbolic links, entries below a file, more than ``max_entries`` entries, more than
    ``max_total_bytes`` uncompressed in all, and an entry that inflates more than
    ``max_ratio`` times (a zip bomb). Sizes are counted while inflating, so a header that
    lies about them does not help.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    where = str(archive)
    try:
        zipped = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"{where}: not a readable zip archive ({err})") from None
    with zipped:
        infos = zipped.infolist()
        if len(infos) > max_entries:
            raise ValueError(f"{where}: {len(infos)} entries, the limit is {max_entries}")
        total = 0
        files, folders = set(), set()
        for info in infos:
            parts = Path(info.filename).parts
            if (
                info.filename.startswith(("/", "\\"))
                or ".." in parts
                or (parts and ":" in parts[0])
            ):
                raise ValueError(f"{where}: entry {info.filename!r} points outside the folder")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise ValueError(f"{where}: entry {info.filename!r} is a symbolic link")
            folders.update("/".join(parts[:depth]) for depth in range(1, len(parts)))
            (folders if info.is_dir() else files).add("/".join(parts))
        clash = sorted(files & folders)
        if clash:
            raise ValueError(f"{where}: entry {clash[0]!r} is both a file and a folder")
        for info in infos:
            if info.file_size > 1 << 20 and info.file_size > max_ratio * max(info.compress_size, 1):
                raise ValueError(
                    f"{where}: entry {info.filename!r} would inflate "
                    f"{info.file_size / max(info.compress_size, 1):.0f}x, more than "
                    f"{max_ratio:g}x (a zip bomb?)"
                )
        declared = sum(info.file_size for info in infos)
        if declared > max_total_bytes:
            raise ValueError(
                f"{where}: would inflate to {declared} bytes, the limit is "
                f"{max_total_bytes} (max_total_bytes)"
            )
        for info in infos:
            out = dest.joinpath(*Path(info.filename).parts)
            if info.is_dir():
                out.mkdir(parents=True, exist_ok=True)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            written = 0
            try:
                with zipped.open(info) as source, open(out, "wb") as sink:
                    while block := source.read(1 << 20):
                        written += len(block)
                        total += len(block)
                        if total > max_total_bytes:
                            raise ValueError(
                                f"{where}: inflates past {max_total_bytes} bytes "
                                "(limit max_total_bytes)"
                            )
                        if written > 1 << 20 and written > max_ratio * max(info.compress_size, 1):
                            raise ValueError(
                                f"{where}: entry {info.filename!r} inflates more than "
                                f"{max_ratio:g}x (a zip bomb?)"
                            )
                        sink.write(block)
            except (zipfile.BadZipFile, EOFError, zlib.error) as err:
                out.unlink(missing_ok=True)
                raise ValueError(f"{where}: entry {info.filename!r} is corrupt ({err})") from None
            except ValueError:
                out.unlink(missing_ok=True)
                raise
    return dest

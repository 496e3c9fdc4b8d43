"""Atomic, checked artifact I/O: the one place where georag writes files that hold work.

A bottom module (it imports nothing of georag). Every artifact is written so that a reader
sees the old version or the new one, never a mix, and carries a SHA-256 and a format
version that are checked on load:

* :func:`atomic_write`: one file, through a temporary file in the same folder, ``fsync``
  and :func:`os.replace`.
* :func:`seal` / :func:`unseal`: a single-file binary artifact carries its manifest inside
  the file. A zip (``torch.save``, ``np.savez``) keeps it in the archive comment, so the
  file stays a valid zip for every other reader; any other payload (a faiss index) gets a
  trailer, which faiss ignores.
* :func:`atomic_folder` / :func:`check_folder`: a folder artifact (BM25, a store) is
  built in a temporary folder, gets ``manifest.json`` (SHA-256 and size of every file)
  written last, and is swapped into place as a whole (``renameat2(RENAME_EXCHANGE)`` on
  Linux; elsewhere two renames, and a later write or read restores the previous folder
  when a writer died between them).
* :func:`write_file_set` / :func:`read_file_set`: several files that sit beside others in
  a user's folder (``results.json/md/csv``, a TREC run) are staged in a temporary folder,
  committed by renaming it to ``.<manifest>.pending``, then moved into place, manifest
  last; a reader or writer that finds a pending set rolls it forward first.
* :func:`sweep_stale`: temporary files and folders named ``.<name>.<pid>.<token>.tmp``
  whose writer is dead (or that are older than :data:`STALE_AFTER_S`) are removed the next
  time the same folder is written.
* Created files get the user's umask (``mkstemp`` alone would leave them 0600).
* :func:`safe_extract`: zip extraction that refuses absolute paths, ``..``, links and
  entries under a file, and enforces limits on total size, entry count and compression
  ratio.

Errors are :class:`ArtifactError` (a ``ValueError``) naming the file. One writer per
target at a time is assumed: concurrent writers of the same artifact are not coordinated
(single files: each write is atomic and the last one wins; file sets and folders: a second
writer may fail with an ``OSError``), and temporary entries of a writer on another host
sharing the file system count as stale only by age.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import struct
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

__all__ = [
    "ArtifactError",
    "MANIFEST",
    "STALE_AFTER_S",
    "atomic_write",
    "seal",
    "unseal",
    "atomic_folder",
    "check_folder",
    "write_file_set",
    "read_file_set",
    "sweep_stale",
    "safe_extract",
    "sha256_file",
    "dump_manifest",
    "load_manifest",
    "temp_folder",
    "save_torch",
    "load_torch",
]

MANIFEST = "manifest.json"
STALE_AFTER_S = 24 * 3600.0  # a temporary entry this old is litter whatever its pid says
_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.(?P<token>[0-9a-f]{8})\.(?P<kind>tmp|old)$")
_TRAILER_MAGIC = b"GEORAGM1"
_ZIP_COMMENT_TAG = b"georag-manifest "
_EOCD = b"PK\x05\x06"


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


# ---------------------------------------------------------------------------- manifests
def _canonical(meta: Mapping) -> bytes:
    return json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()


def dump_manifest(meta: Mapping) -> bytes:
    """Compact JSON of ``meta`` with ``manifest_sha256``, a checksum of the manifest itself."""
    body = {k: v for k, v in meta.items() if k != "manifest_sha256"}
    return _canonical({**body, "manifest_sha256": hashlib.sha256(_canonical(body)).hexdigest()})


def load_manifest(blob: bytes, *, where: str | os.PathLike, format: str, version: int = 1) -> dict:
    """Parse a :func:`dump_manifest` blob; any changed byte, format or newer version is an error.

    Raises
    ------
    ArtifactError
        Naming ``where``.
    """
    try:
        meta = json.loads(blob)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise ArtifactError(f"{where}: unreadable manifest (corrupt file)") from None
    if not isinstance(meta, dict) or meta.get("format") != format:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ArtifactError(f"{where}: format {found!r}, expected {format!r}")
    try:
        intact = dump_manifest(meta) == blob and "manifest_sha256" in meta
    except (TypeError, ValueError):
        intact = False
    if not intact:
        raise ArtifactError(f"{where}: manifest checksum mismatch (corrupt file)")
    if not isinstance(meta.get("version"), int) or meta["version"] > version:
        raise ArtifactError(
            f"{where}: format version {meta.get('version')!r}, this georag reads up to {version}"
        )
    return meta


# ---------------------------------------------------------------------------- sealed files
def _eocd(blob: bytes) -> int | None:
    """Offset of a zip's end-of-central-directory record that ends the blob, if any."""
    at = blob.rfind(_EOCD, max(0, len(blob) - 22 - 0xFFFF))
    while at >= 0:
        (comment,) = struct.unpack_from("<H", blob, at + 20) if at + 22 <= len(blob) else (-1,)
        if at + 22 + comment == len(blob):
            return at
        at = blob.rfind(_EOCD, max(0, len(blob) - 22 - 0xFFFF), at)
    return None


def seal(payload: bytes, *, format: str, version: int, **extra: object) -> bytes:
    """Append a manifest (format, version, size, SHA-256 of ``payload``) to ``payload``.

    A zip without a comment keeps the manifest as its archive comment (still a valid zip,
    readable by ``torch.load`` and ``np.load``); anything else gets a trailer
    ``<json> <length: 8 bytes> GEORAGM1``.
    """
    meta = {
        "format": format,
        "version": version,
        "size": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
        **extra,
    }
    text = dump_manifest(meta)
    at = _eocd(payload)
    if at is not None and at + 22 == len(payload):
        comment = _ZIP_COMMENT_TAG + text
        return payload[: at + 20] + struct.pack("<H", len(comment)) + comment
    return payload + text + struct.pack("<Q", len(text)) + _TRAILER_MAGIC


def unseal(
    blob: bytes, *, where: str | os.PathLike, format: str, version: int = 1
) -> tuple[bytes, dict]:
    """Check a :func:`seal`-ed blob; return ``(payload, manifest)``.

    Raises
    ------
    ArtifactError
        No manifest, another format, a newer version, a wrong size or a checksum mismatch.
    """
    meta_text, payload = None, None
    if blob.endswith(_TRAILER_MAGIC) and len(blob) >= 16:
        (length,) = struct.unpack_from("<Q", blob, len(blob) - 16)
        if length <= len(blob) - 16:
            meta_text = blob[len(blob) - 16 - length : len(blob) - 16]
            payload = blob[: len(blob) - 16 - length]
    else:
        at = _eocd(blob)
        if at is not None and blob[at + 22 : at + 22 + len(_ZIP_COMMENT_TAG)] == _ZIP_COMMENT_TAG:
            meta_text = blob[at + 22 + len(_ZIP_COMMENT_TAG) :]
            payload = blob[: at + 20] + b"\x00\x00"
    if meta_text is None or payload is None:
        raise ArtifactError(f"{where}: no georag manifest (truncated, or not written by georag)")
    meta = load_manifest(meta_text, where=where, format=format, version=version)
    if (
        meta.get("size") != len(payload)
        or meta.get("sha256") != hashlib.sha256(payload).hexdigest()
    ):
        raise ArtifactError(f"{where}: checksum mismatch (corrupt or truncated file)")
    return payload, meta


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


def temp_folder(parent: str | os.PathLike, name: str) -> Path:
    """A fresh temporary folder ``parent/.<name>.<pid>.<token>.tmp`` (swept when stale)."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(parent, name)
    path = parent / _temp_name(name)
    path.mkdir()
    return path


# ---------------------------------------------------------------------------- torch files
def save_torch(obj: object, path: str | os.PathLike, *, format: str, version: int = 1) -> Path:
    """``torch.save`` into a sealed zip (manifest in the archive comment), atomically."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return atomic_write(path, seal(buffer.getvalue(), format=format, version=version))


def load_torch(path: str | os.PathLike, *, format: str, version: int = 1) -> object:
    """Check a :func:`save_torch` file and load it with ``weights_only=True``.

    Raises
    ------
    ArtifactError
        Missing, foreign, corrupt, or holding objects that are not plain tensors and
        containers (a crafted pickle), naming the file.
    """
    import io
    import pickle

    import torch

    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path}: no such file")
    payload, _ = unseal(path.read_bytes(), where=path, format=format, version=version)
    try:
        return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise ArtifactError(
            f"{path}: not a loadable {format} file (it holds objects other "
            "than tensors and plain containers; refused)"
        ) from None
    except (
        RuntimeError,
        EOFError,
        ValueError,
        KeyError,
        AttributeError,
        TypeError,
        zipfile.BadZipFile,
    ) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ArtifactError(f"{path}: not a loadable {format} file ({reason[:200]})") from None

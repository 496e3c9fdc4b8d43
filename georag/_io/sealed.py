"""Manifests and sealed single-file artifacts: checksums inside the file (a zip's
archive comment, or a trailer), torch files (see :mod:`georag._io`)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zipfile
from collections.abc import Mapping
from pathlib import Path

from georag._io.files import ArtifactError, atomic_write

_TRAILER_MAGIC = b"GEORAGM1"
_ZIP_COMMENT_TAG = b"georag-manifest "
_EOCD = b"PK\x05\x06"


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

"""An on-disk embedding cache: atomic writes, validated reads.

One file per entry, ``<key>.npz``, holding the embeddings and a JSON header with the key,
shape, dtype and a SHA-256 of the embedding bytes; the whole file is sealed
(:func:`georag._io.seal`: a SHA-256 of every byte, kept in the zip comment). Writes go to
a temporary file in the same folder and are moved into place
(:func:`georag._io.atomic_write`), so a crash midway leaves no readable half-written entry,
and a dead writer's temporary file is removed by the next write. A read that finds a
truncated, foreign or mismatching file reports it and returns ``None``, and the caller
recomputes.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import zipfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from georag._io import ArtifactError, atomic_write, seal, unseal

__all__ = ["EmbeddingCache", "content_hash"]

log = logging.getLogger(__name__)
FORMAT = "georag-embeddings-v1"


def content_hash(texts: Sequence[str]) -> str:
    """SHA-256 over the texts, length-prefixed so that boundaries count."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


class EmbeddingCache:
    """Embeddings keyed by model, corpus content and chunking.

    Parameters
    ----------
    folder : path
        Where entries live.
    """

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)

    @staticmethod
    def key(model: str, texts: Sequence[str], **settings: object) -> str:
        """A stable key for ``model`` over ``texts`` with extra ``settings`` (chunking...)."""
        parts = json.dumps(
            {"model": model, "texts": content_hash(texts), **settings}, sort_keys=True, default=str
        )
        return hashlib.sha256(parts.encode()).hexdigest()[:32]

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.npz"

    def load(self, key: str, *, rows: int | None = None) -> torch.Tensor | None:
        """Return the cached embeddings for ``key``, or ``None`` when absent or invalid.

        Parameters
        ----------
        rows : int, optional
            Expected number of rows N; a mismatch invalidates the entry.
        """
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            payload, _ = unseal(path.read_bytes(), where=path, format=FORMAT)
        except ArtifactError as err:
            log.warning("ignoring invalid cache entry (recomputing): %s", err)
            return None
        try:
            with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
                header = json.loads(bytes(archive["header"]).decode())
                embeddings = archive["embeddings"]
        except (
            OSError,
            ValueError,
            KeyError,
            EOFError,
            RecursionError,
            zipfile.BadZipFile,
            zlib.error,
        ) as err:
            log.warning("ignoring unreadable cache entry %s (recomputing): %s", path, err)
            return None
        if not isinstance(header, dict):
            header = {}
        problems = []
        if header.get("format") != FORMAT or header.get("key") != key:
            problems.append("foreign header")
        if embeddings.dtype != np.float32 or embeddings.ndim != 2:
            problems.append(f"dtype/shape {embeddings.dtype}{embeddings.shape}")
        if list(embeddings.shape) != header.get("shape"):
            problems.append(f"shape {embeddings.shape} != header {header.get('shape')}")
        if rows is not None and embeddings.shape[0] != rows:
            problems.append(f"{embeddings.shape[0]} rows, expected {rows}")
        if hashlib.sha256(embeddings.tobytes()).hexdigest() != header.get("sha256"):
            problems.append("checksum mismatch")
        if problems:
            log.warning(
                "ignoring invalid cache entry %s (recomputing): %s", path, "; ".join(problems)
            )
            return None
        return torch.from_numpy(embeddings)

    def save(self, key: str, embeddings: torch.Tensor) -> Path:
        """Write ``embeddings`` (N, D) float32 atomically under ``key``."""
        if embeddings.dim() != 2:
            raise ValueError(f"embeddings must be (N, D), got {tuple(embeddings.shape)}")
        array = np.ascontiguousarray(embeddings.detach().cpu().float().numpy())
        header = {
            "format": FORMAT,
            "key": key,
            "shape": list(array.shape),
            "sha256": hashlib.sha256(array.tobytes()).hexdigest(),
        }
        header_bytes = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)

        buffer = io.BytesIO()
        np.savez(buffer, embeddings=array, header=header_bytes)
        path = self.path(key)
        atomic_write(path, seal(buffer.getvalue(), format=FORMAT, version=1))
        return path

    def get_or_compute(
        self, key: str, rows: int, compute: Callable[[], torch.Tensor]
    ) -> tuple[torch.Tensor, bool]:
        """Load ``key`` or compute and store it. Returns ``(embeddings, was_cached)``."""
        cached = self.load(key, rows=rows)
        if cached is not None:
            return cached, True
        embeddings = compute()
        self.save(key, embeddings)
        return embeddings, False

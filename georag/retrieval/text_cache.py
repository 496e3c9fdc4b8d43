"""A per-text embedding cache: each text is encoded once per model, whatever batch it comes in.

:class:`~georag.retrieval.cache.EmbeddingCache` keys a whole corpus; a second stage such as
the bi-encoder sees a different subset of texts on every call (the candidates a filter kept),
so it needs a cache keyed by each text's content hash. Entries are shards, ``<hash>.npz``,
holding the SHA-256 of each text and its embedding; a shard is written atomically once its
texts are encoded, so an interrupted run keeps every finished shard. Unreadable or
inconsistent shards are reported and skipped (their texts are encoded again).
"""

from __future__ import annotations

import collections
import hashlib
import logging
import os
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from georag._io import atomic_write
from georag.resources import default_cache_dir
from georag.retrieval.cache import content_hash

__all__ = ["TextEmbeddingCache"]

log = logging.getLogger(__name__)


class TextEmbeddingCache:
    """Embeddings of single texts under one model, keyed by content hash.

    Parameters
    ----------
    model_key : str
        Names the model and anything that changes its output (e.g. max sequence length);
        each key gets its own folder.
    folder : path, optional
        Root folder; defaults to ``$GEORAG_CACHE/text_embeddings``.
    shard_size : int
        Texts encoded and written per shard.
    persist : bool
        Read and write shards on disk; False keeps the embeddings in memory only.
    max_rows : int, optional
        Embeddings held in memory at most (a long-running service's bound); the least
        recently used go first, and are read or encoded again when next asked for.
    """

    def __init__(
        self,
        model_key: str,
        folder: str | os.PathLike | None = None,
        *,
        shard_size: int = 256,
        persist: bool = True,
        max_rows: int | None = None,
    ) -> None:
        if shard_size <= 0:
            raise ValueError(f"shard_size must be positive, got {shard_size}")
        if max_rows is not None and max_rows <= 0:
            raise ValueError(f"max_rows must be positive, got {max_rows}")
        root = Path(folder) if folder is not None else default_cache_dir() / "text_embeddings"
        self.folder = root / hashlib.sha256(model_key.encode()).hexdigest()[:24]
        self.shard_size = shard_size
        self.persist = persist
        self.max_rows = max_rows
        self._rows: collections.OrderedDict[str, torch.Tensor] = collections.OrderedDict()
        self._seen: set[str] = set()
        self.hits = 0
        self.misses = 0

    def _refresh(self) -> None:
        """Read the shards written since the last look (by this or another process)."""
        if not self.persist or not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*.npz")):
            if path.name in self._seen:
                continue
            self._seen.add(path.name)
            try:
                with np.load(path, allow_pickle=False) as archive:
                    hashes, embeddings = archive["hashes"], archive["embeddings"]
            except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:
                log.warning("ignoring unreadable text-cache shard %s: %s", path, err)
                continue
            if (
                embeddings.ndim != 2
                or embeddings.dtype != np.float32
                or (len(hashes) != embeddings.shape[0])
            ):
                log.warning("ignoring inconsistent text-cache shard %s", path)
                continue
            tensor = torch.from_numpy(embeddings)
            for i, key in enumerate(hashes.tolist()):
                self._remember(key, tensor[i])

    def _save(self, hashes: list[str], embeddings: torch.Tensor) -> None:
        if not self.persist:
            return
        array = np.ascontiguousarray(embeddings.detach().cpu().float().numpy())
        name = hashlib.sha256("".join(hashes).encode()).hexdigest()[:32] + ".npz"

        def write(tmp: Path) -> None:
            with tmp.open("wb") as handle:
                np.savez(handle, hashes=np.array(hashes), embeddings=array)

        atomic_write(self.folder / name, write)
        self._seen.add(name)

    def add(self, texts: Sequence[str], embeddings: torch.Tensor) -> None:
        """Record known embeddings (N, D) of ``texts`` (e.g. a corpus encoded in one pass), in
        memory only."""
        if embeddings.dim() != 2 or embeddings.shape[0] != len(texts):
            raise ValueError(
                f"embeddings: expected ({len(texts)}, D), got {tuple(embeddings.shape)}"
            )
        for text, row in zip(texts, embeddings.float().cpu()):
            self._remember(content_hash([text]), row)

    def _remember(self, key: str, row: torch.Tensor) -> None:
        self._rows[key] = row
        if self.max_rows is not None:
            self._rows.move_to_end(key)
            while len(self._rows) > self.max_rows:
                self._rows.popitem(last=False)

    def encode(
        self, texts: Sequence[str], encode: Callable[[list[str]], torch.Tensor]
    ) -> torch.Tensor:
        """Embeddings of ``texts``, encoding (with ``encode``) only those not cached.

        Parameters
        ----------
        texts : sequence of str, length N
        encode : callable
            Maps a list of texts to their embeddings, shape (n, D).

        Returns
        -------
        torch.Tensor, shape (N, D), float32, on CPU
        """
        keys = [content_hash([text]) for text in texts]
        if any(key not in self._rows for key in keys):
            self._refresh()
        found = {k: self._rows[k] for k in keys if k in self._rows}
        if self.max_rows is not None:
            for key in found:
                self._rows.move_to_end(key)
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        self.misses += len(missing)
        self.hits += len(found)
        if missing:
            text_of = dict(zip(keys, texts))
            for start in range(0, len(missing), self.shard_size):
                chunk = missing[start : start + self.shard_size]
                embeddings = encode([text_of[k] for k in chunk]).float().cpu()
                self._save(chunk, embeddings)
                for i, key in enumerate(chunk):
                    found[key] = embeddings[i]
                    self._remember(key, embeddings[i])
        if not keys:
            return torch.empty(0, 0)
        return torch.stack([found[k] for k in keys])

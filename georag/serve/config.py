"""The service's settings, with their defaults written once."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from georag.serve.batcher import MAX_READ_MS

__all__ = ["ServeConfig"]


@dataclass(frozen=True)
class ServeConfig:
    """Settings of ``georag serve`` (each one a flag of the command).

    Parameters
    ----------
    method : str
        Registry spec of the reranker (``maniscope``, ``ricci+bi``, ``learned_diffusion`` ...),
        or with ``index`` the retrieval method of :class:`georag.Retriever` (``dense`` ...).
    options : dict
        ``{stage name: {config field: value}}`` (``--method-option``, ``--weights``).
    index : str, optional
        An index folder (``georag index``): serve corpus retrieval (``/retrieve``,
        ``/documents``) from it instead of reranking.
    rerank : str, optional
        With ``index``: a reranker spec applied to the retrieved documents.
    host, port : str, int
        Where to listen (loopback unless told otherwise).
    max_batch : int
        Queries gathered into one batched call of the method (1: no micro-batching).
    max_wait_ms : float
        How long the first query of a batch waits for others.
    max_read_ms : float
        How long it waits, at most, while others are still being read
        (:class:`~georag.serve.batcher.MicroBatcher`).
    workers : int
        Server processes.
    threads : int
        torch CPU threads per process (one: the steadiest choice for small graphs).
    max_docs : int
        Documents per request.
    max_text_chars : int
        Characters per query or document.
    max_body_bytes : int
        Request body size.
    max_queue : int
        Queries waiting for a batch; more are refused with 429.
    max_top_k : int
        Documents one ``/retrieve`` may ask for.
    watch_ms : float
        With ``index``: how often the index folder is checked for a generation another
        process made live, which is then loaded and served (0: never).
    api_key_file : str, optional
        A file holding the key that requests must send as ``Authorization: Bearer KEY``.
    cache_dir : str, optional
        Keep the embedding cache on disk there too (shared by the workers and runs).
    cache_size : int
        Embeddings each worker keeps in memory (by content hash, least recently used go
        first; 1.5 kB each at D = 384).
    cache_queries : bool
        Cache query embeddings too. Off by default: queries rarely repeat, so each batch's
        queries are encoded afresh, in one encoder call, and only documents are cached.
    model_name : str
        The ``model`` that responses name (the method spec by default).
    encoder_backend : str
        Runtime of the text encoders (:mod:`georag.retrieval.backends`; ``torch`` by default).
    """

    method: str = "maniscope"
    options: dict = field(default_factory=dict)
    index: str | None = None
    rerank: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    max_batch: int = 32
    max_wait_ms: float = 2.0
    max_read_ms: float = MAX_READ_MS
    workers: int = 1
    threads: int = 1
    max_docs: int = 1000
    max_text_chars: int = 20_000
    max_body_bytes: int = 8 * 1024 * 1024
    max_queue: int = 256
    max_top_k: int = 100
    watch_ms: float = 500.0
    api_key_file: str | None = None
    cache_dir: str | None = None
    cache_size: int = 200_000
    cache_queries: bool = False
    model_name: str = ""
    encoder_backend: str = "torch"

    def __post_init__(self) -> None:
        for name in ("max_batch", "workers", "threads", "max_docs", "max_text_chars", "cache_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')}: must be at least 1")
        if self.max_top_k < 1:
            raise ValueError("--max-top-k: must be at least 1")
        if self.index is not None and self.workers != 1:
            raise ValueError(
                "--workers: an index is updated in the memory of its one process; "
                "serve --index with --workers 1"
            )
        if self.rerank is not None and self.index is None:
            raise ValueError("--rerank: reranks what --index retrieves; give --index")
        if self.max_body_bytes < 1024:
            raise ValueError("--max-body-bytes: must be at least 1024")
        if self.max_queue < self.max_batch:
            raise ValueError("--max-queue: must be at least --max-batch")
        for name in ("max_wait_ms", "max_read_ms", "watch_ms"):
            if not 0 <= getattr(self, name) <= 10_000:
                raise ValueError(f"--{name.replace('_', '-')}: must lie in [0, 10000]")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port: expected 0..65535, got {self.port}")

    @property
    def served_name(self) -> str:
        """The ``model`` named in responses."""
        return self.model_name or self.method

    def to_json(self) -> str:
        """The settings as JSON (how worker processes receive them)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        return cls(**json.loads(text))

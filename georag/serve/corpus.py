"""The corpus retrieval service: a :class:`georag.Retriever` behind ``/retrieve`` and
``/documents``, without its web framework.

``/retrieve`` requests are micro-batched like rerank requests: a batch's queries go to
:meth:`georag.Retriever.retrieve_batch` in one call per ``top_k`` among them (so each
answer is what :meth:`~georag.Retriever.retrieve` gives that query and ``top_k``
alone). Updates (``POST`` / ``DELETE /documents``) run one at a time in a thread beside
the event loop, so retrieval goes on while their documents are encoded; the retriever
swaps its state in at once when an update is applied (it is safe to call
``retrieve_batch`` during ``add`` and ``delete``), so a batch sees the index wholly
before or wholly after an update, and the update is answered once applied: a
``/retrieve`` sent after its answer sees it. An index is updated in the memory of its
process, so it is served by one worker.
"""

from __future__ import annotations

import asyncio
import collections
import os

from georag.serve.config import ServeConfig
from georag.serve.service import Service, demo_texts, encode_batch
from georag.serve.shapes import (
    RequestError,
    RetrieveRequest,
    answer_retrieve,
    parse_documents,
    parse_ids,
    parse_retrieve,
)

__all__ = ["CorpusService", "build_retriever"]


def build_retriever(config: ServeConfig):
    """The :class:`georag.Retriever` of ``config.index`` (raises ``ValueError`` or
    ``OSError`` in one line naming the file or field when the index cannot serve)."""
    import georag

    retriever = georag.Retriever(
        config.index, method=config.method, options=config.options or None, rerank=config.rerank
    )
    retriever.encoder.batch_size = encode_batch(retriever.encoder.backend)
    return retriever


def _one_line(error: Exception) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]


class CorpusService(Service):
    """One worker's corpus retrieval service.

    Parameters
    ----------
    config : ServeConfig
        With ``index`` set.
    retriever : georag.Retriever, optional
        Already loaded (the command loads it first, to fail fast); else loaded at start.
    """

    def __init__(self, config: ServeConfig, retriever=None) -> None:
        super().__init__(config)
        self.retriever = retriever
        self._updates = asyncio.Lock()

    def _prepare(self) -> None:
        """Load the index unless given; run the method once alone and once batched."""
        if self.retriever is None:
            self.retriever = build_retriever(self.config)
        queries = demo_texts("queries.jsonl")[:2]
        self.retriever.retrieve(queries[0], k=3)
        self.retriever.retrieve_batch(queries, k=3)

    def _run(self, requests: list[RetrieveRequest]) -> list:
        """One ``retrieve_batch`` call per distinct ``top_k``; answers in request order."""
        rows_of: dict[int, list[int]] = collections.defaultdict(list)
        for i, request in enumerate(requests):
            rows_of[request.top_k].append(i)
        answers: list = [None] * len(requests)
        for k, rows in rows_of.items():
            found = self.retriever.retrieve_batch([requests[i].query for i in rows], k=k)
            for i, docs in zip(rows, found):
                answers[i] = docs
        return answers

    def health(self) -> tuple[int, dict]:
        """``(status, body)`` of ``GET /health``: 200 once the index is loaded and warm."""
        body = {"status": "ready" if self.ready else "warming up", "pid": os.getpid()}
        body.update(method=self.config.method, index=self.config.index)
        if self.ready:
            body.update(size=self.retriever.size, max_batch=self.config.max_batch)
        return (200 if self.ready else 503), body

    async def retrieve(self, raw: bytes) -> dict:
        """The answer to a ``/retrieve`` body."""
        request = parse_retrieve(self.body(raw), self.limits)
        docs = await self.batcher.submit(request)
        return answer_retrieve(request, docs, {"method": self.config.method})

    async def add(self, raw: bytes) -> dict:
        """Add the documents of a ``POST /documents`` body; answered once applied."""
        documents = parse_documents(self.body(raw), self.limits)
        size = await self._update(self.retriever.add, documents, "documents")
        self.metrics.documents["added"] += len(documents)
        return {"added": len(documents), "size": size}

    async def delete(self, raw: bytes) -> dict:
        """Delete the ids of a ``DELETE /documents`` body; answered once applied."""
        ids = parse_ids(self.body(raw), self.limits)
        size = await self._update(self.retriever.delete, ids, "ids")
        self.metrics.documents["deleted"] += len(ids)
        return {"deleted": len(ids), "size": size}

    async def _update(self, apply, items: list, where: str) -> int:
        """Apply one update at a time, in a thread; the index size after it.

        The retriever's ``ValueError`` (an id already there, an id not there, deleting the
        last passage) is refused with 409 and its message; nothing was applied then.
        """
        async with self._updates:
            try:
                await asyncio.to_thread(apply, items)
            except ValueError as error:
                raise RequestError(409, f"{where}: {_one_line(error)}") from None
            return self.retriever.size

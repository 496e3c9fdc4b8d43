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

Another process may update the same folder (``georag index add|delete``, another
``georag.Retriever``): every ``watch_ms`` the service reads the index's ``CURRENT`` and,
when it names a generation other than the one served, reloads it in a thread (taking the
updates' turn) and swaps it in whole, as after its own update; ``GET /health`` names the
generation served.
"""

from __future__ import annotations

import asyncio
import collections
import logging
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

__all__ = ["CorpusService", "apply_update", "build_retriever", "follow", "one_line"]

log = logging.getLogger(__name__)


def follow(retriever, index: str) -> bool:
    """Load the generation that ``index``'s ``CURRENT`` names into ``retriever`` when it is
    not the one served (reading one small file otherwise); whether it was loaded."""
    from georag.retrieval.generations import current_generation

    if current_generation(index).name == retriever.generation:
        return False
    return retriever.reload()


def build_retriever(config: ServeConfig):
    """The :class:`georag.Retriever` of ``config.index`` (raises ``ValueError`` or
    ``OSError`` in one line naming the file or field when the index cannot serve)."""
    import georag

    retriever = georag.Retriever(
        config.index, method=config.method, options=config.options or None, rerank=config.rerank
    )
    retriever.encoder.batch_size = encode_batch(retriever.encoder.backend)
    return retriever


def one_line(error: Exception) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]


def apply_update(apply, items: list, where: str) -> None:
    """``apply(items)`` (a retriever's ``add`` or ``delete``); its ``ValueError`` (an id
    already there, an id not there, deleting the last passage) is refused with 409 and its
    message, ``where`` first: nothing was applied then."""
    try:
        apply(items)
    except ValueError as error:
        raise RequestError(409, f"{where}: {one_line(error)}") from None


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
        self._watch: asyncio.Task | None = None

    async def start(self) -> None:
        """Start as a rerank service does, then follow the index's generations."""
        await super().start()
        if self.config.watch_ms > 0:
            self._watch = asyncio.get_running_loop().create_task(self._follow())

    async def stop(self) -> None:
        """Stop following the index, then answer what was accepted."""
        if self._watch is not None:
            self._watch.cancel()
        await super().stop()

    async def _follow(self) -> None:
        """Reload the index whenever another process made another generation live."""
        while True:
            await asyncio.sleep(self.config.watch_ms / 1000.0)
            try:
                async with self._updates:
                    if await asyncio.to_thread(follow, self.retriever, self.config.index):
                        log.info("serving %s of %s", self.retriever.generation, self.config.index)
            except Exception as error:  # noqa: BLE001 - the generation served stays
                log.warning("index %s not reloaded: %s", self.config.index, one_line(error))

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
            body.update(size=self.retriever.size, generation=self.retriever.generation)
            body.update(max_batch=self.config.max_batch)
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
        """Apply one update at a time, in a thread; the index size after it."""
        async with self._updates:
            await asyncio.to_thread(apply_update, apply, items, where)
            return self.retriever.size

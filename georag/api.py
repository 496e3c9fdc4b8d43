"""Text in, ranking out: any georag reranker behind ``rank(query, docs)``.

The rerankers work on a :class:`~georag.batch.CandidateBatch` of embeddings; this
class builds that batch from texts. Queries and documents are encoded with the configured
sentence encoder (all-MiniLM-L6-v2 by default), each text once: embeddings are cached by
content hash (:class:`~georag.retrieval.text_cache.TextEmbeddingCache`), in memory and, with
``cache_dir``, on disk (queries too, unless ``cache_queries=False``). The first-stage
score of a document is its ``score`` when every document carries one, else the cosine of
query and document, as in georag's dense first stage.

Examples
--------
>>> reranker = Reranker("maniscope")                               # doctest: +SKIP
>>> reranker.rank("what is ricci flow?", ["doc one", "doc two"])   # doctest: +SKIP
[RankedDoc(id='1', score=0.61, kept=True, rank=0, index=1, text='doc two'), ...]
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.rerank.registry import is_retriever, make_reranker
from georag.rerank.small_pool import rerank_small_pools
from georag.resources import DEFAULT_MODEL
from georag.retrieval.backends import with_backend
from georag.retrieval.encoder import TextEncoder
from georag.retrieval.text_cache import TextEmbeddingCache

__all__ = ["Reranker", "RankedDoc"]

Doc = str | Mapping[str, object]


@dataclass(frozen=True)
class RankedDoc:
    """One document of a ranking.

    Attributes
    ----------
    id : str
        The document's ``id`` (its position in ``docs`` for plain strings).
    score : float
        The reranker's score; ``-inf`` for a document the method dropped.
    kept : bool
        Whether the method kept the document (filters such as Ricci-Filtration drop some).
    rank : int
        Position in the returned list.
    index : int
        Position in the input ``docs``.
    text : str
    fallback : bool
        True when the query had too few documents for the method's geometry, so the list
        is the first-stage order (see :mod:`georag.rerank.small_pool`).
    """

    id: str
    score: float
    kept: bool
    rank: int
    index: int
    text: str
    fallback: bool = False


def _normalize(docs: Sequence[Doc], where: str) -> tuple[list[str], list[str], list | None]:
    """``(ids, texts, scores or None)`` of one docs list; ValueError naming ``where``."""
    if isinstance(docs, (str, bytes)) or not isinstance(docs, Sequence):
        raise ValueError(f"{where}: expected a list of strings or dicts, got {type(docs).__name__}")
    if len(docs) == 0:
        raise ValueError(f"{where}: empty list, give at least one document")
    if all(isinstance(doc, str) for doc in docs):  # the common case: positions as ids
        return [str(i) for i in range(len(docs))], list(docs), None
    ids, texts, scores = [], [], []
    for i, doc in enumerate(docs):
        if isinstance(doc, str):
            ids.append(str(i))
            texts.append(doc)
            scores.append(None)
            continue
        if not isinstance(doc, Mapping):
            raise ValueError(f"{where}[{i}]: expected a string or a dict, got {type(doc).__name__}")
        text = doc.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{where}[{i}]: no 'text' (a non-empty string is required)")
        ids.append(str(doc.get("id", i)))
        texts.append(text)
        score = doc.get("score")
        scores.append(None if score is None else float(score))
    seen: set[str] = set()
    for i, doc_id in enumerate(ids):
        if doc_id in seen:
            raise ValueError(f"{where}[{i}]: duplicate id {doc_id!r}")
        seen.add(doc_id)
    given = [s for s in scores if s is not None]
    if given and len(given) != len(scores):
        raise ValueError(f"{where}: give a 'score' for every document or for none")
    if any(not math.isfinite(s) for s in given):
        raise ValueError(f"{where}: every 'score' must be finite")
    return ids, texts, (scores if given else None)


class Reranker:
    """A georag reranker over texts.

    Parameters
    ----------
    method : str
        Any registry spec: ``"maniscope"``, ``"diffusion"``, ``"ricci"``, ``"ricci+bi"``,
        ``"hyte"`` ... (see :func:`georag.rerank.registry.make_reranker`).
    options : dict, optional
        ``{stage name: {config field: value}}`` overrides, e.g. learned weights
        ``{"hyte": {"weights": "runs/hyte/projection.pt"}}``.
    model : str
        Sentence encoder of the embeddings the geometry is built on.
    encoder : TextEncoder, optional
        An encoder to use instead of loading ``model``.
    cache_dir : path, optional
        Also keep the embeddings on disk there (shared across processes and runs).
    cache_size : int, optional
        Embeddings kept in memory at most (least recently used go first); unbounded
        by default.
    cache_queries : bool
        Keep the queries' embeddings in the cache too. False encodes the queries of each
        call afresh, all in one encoder call (for traffic whose queries rarely repeat: a
        service), and caches only documents.
    encoder_backend : str
        Runtime of every text encoder (this one and a ``bi`` or ``ce`` stage's): ``torch``
        (default), ``onnx``, ``onnx-int8``, ``openvino``, ``openvino-int8`` (CPU only; see
        :mod:`georag.retrieval.backends`).
    """

    def __init__(
        self,
        method: str = "maniscope",
        *,
        options: dict[str, dict] | None = None,
        model: str = DEFAULT_MODEL,
        encoder: TextEncoder | None = None,
        cache_dir: str | os.PathLike | None = None,
        cache_size: int | None = None,
        cache_queries: bool = True,
        encoder_backend: str = "torch",
    ) -> None:
        if not isinstance(method, str) or not method.strip():
            raise ValueError(f"method: expected a registry spec (e.g. maniscope), got {method!r}")
        self.method = method
        self.cache_queries = cache_queries
        self.stage = make_reranker(method, with_backend(method, options, encoder_backend))
        if is_retriever(self.stage):
            raise ValueError(
                f"method: {method!r} retrieves from a whole corpus, it does not rerank a docs list"
            )
        self.encoder = encoder or TextEncoder(model, show_progress=False, backend=encoder_backend)
        self.cache = TextEmbeddingCache(
            self.encoder.cache_key(),
            cache_dir,
            persist=cache_dir is not None,
            max_rows=cache_size,
        )

    def __repr__(self) -> str:
        return f"Reranker({self.method!r}, model={self.encoder.name!r})"

    def _encode(self, texts: list[str]) -> torch.Tensor:
        return self.cache.encode(texts, self.encoder.encode)

    def batch(
        self, queries: Sequence[str], docs_lists: Sequence[Sequence[Doc]]
    ) -> tuple[CandidateBatch, list[list[str]]]:
        """The :class:`CandidateBatch` of ``queries`` and their documents, and the texts.

        Returns
        -------
        batch : CandidateBatch
            B queries, padded to the longest docs list M.
        texts : list of list of str
            Each query's document texts, unpadded.
        """
        if isinstance(queries, str) or not isinstance(queries, Sequence):
            raise ValueError("queries: expected a list of query strings")
        if len(queries) == 0:
            raise ValueError("queries: empty list, give at least one query")
        if isinstance(docs_lists, str) or not isinstance(docs_lists, Sequence):
            raise ValueError("docs_lists: expected one list of documents per query")
        if len(docs_lists) != len(queries):
            raise ValueError(f"docs_lists: {len(docs_lists)} lists for {len(queries)} queries")
        for i, query in enumerate(queries):
            if not isinstance(query, str) or not query.strip():
                raise ValueError(f"queries[{i}]: expected a non-empty string")
        where = "docs" if len(queries) == 1 else "docs_lists[{}]"
        parsed = [_normalize(d, where.format(i)) for i, d in enumerate(docs_lists)]
        lengths = [len(ids) for ids, _, _ in parsed]
        b, m = len(queries), max(lengths)
        flat = [text for _, texts, _ in parsed for text in texts]
        if self.cache_queries:
            embeddings = self._encode(list(queries) + flat)
            query, docs = embeddings[:b], embeddings[b:]
        else:
            query, docs = self.encoder.encode(list(queries)), self._encode(flat)
        if min(lengths) == m:  # no padding: the flat rows are the batch
            cands, mask = docs.view(b, m, -1), torch.ones(b, m, dtype=torch.bool)
        else:
            mask = torch.arange(m) < torch.tensor(lengths).unsqueeze(1)
            cands = docs.new_zeros(b, m, docs.shape[1])
            cands[mask] = docs  # row-major, as ``flat``
        scores = torch.bmm(cands, query.unsqueeze(2)).squeeze(2)
        given = [(r, c, s) for r, (_, _, ss) in enumerate(parsed) if ss for c, s in enumerate(ss)]
        if given:
            r, c, s = zip(*given)
            scores[list(r), list(c)] = torch.tensor(s, dtype=scores.dtype)
        pad = [""] * m
        batch = CandidateBatch(
            query=query,
            cands=cands,
            scores=scores.masked_fill(~mask, 0.0),
            mask=mask,
            query_ids=[str(i) for i in range(b)],
            doc_ids=[ids + pad[len(ids) :] for ids, _, _ in parsed],
            query_texts=list(queries),
            cand_texts=[texts + pad[len(texts) :] for _, texts, _ in parsed],
        )
        return batch, [texts for _, texts, _ in parsed]

    def rank(self, query: str, docs: Sequence[Doc], top_k: int | None = None) -> list[RankedDoc]:
        """Rerank ``docs`` for ``query``.

        Parameters
        ----------
        query : str
        docs : list of str or dict
            Strings, or dicts with ``text`` and optionally ``id`` and a first-stage ``score``.
        top_k : int, optional
            Return only the best ``top_k``.

        Returns
        -------
        list of RankedDoc
            Kept documents by descending score, then the dropped ones in input order.
        """
        if isinstance(query, (list, tuple)):
            raise ValueError("query: expected one string (use rank_batch for many)")
        return self.rank_batch([query], [docs], top_k=top_k)[0]

    def rank_batch(
        self,
        queries: Sequence[str],
        docs_lists: Sequence[Sequence[Doc]],
        top_k: int | None = None,
    ) -> list[list[RankedDoc]]:
        """Rerank many queries in one batched call of the method (see :meth:`rank`).

        A query with fewer documents than the method's graph needs is answered by the
        method's small-pool rule (:mod:`georag.rerank.small_pool`), alone or in a batch.
        """
        if top_k is not None and (not isinstance(top_k, int) or top_k <= 0):
            raise ValueError(f"top_k: expected a positive integer, got {top_k!r}")
        batch, texts = self.batch(queries, docs_lists)
        result, fallback = rerank_small_pools(self.stage, batch.to(self.encoder.device))
        return self.rankings(batch, result, texts, top_k, fallback=fallback)

    @staticmethod
    def rankings(
        batch: CandidateBatch,
        result: RerankResult,
        texts: list[list[str]],
        top_k: int | None,
        *,
        fallback: torch.Tensor | None = None,
    ) -> list[list[RankedDoc]]:
        """Turn a result into one sorted :class:`RankedDoc` list per query
        (``fallback``: (B,) bool, the queries answered in first-stage order)."""
        flags = [False] * batch.batch_size if fallback is None else fallback.cpu().tolist()
        keep = result.keep.cpu() & batch.mask
        scores = result.scores.detach().cpu().masked_fill(~keep, -math.inf)
        order = torch.argsort(scores, dim=1, descending=True, stable=True).tolist()
        scores, keep = scores.tolist(), keep.tolist()  # Python numbers once, not per element
        out = []
        for row in range(batch.batch_size):
            n = len(texts[row])
            cols = [c for c in order[row] if c < n]
            ranked = [
                RankedDoc(
                    id=batch.doc_ids[row][c],
                    score=scores[row][c],
                    kept=keep[row][c],
                    rank=rank,
                    index=c,
                    text=texts[row][c],
                    fallback=bool(flags[row]),
                )
                for rank, c in enumerate(cols)
            ]
            out.append(ranked if top_k is None else ranked[:top_k])
        return out

"""Corpus retrieval by text: an index built once (:mod:`georag.retrievers.index`), any
corpus-level method of the registry over it, documents added and deleted live.

``Retriever(index_dir, method="hipporag2")`` loads the live generation of the index, fits the
method on it (its graph comes from the index; a method whose graph the index lacks is refused
at construction, naming the ``--graph`` to rebuild with) and answers
``retrieve(query, k)`` with the ranking ``georag eval`` gives for the same method and corpus.
A spec ``"iso+bi"`` (or ``rerank="bi"``) reranks the corpus method's top ``pool_size`` with
pool rerankers. :meth:`Retriever.add` and :meth:`Retriever.delete` write the index's next
generation and swap the fitted state in one assignment, so a concurrent ``retrieve`` answers
from the state before or after, never between. Another process's updates are picked up by
:meth:`Retriever.reload` (not automatically).

Examples
--------
>>> retriever = Retriever("runs/index", method="hipporag2")           # doctest: +SKIP
>>> [d.id for d in retriever.retrieve("why do tides rise?", k=2)]     # doctest: +SKIP
['d229', 'd010']
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from georag.batch import CandidateBatch, QueryBatch, RerankResult
from georag.rerank.registry import is_retriever, make_method, make_reranker
from georag.retrieval.encoder import TextEncoder
from georag.retrievers.index import CorpusIndex, update_index

__all__ = ["INDEX_METHODS", "RetrievedDoc", "Retriever", "required_graph"]

#: the corpus methods of the registry that run from an index
INDEX_METHODS = (
    "dense",
    "bm25",
    "hybrid",
    "iso",
    "ppr_global",
    "phrase_ppr",
    "hyte",
    "hipporag2",
    "iso_entity",
    "learned_iso",
    "learned_hipporag2",
    "learned_iso_entity",
)


@dataclass(frozen=True)
class RetrievedDoc:
    """One retrieved passage: its ``id``, ``title``, ``text`` and the method's ``score``."""

    id: str
    title: str
    text: str
    score: float


def _defaults_kept(config: object, names: Iterable[str], where: str) -> None:
    """The graph-shaping fields ``names`` of ``config`` must keep their defaults (the index
    holds the graph built with them)."""
    default = type(config)()
    changed = [n for n in names if getattr(config, n) != getattr(default, n)]
    if changed:
        raise ValueError(
            f"options: {where} reads the index's graph, built with the default {changed}; "
            "leave them unset"
        )


def required_graph(method: object, model: str) -> str | None:
    """The index graph (``--graph`` name) a corpus method fits from; None for none.

    Raises
    ------
    ValueError
        A method that cannot run from an index, or options that change its graph.
    """
    from georag.retrievers.base import EmbeddingRetriever
    from georag.retrievers.dense import DenseRetriever
    from georag.retrievers.entity import EntityGraphOptions, EntityGraphRetriever
    from georag.retrievers.hyte import HyTERetriever
    from georag.retrievers.learned import LearnedRetriever
    from georag.retrievers.lexical import BM25Retriever, HybridRetriever
    from georag.retrievers.phrase_ppr import PhrasePPR

    name = method.name
    if isinstance(method, LearnedRetriever):
        method = method.fixed_class(method.config.fixed)
    if isinstance(method, DenseRetriever | BM25Retriever | HybridRetriever):
        return None
    if isinstance(method, HyTERetriever):
        _defaults_kept(method.config, ("model", "weights", "k", "power", "offset"), name)
        return "hyte"
    config = method.config
    if isinstance(method, PhrasePPR):
        if config.entities is None:
            graph_fields = ("graph", "extractor", "max_words", "max_df", "phrases_per_passage")
            _defaults_kept(config, (*graph_fields, "knn", "knn_weight"), name)
            return "phrase"
        config = EntityGraphOptions(extractors=config.entities, model=model)
    if isinstance(method, EntityGraphRetriever | PhrasePPR):
        base = type(config)(extractors=config.extractors, model=model)
        if config.graph is not None or config.graph_config() != base.graph_config():
            raise ValueError(
                f"options: {name} reads the index's entity graph, built with the default "
                "graph settings and no 'graph' file; leave them unset"
            )
        if config.model != model:
            raise ValueError(f"options: {name}'s model is {config.model!r}, the index's {model!r}")
        return f"entity:{config.extractors}"
    if isinstance(method, EmbeddingRetriever) and not hasattr(type(method), "expand"):
        return "passage"
    raise ValueError(f"method: {name!r} cannot run from an index")


@dataclass(frozen=True)
class _State:
    """What one generation answers with (swapped whole by an update)."""

    index: CorpusIndex
    method: object


class Retriever:
    """Retrieve passages of an index by text with one corpus-level method.

    Parameters
    ----------
    index : path
        An index folder (``georag index``, :func:`georag.retrievers.index.build_index`).
    method : str
        A corpus-level method of the registry (``dense``, ``bm25``, ``hybrid``, ``iso``,
        ``ppr_global``, ``phrase_ppr``, ``hyte``, ``hipporag2``, ``iso_entity``, the
        ``learned_*`` ones), optionally followed by pool rerankers: ``"iso+bi"``.
    options : dict, optional
        The method's config fields (``{"fusion": "dense"}``), or ``{stage: {field: value}}``
        for every stage of a ``+`` spec.
    rerank : str, optional
        Pool rerankers after the method (``"bi"``, ``"maniscope+ce"``); same as ``+``.
    pool_size : int
        The corpus method's passages a reranker sees per query.

    Raises
    ------
    ValueError
        An unknown method, a pool reranker in first place, options that do not fit, or a
        graph the index lacks (naming the ``--graph`` to rebuild with).
    """

    def __init__(
        self,
        index: str | os.PathLike,
        method: str = "dense",
        options: Mapping | None = None,
        rerank: str | None = None,
        *,
        pool_size: int = 100,
    ) -> None:
        stages = [s.strip() for s in method.split("+")] + (
            [s.strip() for s in rerank.split("+")] if rerank else []
        )
        if not all(stages):
            raise ValueError(f"method: malformed spec {method!r}")
        if pool_size < 1:
            raise ValueError(f"pool_size: need >= 1, got {pool_size}")
        first, rest = stages[0], stages[1:]
        options = dict(options or {})
        per_stage = options and all(
            k in stages and isinstance(v, Mapping) for k, v in options.items()
        )
        self._options = options if per_stage else ({first: options} if options else {})
        if not is_retriever(first):
            raise ValueError(f"method: {first!r} is a pool reranker; start with a corpus method")
        self._second = make_reranker("+".join(rest), self._options) if rest else None
        if any(is_retriever(s) for s in rest):
            raise ValueError(f"method: only the first stage of {method!r} may rank the corpus")
        self._first, self._spec = first, "+".join(stages)
        self._root, self._pool = Path(index), pool_size
        self._write = threading.Lock()
        index_state = CorpusIndex.open(self._root)
        self._method(index_state)  # a missing graph fails before the encoder loads
        backend = index_state.manifest.get("encoder_backend", "torch")
        self._encoder = TextEncoder(index_state.model, show_progress=False, backend=backend)
        index_state.check_encoder(self._encoder)
        self._state = self._fit(index_state)

    def _method(self, index: CorpusIndex):
        """The first stage, built and checked against the graphs of ``index``."""
        method = make_method(self._first, self._options.get(self._first))
        graph = required_graph(method, index.model)
        if graph is not None and graph not in index.graphs:
            raise ValueError(
                f"method: {self._first} needs the graph {graph!r}, which {self._root} lacks "
                f"(it holds {list(index.graphs) or 'none'}); rebuild with "
                f"'georag index ... --graph {' '.join([*index.graphs, graph])}'"
            )
        return method

    def _fit(self, index: CorpusIndex) -> _State:
        method = self._method(index)
        method.fit(index.corpus())
        state = _State(index, method)
        self._search(state, ["index"], 1)  # loads what a method reads lazily, while its files exist
        return state

    # ------------------------------------------------------------------------ reading
    @property
    def size(self) -> int:
        """Passages in the index."""
        return self._state.index.size

    @property
    def method(self) -> str:
        """The method spec, stages joined by ``+``."""
        return self._spec

    @property
    def index_dir(self) -> Path:
        return self._root

    @property
    def encoder(self) -> TextEncoder:
        """The query encoder (the index's model; its ``batch_size`` may be set)."""
        return self._encoder

    @property
    def generation(self) -> str:
        """The name of the index generation answering now."""
        return self._state.index.generation.name

    def retrieve(self, query: str, k: int = 10) -> list[RetrievedDoc]:
        """The ``k`` best passages for ``query``, best first."""
        if not isinstance(query, str):
            raise ValueError(f"query: expected a string, got {type(query).__name__}")
        return self.retrieve_batch([query], k)[0]

    def retrieve_batch(self, queries: list[str], k: int = 10) -> list[list[RetrievedDoc]]:
        """The ``k`` best passages of each query (one batched call into the method)."""
        if isinstance(queries, str) or not all(isinstance(q, str) for q in queries):
            raise ValueError("queries: expected a list of strings")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k: need a positive integer, got {k!r}")
        if not queries:
            return []
        return self._search(self._state, list(queries), k)

    def _search(self, state: _State, queries: list[str], k: int) -> list[list[RetrievedDoc]]:
        index, method = state.index, state.method
        embeddings = self._encoder.encode(queries).to(index.embeddings.dtype)
        batch = QueryBatch([str(i) for i in range(len(queries))], queries, embeddings)
        depth = k if self._second is None else max(k, self._pool)
        ranked = _ranked(method.retrieve(batch, top_k=depth), method.row_ids, depth)
        if self._second is not None:
            ranked = self._rerank(index, batch, ranked, k)
        return [
            [RetrievedDoc(index.doc_ids[r], index.titles[r], index.texts[r], s) for r, s in row]
            for row in _rows(index, ranked)
        ]

    def _rerank(self, index, queries: QueryBatch, ranked, k: int):
        rows = _rows(index, ranked)
        width = max(len(r) for r in rows)
        pad = [[*r, *[(0, 0.0)] * (width - len(r))] for r in rows]
        at = torch.tensor([[j for j, _ in r] for r in pad])
        mask = torch.tensor([[i < len(r) for i in range(width)] for r in rows])
        full = index.full_texts()
        pool = CandidateBatch(
            query=queries.embeddings,
            cands=index.embeddings[at],
            scores=torch.tensor([[s for _, s in r] for r in pad]),
            mask=mask,
            query_ids=queries.ids,
            doc_ids=[[index.doc_ids[j] for j, _ in r] for r in pad],
            query_texts=queries.texts,
            cand_texts=[[full[j] for j, _ in r] for r in pad],
        )
        result = self._second(pool)
        return _ranked(result, pool.doc_ids, k)

    # ------------------------------------------------------------------------ writing
    def add(self, documents: Iterable) -> None:
        """Add passages (``{"id", "title"?, "text"}`` dicts or objects with those
        attributes); an id already in the index, or given twice, is a ValueError."""
        self._update(add=list(documents))

    def delete(self, ids: Iterable[str]) -> None:
        """Delete passages by id; unknown ids are a ValueError naming them."""
        if isinstance(ids, str):
            ids = [ids]
        self._update(delete=list(ids))

    def reload(self) -> bool:
        """Pick up a generation another process wrote; True when it changed."""
        with self._write:
            index = CorpusIndex.open(self._root)
            if index.generation == self._state.index.generation:
                return False
            self._state = self._fit(index)
            return True

    def _update(self, **change) -> None:
        with self._write:
            index = update_index(self._root, encoder=self._encoder, **change)
            self._state = self._fit(index)  # one assignment: readers see before or after

    def __repr__(self) -> str:
        return f"Retriever({str(self._root)!r}, method={self._spec!r}, size={self.size})"


def _ranked(result: RerankResult, row_ids, k: int) -> list[list[tuple[str, float]]]:
    """Each query's best ``k`` documents ``(id, score)``: rows by score (stable), a document
    of several rows at its best one (:func:`georag.batch.scores_to_run`'s rule)."""
    scores = result.scores.detach().float().masked_fill(~result.keep, -torch.inf)
    width = int(result.keep.sum(1).max()) if scores.numel() else 0
    top, order = scores.cpu().sort(dim=1, descending=True, stable=True)
    top, order = top[:, :width].tolist(), order[:, :width].tolist()
    out = []
    for row, (values, cols) in enumerate(zip(top, order)):
        ids = row_ids if not row_ids or isinstance(row_ids[0], str) else row_ids[row]
        seen: dict[str, float] = {}
        for value, col in zip(values, cols):
            if value == -torch.inf or len(seen) == k:
                break
            seen.setdefault(ids[col], value)
        out.append(list(seen.items()))
    return out


def _rows(index: CorpusIndex, ranked) -> list[list[tuple[int, float]]]:
    """``ranked`` with each document id replaced by its corpus row."""
    return [[(index.row_of[d], s) for d, s in row] for row in ranked]

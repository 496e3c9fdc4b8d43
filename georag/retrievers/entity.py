"""What the retrievers over the entity-passage graph share: the graph's options, the graph of
a corpus (built with the corpus' encoder, cached, or loaded and checked), query-to-phrase
linking, and the fusion of a graph score with dense and BM25 scores.

The graph itself is :mod:`georag.retrieval.entity_graph`; the retrievers are
:mod:`~georag.retrievers.hipporag2`, :mod:`~georag.retrievers.iso_entity` and
:mod:`~georag.retrievers.phrase_ppr` (with ``graph_kind="entity"``).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

import torch

from georag.batch import Corpus, QueryBatch
from georag.resources import DEFAULT_MODEL
from georag.retrieval.bm25 import BM25Index
from georag.retrieval.entity_graph import (
    EntityGraph,
    EntityGraphConfig,
    build_entity_graph,
    load_entity_graph,
)
from georag.retrieval.phrase_graph import corpus_fingerprint
from georag.retrievers.base import ScoredRetriever
from georag.retrievers.lexical import corpus_bm25, minmax

__all__ = [
    "FUSIONS",
    "GRAPH_FIELDS",
    "EntityGraphOptions",
    "EntityGraphRetriever",
    "entity_graph_folder",
    "entity_graph_for",
    "fused_scores",
    "fusion_base",
    "link_scores",
]

FUSIONS = ("none", "dense", "dense+bm25")
LINKINGS = ("both", "embedding", "mention")
#: the options that are the graph's (:class:`EntityGraphConfig` fields of the same name); a
#: retriever's own settings never share a name with a field of the graph's config
GRAPH_FIELDS = (
    "max_words",
    "max_df",
    "synonym_threshold",
    "synonym_max",
    "title_form",
    "min_mention",
    "hub_df",
)


@dataclass(frozen=True)
class EntityGraphOptions:
    """How a retriever gets its entity-passage graph and fuses its score.

    Attributes
    ----------
    extractors : str
        Comma-separated phrase extractors of the graph (``title``, ``ngram``, ``spacy``).
    max_words, max_df
        The ``ngram`` extractor's settings.
    synonym_threshold : float or None
        Least cosine of a synonym edge between two phrases; None: no synonym edges.
    synonym_max : int
        Most synonym neighbours per phrase.
    title_form : {"as_is", "strip", "strip_apart"}
        How titles are named and mentioned (:func:`~georag.retrieval.extractors.title_name`).
    min_mention : int
        Least alphanumerics of a title looked up in passages and queries.
    hub_df : int or None
        Phrases held by more passages are left out of the graph (None: none).
    model : str
        The encoder of the phrases; it must be the corpus' and the queries' encoder.
    graph : str, optional
        A saved graph folder of the corpus (checked against it); none: built and cached
        under ``corpus.cache_dir/graphs``.
    fusion : {"none", "dense", "dense+bm25"}
        ``none`` ranks by the graph score alone; otherwise the final score is
        ``base + fusion_weight * graph / max(graph)`` with ``base`` the min-max normalized
        dense cosine, or the mean of the min-max normalized dense and BM25 scores.
    fusion_weight : float
        The graph's weight in the fusion (1: the two scores on one footing, fixed a priori).
    link_top_k : int
        Phrases linked per query (HippoRAG 2's ``linking_top_k``).
    linking : {"both", "embedding", "mention"}
        How a query links to phrases (:func:`link_scores`).
    """

    extractors: str = ",".join(EntityGraphConfig.extractors)
    max_words: int = EntityGraphConfig.max_words
    max_df: float = EntityGraphConfig.max_df
    synonym_threshold: float | None = EntityGraphConfig.synonym_threshold
    synonym_max: int = EntityGraphConfig.synonym_max
    title_form: str = EntityGraphConfig.title_form
    min_mention: int = EntityGraphConfig.min_mention
    hub_df: int | None = EntityGraphConfig.hub_df
    model: str = DEFAULT_MODEL
    graph: str | None = None
    fusion: str = "none"
    fusion_weight: float = 1.0
    link_top_k: int = 5  # HippoRAG 2's linking_top_k
    linking: str = "mention"  # the training files' choice (docs/methods/entity_graph.md)

    def __post_init__(self) -> None:
        self.graph_config()  # its own checks
        if self.linking not in LINKINGS:
            raise ValueError(f"linking must be one of {LINKINGS}, got {self.linking!r}")
        if self.link_top_k < 1:
            raise ValueError(f"link_top_k must be at least 1, got {self.link_top_k}")
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {self.fusion!r}")
        if not (math.isfinite(self.fusion_weight) and self.fusion_weight >= 0):
            raise ValueError(f"fusion_weight must be finite and >= 0, got {self.fusion_weight}")

    def graph_config(self) -> EntityGraphConfig:
        """The :class:`EntityGraphConfig` of these options: the extractors and
        :data:`GRAPH_FIELDS`; every other graph setting at the graph's default."""
        extractors = tuple(e.strip() for e in self.extractors.split(",") if e.strip())
        return EntityGraphConfig(
            extractors=extractors, **{n: getattr(self, n) for n in GRAPH_FIELDS}
        )


@cache
def _encoder(model: str):
    from georag.retrieval.encoder import TextEncoder

    return TextEncoder(model)


def entity_graph_folder(corpus: Corpus, options: EntityGraphOptions) -> Path | None:
    """Where :func:`entity_graph_for` caches the graph of ``corpus`` (None without a cache):
    ``corpus.cache_dir/graphs``, keyed by the graph config, the encoder and the corpus."""
    if corpus.cache_dir is None:
        return None
    fingerprint = corpus_fingerprint(corpus.doc_ids, corpus.titles, corpus.texts)
    key = json.dumps(
        {"config": asdict(options.graph_config()), "model": options.model, "corpus": fingerprint},
        sort_keys=True,
    )
    name = hashlib.sha256(key.encode()).hexdigest()[:32]
    return Path(corpus.cache_dir) / "graphs" / f"entity-graph-{name}"


def entity_graph_for(corpus: Corpus, options: EntityGraphOptions) -> EntityGraph:
    """The entity-passage graph of ``corpus``: ``options.graph`` loaded and checked against
    the corpus, else loaded from or built into ``corpus.cache_dir/graphs`` (keyed by the
    graph config, the encoder and the corpus fingerprint), else built."""
    fingerprint = corpus_fingerprint(corpus.doc_ids, corpus.titles, corpus.texts)
    if options.graph is not None:
        return load_entity_graph(options.graph, fingerprint=fingerprint)
    config = options.graph_config()
    folder = entity_graph_folder(corpus, options)
    if folder is not None and folder.is_dir():
        try:
            return load_entity_graph(folder, fingerprint=fingerprint)
        except ValueError:
            pass  # a corrupt cache entry is rebuilt
    encoder = _encoder(options.model)  # phrase embeddings: for linking and synonym edges
    graph = build_entity_graph(
        corpus.doc_ids,
        corpus.titles,
        corpus.texts,
        config=config,
        encode=encoder.encode,
        progress=True,
    )
    if folder is not None:
        graph.save(folder)
    return graph


class EntityGraphRetriever(ScoredRetriever):
    """What the retrievers over the entity-passage graph share: the config (an
    :class:`EntityGraphOptions`), the graph of the corpus, its weight matrix and, for
    ``dense+bm25`` fusion, the BM25 index of its passages; a subclass adds its own parts in
    :meth:`index`."""

    config: EntityGraphOptions

    def fit(self, corpus: Corpus):
        """Index ``corpus``: its entity-passage graph (:func:`entity_graph_for`)."""
        return self.fit_graph(
            corpus.embeddings, entity_graph_for(corpus, self.config), doc_ids=corpus.doc_ids
        )

    def fit_graph(self, embeddings: torch.Tensor, graph: EntityGraph, *, doc_ids: list[str]):
        """Index a corpus given as unit-norm embeddings (N, D) and its entity-passage graph."""
        n = graph.num_passages
        if embeddings.dim() != 2 or embeddings.shape[0] != n:
            raise ValueError(
                f"graph: has {n} passages, embeddings have shape {tuple(embeddings.shape)}"
            )
        if len(doc_ids) != n:
            raise ValueError(f"doc_ids has {len(doc_ids)} ids for {n} passages")
        self.embeddings, self.graph, self.doc_ids = embeddings, graph, list(doc_ids)
        self.csr = self.weight_matrix(graph)
        self.bm25 = None
        if self.config.fusion == "dense+bm25":
            self.bm25 = corpus_bm25(*graph.passages()[1:])
        self.index(graph)
        return self

    def weight_matrix(self, graph: EntityGraph) -> torch.Tensor:
        """The graph's weight matrix the retriever walks (sparse CSR, the embeddings' dtype)."""
        return graph.to_csr(self.embeddings.dtype)

    def index(self, graph: EntityGraph) -> None:
        """The subclass' own parts of the index (called last by :meth:`fit_graph`)."""

    def check_width(self, queries: QueryBatch) -> None:
        """Queries must be embedded by the corpus' encoder (same width)."""
        if queries.embeddings.shape[1] != self.embeddings.shape[1]:
            raise ValueError(
                f"queries: embeddings of width {queries.embeddings.shape[1]}, the corpus' "
                f"are {self.embeddings.shape[1]}"
            )


def link_scores(
    query: torch.Tensor,
    texts: list[str],
    graph: EntityGraph,
    *,
    top_k: int,
    linking: str = "both",
) -> torch.Tensor:
    """Query-to-phrase linking: the ``top_k`` phrases of each query and their link scores.

    A phrase's link score is its min-max normalized cosine to the query over all phrases
    (HippoRAG 2 min-max normalizes its fact scores; ``linking="embedding"``), and 1 (the
    largest) for a phrase the query mentions word for word (``linking="mention"``: these
    alone); ``"both"`` takes the larger. The ``top_k`` best are kept (of equal scores, the
    more specific phrase), the others are 0.

    Parameters
    ----------
    query : torch.Tensor, shape (B, D)
        Unit-norm query embeddings of the graph's encoder.
    texts : list of str, length B
    graph : EntityGraph
        With phrase embeddings of width D.
    top_k : int
    linking : {"both", "embedding", "mention"}

    Returns
    -------
    torch.Tensor, shape (B, P)
    """
    b, p = query.shape[0], len(graph.phrases)
    if p == 0:
        return query.new_zeros(b, 0)
    if graph.phrase_embeddings is None or linking == "mention":
        scores = query.new_zeros(b, p)
    else:
        phrases = torch.as_tensor(graph.phrase_embeddings).to(query.dtype)
        if phrases.shape[1] != query.shape[1]:
            raise ValueError(
                f"query: embeddings of width {query.shape[1]}, the graph's phrases have "
                f"{phrases.shape[1]} (encode queries with the graph's model)"
            )
        scores = minmax(query @ phrases.T)
    if linking != "embedding":
        scores = torch.maximum(scores, graph.mentions(texts).to(query.dtype))
    k = min(top_k, p)
    # equal scores (mentions score 1) go to the more specific phrase
    tie = graph.specificity().to(query.dtype) * torch.finfo(query.dtype).eps
    at = (scores + tie).topk(k, dim=1).indices
    return torch.zeros_like(scores).scatter_(1, at, scores.gather(1, at))


def fusion_base(
    dense: torch.Tensor, texts: list[str], bm25: BM25Index | None, fusion: str
) -> torch.Tensor | None:
    """The base score a graph score is fused on, shape (B, N): the min-max normalized dense
    score (``fusion="dense"``), its mean with the min-max normalized BM25 score
    (``"dense+bm25"``), or None (``"none"``: the graph score alone)."""
    if fusion == "none":
        return None
    base = minmax(dense)
    if fusion == "dense+bm25":
        if bm25 is None:
            raise ValueError("bm25: fusion 'dense+bm25' needs the corpus' BM25 index")
        base = 0.5 * base + 0.5 * minmax(bm25.scores(list(texts)).to(dense.dtype))
    return base


def fused_scores(
    graph_scores: torch.Tensor, base: torch.Tensor | None, weight: float | torch.Tensor
) -> torch.Tensor:
    """The final score of every passage (B, N): ``base + weight * graph / max(graph)``, or
    the graph score alone without a base (:func:`fusion_base`); ``weight`` may be a tensor."""
    if base is None:
        return graph_scores
    top = graph_scores.amax(dim=1, keepdim=True).clamp_min(torch.finfo(graph_scores.dtype).tiny)
    return base + weight * graph_scores / top

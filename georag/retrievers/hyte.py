"""HyTE-H as the paper runs it over a corpus: BM25 top-50, then the hybrid BM25 + Lorentz
score (:mod:`georag.rerank.hyte` holds the config, the encoder and the pool stage
``hyte_rescore``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from georag.batch import Corpus, QueryBatch, RerankResult
from georag.rerank.base import CorpusRetriever
from georag.rerank.hyte import HyTEConfig, build_index
from georag.rerank.registry import register
from georag.retrieval.cache import content_hash
from georag.retrieval.lorentz_index import LorentzIndex

__all__ = ["HyTERetriever"]


@register
class HyTERetriever(CorpusRetriever):
    """HyTE-H as the paper runs it: BM25 top-``top_m`` over the corpus, then the hybrid score.

    :meth:`fit` chunks the corpus (W=300, O=60 words), encodes every chunk into a Lorentz
    point once and builds the BM25 state: a :class:`~georag.retrieval.lorentz_index.LorentzIndex`
    kept under ``corpus.cache_dir/lorentz`` (keyed by the texts and the projection) or in a
    temporary folder. :meth:`retrieve` scores the index's chunks (MaxP per document in a run).

    Parameters
    ----------
    config : HyTEConfig, optional
    """

    name = "hyte"
    config_class = HyTEConfig
    pool_variant = "hyte_rescore"

    def __init__(self, config: HyTEConfig | None = None) -> None:
        self.config = config or HyTEConfig()
        self.index = None

    def fit(self, corpus: Corpus) -> HyTERetriever:
        """Build (or load from the cache) the Lorentz index of ``corpus``."""
        cfg = self.config
        joined = (f"{title} {text}".strip() for title, text in zip(corpus.titles, corpus.texts))
        # a document with no text has no BM25 term, so it can never be retrieved: not indexed
        docs = {doc_id: text for doc_id, text in zip(corpus.doc_ids, joined) if text}
        if not docs:
            raise ValueError("corpus: every document is empty; hyte has nothing to index")
        key = content_hash(
            [
                *docs,
                *docs.values(),
                cfg.model,
                str(cfg.weights),
                str(cfg.k),
                str(cfg.power),
                str(cfg.offset),
            ]
        )[:32]
        if corpus.cache_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="georag-hyte-")
            folder = Path(self._tmp.name)
        else:
            folder = Path(corpus.cache_dir) / "lorentz" / key
        try:
            self.index = LorentzIndex.load(folder)
        except (OSError, ValueError):
            folder.mkdir(parents=True, exist_ok=True)
            self.index = build_index(docs, folder, cfg)
        self._row_ids = self.index.doc_ids
        return self

    @property
    def row_ids(self) -> list[str]:
        """The document id of each chunk row."""
        if self.index is None:
            raise ValueError("hyte: call fit(corpus) before retrieving")
        return self._row_ids

    def retrieve(self, queries: QueryBatch, *, top_k: int) -> RerankResult:
        """Hybrid scores over the chunk rows; the best ``min(top_k, top_m)`` are kept."""
        rows = len(self.row_ids)
        scores, chunks = self.index.search(
            queries.texts,
            k=min(top_k, self.config.top_m),
            alpha=self.config.alpha,
            top_m=self.config.top_m,
        )
        full = torch.full((len(queries.ids), rows), -torch.inf, dtype=scores.dtype)
        full.scatter_(1, chunks, scores)
        return RerankResult(scores=full, keep=full > -torch.inf)

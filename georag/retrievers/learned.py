"""What the learnable corpus retrievers share (``learned_iso``, ``learned_iso_entity``,
``learned_hipporag2``): indexing through their fixed method, the fixed method at the current
knob values for inference (rebuilt only when a knob changed), and the module's two modes.

A subclass sets ``fixed_class`` (the fixed retriever, built from the config's ``fixed``),
keeps what it needs of the fitted fixed retriever in :meth:`LearnedRetriever._index`, builds
the fixed retriever at the current knobs in :meth:`LearnedRetriever._build_fixed` and
implements the differentiable :meth:`~georag.rerank.learned.LearnableReranker.score`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from georag.batch import Corpus, QueryBatch, RerankResult
from georag.rerank.learned import LearnableReranker
from georag.rerank.pool import top_k_mask
from georag.retrievers.base import CorpusRows

__all__ = ["LearnedRetriever"]


class LearnedRetriever(LearnableReranker, CorpusRows):
    """A learnable corpus-level retriever: a :class:`torch.nn.Module` with ``fit`` and
    ``retrieve`` (module docstring)."""

    #: the fixed retriever class whose knobs these are
    fixed_class: ClassVar[type]
    _fixed: tuple[tuple, Any] | None = None

    def fit(self, corpus: Corpus):
        """Index ``corpus`` through the fixed method (which checks it)."""
        return self._index(self.fixed_class(self.config.fixed).fit(corpus))

    def fit_graph(self, *args, **kwargs):
        """Index a corpus given as embeddings and its graph: the arguments of the fixed
        method's ``fit_graph``."""
        return self._index(self.fixed_class(self.config.fixed).fit_graph(*args, **kwargs))

    def _index(self, fixed) -> LearnedRetriever:
        """Keep what training and inference need of the fitted fixed retriever."""
        raise NotImplementedError

    def _build_fixed(self):
        """The fixed retriever at the current knob values, fitted on this corpus."""
        raise NotImplementedError

    def _fixed_key(self) -> tuple:
        """What the cached fixed retriever depends on: the knob values."""
        return tuple(self.knobs().values())

    def fixed(self):
        """The fixed retriever at the current knobs, fitted on this corpus (cached)."""
        self._check_fitted()
        key = self._fixed_key()
        if self._fixed is None or self._fixed[0] != key:
            with torch.no_grad():
                self._fixed = (key, self._build_fixed())
        return self._fixed[1]

    def inference_queries(self, queries: QueryBatch) -> QueryBatch:
        """The queries the fixed retriever ranks for (``queries`` unless mapped)."""
        return queries

    def retrieve(self, queries: QueryBatch, *, top_k: int) -> RerankResult:
        """Scores over the corpus rows at the current knobs; the ``top_k`` best are kept."""
        with torch.no_grad():
            return self.fixed().retrieve(self.inference_queries(queries), top_k=top_k)

    def forward(self, batch: QueryBatch) -> RerankResult:
        """Eval mode: :meth:`retrieve` with ``top_k``; training mode: the differentiable
        scores' top k."""
        if not self.training:
            return self.retrieve(batch, top_k=self.config.top_k)
        scores, ranked = self.score(batch)
        return RerankResult.from_scores(scores, self.keep(scores.detach(), ranked))

    def keep(self, scores: torch.Tensor, ranked: torch.Tensor) -> torch.Tensor:
        return top_k_mask(scores, ranked, self.config.top_k)

"""Corpus-graph adaptive reranking (``gar``), a pool-expanding stage.

MacAvaney, Tonellotto and Macdonald, "Adaptive Re-Ranking with a Corpus Graph" (Algorithm
1, as the reference implementation pyterrier-adaptive 0.2.1 runs it): a scorer is given a
budget of ``budget`` documents per query, scored in batches of ``batch_size``; the batches
alternate between the first-stage ranking and the *frontier*, the corpus-graph neighbours
of the documents scored so far, each neighbour carrying the best score of a scored
document that reached it. Documents the first stage missed enter the ranking this way.

The loop, per query (every query of a batch at once here):

1. step ``t`` takes the next batch from the first-stage ranking (``t`` even) or the
   frontier (``t`` odd): its ``min(batch_size, budget - scored)`` best unscored documents
   (first-stage score, ties by first-stage position; frontier score, ties by the order
   the frontier first received them); a step whose source is empty scores nothing;
2. the scorer scores the batch; its documents leave both sources;
3. while budget is left, the batch's documents, best score first (ties by document id,
   descending), push their neighbours into the frontier: a neighbour not yet scored
   takes the document's score when it is new to the frontier or the score is higher;
   a document is only expanded while the frontier is smaller than the budget left or
   its score is at least the lowest score that has pushed a neighbour so far;
4. the loop stops when the budget is spent or both sources are empty. The ranking is
   every scored document by score (ties: later step first, then batch order), then,
   when ``backfill``, the unscored first-stage documents in first-stage order up to the
   budget.

The contract (:class:`~georag.rerank.base.PoolExpander`): fitted on a
:class:`~georag.batch.Corpus` like a corpus-level retriever (it needs every row's
embedding and the corpus graph), :meth:`AdaptiveReranker.expand` takes the first-stage
pool (a :class:`~georag.batch.CandidateBatch` of the corpus' documents) and returns a
:class:`~georag.batch.RerankResult` over the corpus rows; :meth:`AdaptiveReranker.retrieve`
runs it on an exact dense pool of ``pool_size`` when no pool is given. The evaluation
runner hands it the shared first-stage pool.

The scorer is any pool reranker by method spec (``none``: the dense cosine; ``learned_map``
with ``weights``; ``bi``), called on each step's batch: the candidates' embeddings are the
corpus rows, their first-stage scores the cosine with the query (what an exact dense first
stage gives every document, pool member or not). GAR assumes a pointwise scorer, as the
paper does: a geometric reranker scores each batch of ``batch_size`` as a pool of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from georag.batch import CandidateBatch, Corpus, QueryBatch, RerankResult
from georag.rerank.pool import top_k_mask
from georag.rerank.registry import is_retriever, make_reranker, register
from georag.retrieval.corpus_graph import GRAPH_KINDS, corpus_graph_for
from georag.retrieval.dense import DenseIndex

__all__ = ["AdaptiveReranker", "GarConfig", "GarRanking", "adaptive_rerank", "string_order"]


@dataclass(frozen=True)
class GarConfig:
    """Parameters
    ----------
    scorer : str
        Method spec of the pool reranker that scores each batch (``none``: dense cosine).
    scorer_options : dict
        ``{stage name: {config field: value}}`` of the scorer (as ``make_reranker``).
    graph : {"dense", "bm25"}
        The corpus graph: cosine k-NN or BM25 neighbours.
    k : int
        Neighbours per document in the graph (the paper's 16).
    budget : int
        Documents scored per query (the paper's c: 100 or 1000).
    batch_size : int
        Documents per scoring batch (the paper's b = 16).
    pool_size : int
        Depth of the exact dense first stage of :meth:`AdaptiveReranker.retrieve`.
    graph_path : str, optional
        A saved graph (:meth:`~georag.retrieval.corpus_graph.CorpusGraph.save`) to use;
        default: built once and kept under the corpus' cache folder.
    backfill : bool
        Rank the unscored first-stage documents after the scored ones, up to the budget.
    """

    scorer: str = "none"
    scorer_options: dict[str, Any] = field(default_factory=dict)
    graph: str = "dense"
    k: int = 16
    budget: int = 100
    batch_size: int = 16
    pool_size: int = 100
    graph_path: str | None = None
    backfill: bool = True

    def __post_init__(self) -> None:
        if self.graph not in GRAPH_KINDS:
            raise ValueError(f"graph must be one of {GRAPH_KINDS}, got {self.graph!r}")
        for name in ("k", "budget", "batch_size", "pool_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.budget < self.pool_size:
            raise ValueError(f"budget: {self.budget} is below the pool size {self.pool_size}")


@dataclass(frozen=True)
class GarRanking:
    """The adaptive ranking of each query, best first.

    Parameters
    ----------
    rows : torch.Tensor, shape (B, budget), int64
        Corpus rows; -1 past the end of a query's ranking.
    scores : torch.Tensor, shape (B, budget)
        The scorer's scores (backfilled documents: below the lowest, one apart); -inf past
        the end.
    iteration : torch.Tensor, shape (B, budget), int64
        The step that scored each document (even: first stage, odd: frontier); -1 for
        backfilled documents and past the end.
    """

    rows: torch.Tensor
    scores: torch.Tensor
    iteration: torch.Tensor


def string_order(ids: list[str]) -> torch.Tensor:
    """Each id's rank in Python's string order, shape (N,) int64: the tie-break of equal
    scores when a batch expands the frontier."""
    order = sorted(range(len(ids)), key=ids.__getitem__)
    rank = torch.empty(len(ids), dtype=torch.long)
    rank[torch.tensor(order, dtype=torch.long)] = torch.arange(len(ids))
    return rank


def _first_occurrence(rows: torch.Tensor) -> torch.Tensor:
    """(B, k) bool: True where a row index appears for the first time in its row."""
    same = rows.unsqueeze(2) == rows.unsqueeze(1)
    earlier = torch.ones(rows.shape[1], rows.shape[1], dtype=torch.bool).tril(-1)
    return ~(same & earlier).any(2)


def _sort_by(keys: list[tuple[torch.Tensor, bool]], *tensors: torch.Tensor):
    """Permute ``tensors`` (B, S) by ``keys`` (most significant first; each a (tensor,
    descending) pair), with stable sorts so that every tie falls to the next key."""
    order = torch.arange(tensors[0].shape[1]).expand_as(tensors[0])
    for key, descending in reversed(keys):
        step = torch.sort(key.gather(1, order), dim=1, descending=descending, stable=True).indices
        order = order.gather(1, step)
    return tuple(t.gather(1, order) for t in tensors)


class _Frontier:
    """The frontier of every query: the unscored graph neighbours of scored documents.

    State, (B, N) over the corpus rows: ``member`` (in the frontier), ``score`` (the best
    score that reached it), ``stamp`` (when it entered, the tie-break); per query (B,):
    ``size``, ``next_stamp`` and ``lowest`` (the lowest score that pushed a neighbour).
    """

    def __init__(self, b: int, n: int, dtype: torch.dtype) -> None:
        self.member = torch.zeros(b, n, dtype=torch.bool)
        self.score = torch.full((b, n), -torch.inf, dtype=dtype)
        self.stamp = torch.zeros(b, n, dtype=torch.long)
        self.size = torch.zeros(b, dtype=torch.long)
        self.next_stamp = torch.zeros(b, dtype=torch.long)
        self.lowest = torch.full((b,), torch.inf, dtype=dtype)

    def best(self, size: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``size`` (B,) best members of each query (score desc, then first entry).

        Returns rows (B, width) int64 and valid (B, width) bool, valid entries first, in order.
        """
        width = min(width, self.member.shape[1])
        values = self.score.masked_fill(~self.member, -torch.inf)
        top = values.topk(width, dim=1)
        cut = top.values.gather(1, (size - 1).clamp(min=0).unsqueeze(1))  # the size-th best
        above = values > cut
        need = size - above.sum(1)
        tied = self.member & (values == cut)
        stamps = self.stamp.masked_fill(~tied, torch.iinfo(torch.long).max)
        first = (-stamps).topk(width, dim=1).indices  # the tied rows that entered first
        valid_above = above.gather(1, top.indices) & (size > 0).unsqueeze(1)
        valid_tied = (torch.arange(width) < need.unsqueeze(1)) & tied.gather(1, first)
        rows = torch.cat([top.indices, first], 1)
        valid = torch.cat([valid_above, valid_tied], 1)
        keys = [
            (valid.long(), True),
            (self.score.gather(1, rows), True),
            (self.stamp.gather(1, rows), False),
        ]
        rows, valid = _sort_by(keys, rows, valid)
        return rows[:, :width], valid[:, :width]

    def remove(self, qi: torch.Tensor, ri: torch.Tensor) -> None:
        """Drop rows ``ri`` of queries ``qi`` (just scored)."""
        self.size -= torch.bincount(qi[self.member[qi, ri]], minlength=self.size.shape[0])
        self.member[qi, ri] = False

    def push(
        self,
        score: torch.Tensor,
        neighbours: torch.Tensor,
        go: torch.Tensor,
        scored: torch.Tensor,
    ) -> None:
        """One scored document per query (score (B,), its neighbours (B, k), go (B,) bool)
        offers its score to its unscored neighbours: new ones enter, others keep the higher."""
        old = self.score.gather(1, neighbours)
        present = self.member.gather(1, neighbours)
        update = (
            go.unsqueeze(1)
            & _first_occurrence(neighbours)
            & ~scored.gather(1, neighbours)
            & (~present | (score.unsqueeze(1) > old))
        )
        new = update & ~present
        stamp = self.next_stamp.unsqueeze(1) + new.cumsum(1) - 1
        qu, ku = update.nonzero(as_tuple=True)
        self.score[qu, neighbours[qu, ku]] = score[qu]
        self.member[qu, neighbours[qu, ku]] = True
        qn, kn = new.nonzero(as_tuple=True)
        self.stamp[qn, neighbours[qn, kn]] = stamp[qn, kn]
        self.size += new.sum(1)
        self.next_stamp += new.sum(1)
        self.lowest = torch.where(update.any(1) & (score < self.lowest), score, self.lowest)


def adaptive_rerank(
    pool_rows: torch.Tensor,
    pool_scores: torch.Tensor,
    pool_mask: torch.Tensor,
    neighbours: torch.Tensor,
    doc_order: torch.Tensor,
    score: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    budget: int,
    batch_size: int = 16,
    backfill: bool = True,
) -> GarRanking:
    """Graph-based adaptive reranking of a batch of first-stage pools (see the module).

    Parameters
    ----------
    pool_rows : torch.Tensor, shape (B, M), int64
        Corpus rows of each query's first-stage candidates (distinct per query).
    pool_scores : torch.Tensor, shape (B, M)
        Their first-stage scores (higher first; ties by position).
    pool_mask : torch.Tensor, shape (B, M), bool
        Real candidates; ``pool_mask.sum(1) <= budget``.
    neighbours : torch.Tensor, shape (N, k), int64
        The corpus graph, best neighbour first.
    doc_order : torch.Tensor, shape (N,), int64
        Rank of each row's document id in string order (:func:`string_order`).
    score : callable
        ``score(rows (B, S) int64, valid (B, S) bool) -> (B, S)`` finite scores of the
        valid entries (the others are ignored); pointwise.
    budget : int
        Documents scored per query.
    batch_size : int
        Documents per scoring batch.
    backfill : bool
        Append the unscored first-stage documents, up to ``budget`` in all.

    Returns
    -------
    GarRanking
    """
    b, m = pool_rows.shape
    dtype = pool_scores.dtype
    _, init_rows, init_left = _sort_by(
        [(pool_scores.masked_fill(~pool_mask, -torch.inf), True)], pool_scores, pool_rows, pool_mask
    )
    scored = torch.zeros(b, neighbours.shape[0], dtype=torch.bool)
    frontier = _Frontier(b, neighbours.shape[0], dtype)
    n_scored = torch.zeros(b, dtype=torch.long)
    out_rows = torch.full((b, budget), -1, dtype=torch.long)
    out_scores = torch.full((b, budget), -torch.inf, dtype=dtype)
    out_iter = torch.full((b, budget), -1, dtype=torch.long)
    out_pos = torch.zeros(b, budget, dtype=torch.long)
    step = 0
    while True:
        left_any, front_any = init_left.any(1), frontier.size > 0
        active = (n_scored < budget) & (left_any | front_any)
        if not active.any():
            break
        size = (budget - n_scored).clamp(max=batch_size)
        if step % 2 == 0:  # the first-stage ranking
            size = torch.where(active & left_any, size, 0)
            chosen = init_left & (init_left.cumsum(1) <= size.unsqueeze(1))
            at = torch.sort((~chosen).to(torch.int8), dim=1, stable=True).indices
            at = at[:, : min(batch_size, m)]
            rows, valid = init_rows.gather(1, at), chosen.gather(1, at)
        else:  # the frontier
            rows, valid = frontier.best(torch.where(active & front_any, size, 0), batch_size)
        if not valid.any():  # every active query's source is empty: a skipped step
            step += 1
            continue
        got = score(rows, valid).to(dtype)
        if not torch.isfinite(got[valid]).all():
            raise ValueError("scorer: returned a non-finite score for a candidate it was given")
        qi, ji = valid.nonzero(as_tuple=True)
        ri = rows[qi, ji]
        slot = n_scored[qi] + ji  # valid entries come first in each row
        out_rows[qi, slot], out_scores[qi, slot] = ri, got[qi, ji]
        out_iter[qi, slot], out_pos[qi, slot] = step, ji
        scored[qi, ri] = True
        frontier.remove(qi, ri)
        init_left &= ~scored.gather(1, init_rows)
        n_scored += valid.sum(1)
        expanding = valid.any(1) & (n_scored < budget)
        if expanding.any():
            left = budget - n_scored
            keys = [(valid.long(), True), (got, True), (doc_order[rows], True)]
            src_valid, src_scores, src_rows = _sort_by(keys, valid, got, rows)
            for j in range(src_rows.shape[1]):  # the batch's documents, best first
                s_j = src_scores[:, j]
                go = (
                    src_valid[:, j]
                    & expanding
                    & ((frontier.size < left) | (s_j >= frontier.lowest))
                )
                if go.any():
                    frontier.push(s_j, neighbours[src_rows[:, j]], go, scored)
        step += 1
    # the scored documents by score, then later step first, then batch order
    keys = [(out_scores, True), (out_iter, True), (-out_pos, True)]
    out_scores, out_iter, out_rows = _sort_by(keys, out_scores, out_iter, out_rows)
    if backfill:
        count = torch.minimum(budget - n_scored, init_left.sum(1))
        rank = init_left.cumsum(1) - 1
        take = init_left & (rank < count.unsqueeze(1))
        last = out_scores.gather(1, (n_scored - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        last = torch.where(n_scored > 0, last, 0.0)
        qi, ji = take.nonzero(as_tuple=True)
        slot = n_scored[qi] + rank[qi, ji]
        out_rows[qi, slot] = init_rows[qi, ji]
        out_scores[qi, slot] = last[qi] - 1 - rank[qi, ji].to(dtype)
    return GarRanking(out_rows, out_scores, out_iter)


@register
class AdaptiveReranker:
    """Corpus-graph adaptive reranking as a pool-expanding stage (see the module).

    Parameters
    ----------
    config : GarConfig, optional
    """

    name = "gar"
    config_class = GarConfig

    def __init__(self, config: GarConfig | None = None) -> None:
        self.config = config or GarConfig()
        scorer = make_reranker(self.config.scorer, self.config.scorer_options)
        if is_retriever(scorer):
            raise ValueError(f"scorer: {self.config.scorer!r} ranks a corpus, not a pool")
        self.scorer = scorer
        self.graph = None

    def fit(self, corpus: Corpus) -> AdaptiveReranker:
        """Load (or build once and cache) the corpus graph of ``corpus``; keep its rows."""
        cfg = self.config
        texts = [f"{t} {x}".strip() for t, x in zip(corpus.titles, corpus.texts)]
        self.graph = corpus_graph_for(
            corpus.doc_ids,
            kind=cfg.graph,
            k=cfg.k,
            embeddings=corpus.embeddings if cfg.graph == "dense" else None,
            texts=texts if cfg.graph == "bm25" else None,
            path=cfg.graph_path,
            cache_dir=corpus.cache_dir,
        )
        self.corpus = corpus
        self._neighbours = torch.from_numpy(np.asarray(self.graph.neighbours, dtype=np.int64))
        self._order = string_order(corpus.doc_ids)
        self._row = {doc_id: i for i, doc_id in enumerate(corpus.doc_ids)}
        self._full_texts = texts
        return self

    @property
    def row_ids(self) -> list[str]:
        """The corpus' document ids, the columns of :meth:`expand`'s result."""
        self._check_fitted()
        return self.corpus.doc_ids

    def _check_fitted(self) -> None:
        if self.graph is None:
            raise ValueError("gar: call fit(corpus) before ranking")

    def _pool_rows(self, pool: CandidateBatch) -> torch.Tensor:
        rows = torch.zeros(pool.mask.shape, dtype=torch.long)
        mask = pool.mask.cpu().tolist()
        for q, (ids, real) in enumerate(zip(pool.doc_ids, mask)):
            try:
                rows[q] = torch.tensor([self._row[d] if r else 0 for d, r in zip(ids, real)])
            except KeyError as err:
                raise ValueError(
                    f"pool: document {err.args[0]!r} is not in the corpus gar was fitted on"
                ) from None
        return rows

    def _scorer_of(self, pool: CandidateBatch) -> Callable:
        """``score(rows, valid)``: the scorer on a batch gathered from the corpus."""
        embeddings = self.corpus.embeddings.to(pool.query.dtype)
        query = pool.query
        ids = self.corpus.doc_ids

        def score(rows: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
            cands = embeddings[rows]
            listed = rows.tolist()
            batch = CandidateBatch(
                query=query,
                cands=cands,
                scores=(cands * query.unsqueeze(1)).sum(-1),
                mask=valid,
                query_ids=pool.query_ids,
                doc_ids=[[ids[r] for r in row] for row in listed],
                query_texts=pool.query_texts,
                cand_texts=None
                if pool.query_texts is None
                else [[self._full_texts[r] for r in row] for row in listed],
            )
            return self.scorer(batch).scores

        return score

    def rank(self, pool: CandidateBatch) -> GarRanking:
        """The adaptive ranking of each query of ``pool`` (its first-stage candidates)."""
        self._check_fitted()
        real = int(pool.mask.sum(1).max()) if pool.batch_size else 0
        if real > self.config.budget:
            raise ValueError(f"budget: {self.config.budget} is below the pool size {real}")
        rows = self._pool_rows(pool)
        with torch.no_grad():
            return adaptive_rerank(
                rows,
                pool.scores,
                pool.mask,
                self._neighbours,
                self._order,
                self._scorer_of(pool),
                budget=self.config.budget,
                batch_size=self.config.batch_size,
                backfill=self.config.backfill,
            )

    def expand(self, pool: CandidateBatch) -> RerankResult:
        """Rerank and expand ``pool`` over the corpus: a result of shape (B, N), kept where
        a document is in the adaptive ranking (exact score ties fall to corpus order)."""
        ranking = self.rank(pool)
        n = len(self.corpus.doc_ids)
        scores = torch.full((pool.batch_size, n), -torch.inf, dtype=ranking.scores.dtype)
        keep = torch.zeros(pool.batch_size, n, dtype=torch.bool)
        qi, ji = (ranking.rows >= 0).nonzero(as_tuple=True)
        scores[qi, ranking.rows[qi, ji]] = ranking.scores[qi, ji]
        keep[qi, ranking.rows[qi, ji]] = True
        return RerankResult(scores, keep)

    def dense_pool(self, queries: QueryBatch) -> CandidateBatch:
        """The exact dense top ``pool_size`` of the corpus for ``queries``."""
        self._check_fitted()
        index = DenseIndex(self.corpus.embeddings.shape[1], kind="flat", use_gpu=False)
        index.add(self.corpus.embeddings)
        scores, rows = index.search(queries.embeddings, self.config.pool_size)
        ids = self.corpus.doc_ids
        return CandidateBatch(
            query=queries.embeddings.to(scores.dtype),
            cands=self.corpus.embeddings[rows].to(scores.dtype),
            scores=scores,
            mask=torch.ones(rows.shape, dtype=torch.bool),
            query_ids=list(queries.ids),
            doc_ids=[[ids[r] for r in row] for row in rows.tolist()],
            query_texts=list(queries.texts),
        )

    def retrieve(self, queries: QueryBatch, *, top_k: int) -> RerankResult:
        """:meth:`expand` of the exact dense pool of ``queries``, cut to ``top_k`` rows."""
        result = self.expand(self.dense_pool(queries))
        return RerankResult.from_scores(
            result.scores, top_k_mask(result.scores, result.keep, top_k)
        )

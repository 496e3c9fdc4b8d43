"""What every layer passes around: candidate pools, rerank results, queries and corpora.

Every reranker in georag takes a :class:`CandidateBatch` (B queries, each with up to M
candidates padded and masked) and returns a :class:`RerankResult` (a score for each candidate
and a keep mask); corpus-level retrievers index a :class:`Corpus` and rank its rows for a
:class:`QueryBatch`. The batch dimension is always there, so one query and ten thousand go
through the same code. :func:`scores_to_run` is the one rule that turns scores into runs.
A bottom module: it imports nothing of georag.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import torch

__all__ = ["CandidateBatch", "Corpus", "QueryBatch", "RerankResult", "scores_to_run"]


def _check_finite(name: str, tensor: torch.Tensor, where: torch.Tensor | None = None) -> None:
    # one pass first: a sum over the last axis is finite unless a term is not (or it
    # overflows, which the exact count below then clears); the masked copy of (B, M, D)
    # candidates and the element-wise test cost 5.6 ms at B = 64, M = 100, D = 384
    summed = tensor.sum(-1) if tensor.dim() > (1 if where is None else where.dim()) else tensor
    if torch.isfinite(summed if where is None else summed[where]).all():
        return
    values = tensor if where is None else tensor[where]
    if not torch.isfinite(values).all():
        bad = (~torch.isfinite(values)).sum().item()
        raise ValueError(f"{name} holds {bad} non-finite value(s) (NaN or inf)")


@dataclass(frozen=True)
class CandidateBatch:
    """A padded batch of first-stage candidates.

    Parameters
    ----------
    query : torch.Tensor, shape (B, D)
        Query embeddings.
    cands : torch.Tensor, shape (B, M, D)
        Candidate embeddings, padded to M per query.
    scores : torch.Tensor, shape (B, M)
        First-stage scores (higher is better).
    mask : torch.Tensor, shape (B, M), bool
        True for real candidates, False for padding.
    query_ids : list of str, length B
    doc_ids : list of list of str, shape (B, M)
        Candidate ids; padded slots hold ``""``.
    query_texts, cand_texts : optional
        Texts for text-based stages (cross-encoder); same shapes as the ids.

    Notes
    -----
    The shapes and finiteness are checked once, when a batch is built from its parts.
    The batches that :meth:`slice`, :meth:`restrict` and :meth:`to` derive from a checked
    one are valid by construction and skip the checks (they cost ~0.1 ms at B=1, more
    than the ``none`` stage itself).
    """

    query: torch.Tensor
    cands: torch.Tensor
    scores: torch.Tensor
    mask: torch.Tensor
    query_ids: list[str]
    doc_ids: list[list[str]]
    query_texts: list[str] | None = None
    cand_texts: list[list[str]] | None = field(default=None)

    def __post_init__(self) -> None:
        if self.query.dim() != 2:
            raise ValueError(f"query must have shape (B, D), got {tuple(self.query.shape)}")
        if self.cands.dim() != 3:
            raise ValueError(f"cands must have shape (B, M, D), got {tuple(self.cands.shape)}")
        b, d = self.query.shape
        if self.cands.shape[0] != b or self.cands.shape[2] != d:
            raise ValueError(
                f"cands shape {tuple(self.cands.shape)} does not match query shape "
                f"{tuple(self.query.shape)}: expected ({b}, M, {d})"
            )
        m = self.cands.shape[1]
        if self.scores.shape != (b, m):
            raise ValueError(f"scores must have shape ({b}, {m}), got {tuple(self.scores.shape)}")
        if self.mask.shape != (b, m) or self.mask.dtype != torch.bool:
            raise ValueError(
                f"mask must be a bool tensor of shape ({b}, {m}), "
                f"got {self.mask.dtype} {tuple(self.mask.shape)}"
            )
        if len(self.query_ids) != b:
            raise ValueError(f"query_ids must have {b} entries, got {len(self.query_ids)}")
        if len(self.doc_ids) != b or any(len(row) != m for row in self.doc_ids):
            raise ValueError(f"doc_ids must be a {b} x {m} nested list")
        if self.query_texts is not None and len(self.query_texts) != b:
            raise ValueError(f"query_texts must have {b} entries, got {len(self.query_texts)}")
        if self.cand_texts is not None and (
            len(self.cand_texts) != b or any(len(row) != m for row in self.cand_texts)
        ):
            raise ValueError(f"cand_texts must be a {b} x {m} nested list")
        _check_finite("query", self.query)
        _check_finite("cands", self.cands, self.mask)
        _check_finite("scores", self.scores, self.mask)

    @property
    def batch_size(self) -> int:
        return self.query.shape[0]

    @property
    def num_candidates(self) -> int:
        return self.cands.shape[1]

    def _derive(self, **changes: object) -> CandidateBatch:
        """A copy with ``changes``, not re-checked: the callers keep every invariant."""
        new = object.__new__(type(self))
        for f in fields(self):
            object.__setattr__(new, f.name, changes.get(f.name, getattr(self, f.name)))
        return new

    def to(self, device: torch.device | str) -> CandidateBatch:
        """Return a copy with every tensor on ``device``."""
        return self._derive(
            query=self.query.to(device),
            cands=self.cands.to(device),
            scores=self.scores.to(device),
            mask=self.mask.to(device),
        )

    def restrict(self, keep: torch.Tensor) -> CandidateBatch:
        """Return a copy whose mask also excludes candidates where ``keep`` is False.

        Parameters
        ----------
        keep : torch.Tensor, shape (B, M), bool
        """
        if keep.shape != self.mask.shape or keep.dtype != torch.bool:
            raise ValueError(
                f"keep must be a bool tensor of shape {tuple(self.mask.shape)}, "
                f"got {keep.dtype} {tuple(keep.shape)}"
            )
        return self._derive(mask=self.mask & keep.to(self.mask.device))

    def slice(self, start: int, stop: int) -> CandidateBatch:
        """Return queries ``start:stop`` as a new batch."""
        return self._derive(
            query=self.query[start:stop],
            cands=self.cands[start:stop],
            scores=self.scores[start:stop],
            mask=self.mask[start:stop],
            query_ids=self.query_ids[start:stop],
            doc_ids=self.doc_ids[start:stop],
            query_texts=None if self.query_texts is None else self.query_texts[start:stop],
            cand_texts=None if self.cand_texts is None else self.cand_texts[start:stop],
        )


@dataclass(frozen=True)
class RerankResult:
    """What a reranker returns.

    Parameters
    ----------
    scores : torch.Tensor, shape (B, M)
        New scores, higher is better; ``-inf`` where the candidate is not kept or is padding.
    keep : torch.Tensor, shape (B, M), bool
        Candidates that survive this stage (a subset of the input mask).
    """

    scores: torch.Tensor
    keep: torch.Tensor

    def __post_init__(self) -> None:
        if self.scores.shape != self.keep.shape:
            raise ValueError(
                f"scores {tuple(self.scores.shape)} and keep {tuple(self.keep.shape)} differ"
            )
        if self.keep.dtype != torch.bool:
            raise ValueError(f"keep must be bool, got {self.keep.dtype}")

    @classmethod
    def from_scores(cls, scores: torch.Tensor, keep: torch.Tensor) -> RerankResult:
        """Build a result, setting the score of every dropped candidate to ``-inf``."""
        return cls(scores=scores.masked_fill(~keep, -math.inf), keep=keep)

    def to_run(
        self, batch: CandidateBatch, top_k: int | None = None
    ) -> dict[str, dict[str, float]]:
        """Convert to a TREC-style run ``{query_id: {doc_id: score}}`` of the kept candidates.

        Parameters
        ----------
        batch : CandidateBatch
            The batch this result was computed for (gives the ids).
        top_k : int, optional
            Keep at most this many candidates per query.
        """
        return scores_to_run(self.scores, self.keep, batch.query_ids, batch.doc_ids, top_k=top_k)


def scores_to_run(
    scores: torch.Tensor,
    keep: torch.Tensor,
    query_ids: list[str],
    doc_ids: list[list[str]] | list[str],
    *,
    top_k: int | None = None,
) -> dict[str, dict[str, float]]:
    """The one rule that turns scores into a run ``{query_id: {doc_id: score}}``.

    Rows are ranked by score, ties broken by position (a stable sort); the kept candidates
    are written with ``score - rank * 1e-9``, so the order survives any tool that re-sorts
    by score (pytrec_eval does). Several rows with one document id (its chunks) are
    represented by the best of them (MaxP).

    Parameters
    ----------
    scores : torch.Tensor, shape (B, R)
    keep : torch.Tensor, shape (B, R), bool
    query_ids : list of str, length B
    doc_ids : list of list of str, shape (B, R), or list of str, length R
        The id of each row: per query (a candidate pool) or shared (corpus rows).
    top_k : int, optional
        Keep at most this many rows per query.
    """
    if scores.shape != keep.shape or scores.dim() != 2:
        raise ValueError(
            f"scores {tuple(scores.shape)} and keep {tuple(keep.shape)} must be equal (B, R) shapes"
        )
    if len(query_ids) != scores.shape[0]:
        raise ValueError(f"query_ids has {len(query_ids)} ids for {scores.shape[0]} rows")
    shared = not doc_ids or isinstance(doc_ids[0], str)
    if shared and len(doc_ids) != scores.shape[1]:
        raise ValueError(f"doc_ids has {len(doc_ids)} ids for {scores.shape[1]} columns")
    k = scores.shape[1] if top_k is None else min(top_k, scores.shape[1])
    ranked_scores = scores.detach().masked_fill(~keep, -math.inf)
    top, order = ranked_scores.cpu().sort(dim=1, descending=True, stable=True)
    top, order = top[:, :k].tolist(), order[:, :k].tolist()
    keep = keep.cpu()
    run: dict[str, dict[str, float]] = {}
    for row, qid in enumerate(query_ids):
        ids = doc_ids if shared else doc_ids[row]
        ranked: dict[str, float] = {}
        for rank, (col, score) in enumerate(zip(order[row], top[row])):
            doc_id = ids[col]
            if keep[row, col] and doc_id not in ranked:
                ranked[doc_id] = score - rank * 1e-9
        run[qid] = ranked
    return run


@dataclass(frozen=True)
class QueryBatch:
    """Queries for a corpus-level retriever.

    Parameters
    ----------
    ids : list of str, length B
    texts : list of str, length B
    embeddings : torch.Tensor, shape (B, D)
        Unit-norm query embeddings of the corpus' encoder.
    """

    ids: list[str]
    texts: list[str]
    embeddings: torch.Tensor

    def __post_init__(self) -> None:
        if self.embeddings.dim() != 2 or self.embeddings.shape[0] != len(self.ids):
            raise ValueError(
                f"embeddings must have shape ({len(self.ids)}, D), got "
                f"{tuple(self.embeddings.shape)}"
            )
        if len(self.texts) != len(self.ids):
            raise ValueError(f"texts must have {len(self.ids)} entries, got {len(self.texts)}")
        _check_finite("embeddings", self.embeddings)

    @property
    def batch_size(self) -> int:
        """B, the number of queries."""
        return len(self.ids)

    def to(self, device: torch.device | str) -> QueryBatch:
        """The same queries with the embeddings on ``device``."""
        return QueryBatch(self.ids, self.texts, self.embeddings.to(device))

    def slice(self, start: int, stop: int) -> QueryBatch:
        """Return queries ``start:stop`` (not re-checked: a slice of a checked batch)."""
        new = object.__new__(type(self))
        for name, value in (
            ("ids", self.ids[start:stop]),
            ("texts", self.texts[start:stop]),
            ("embeddings", self.embeddings[start:stop]),
        ):
            object.__setattr__(new, name, value)
        return new


@dataclass(frozen=True)
class Corpus:
    """What a corpus-level retriever indexes: every passage, in row order.

    Parameters
    ----------
    doc_ids, titles, texts : list of str, length N
    embeddings : torch.Tensor, shape (N, D)
        Unit-norm passage embeddings (cosine = inner product).
    cache_dir : str, optional
        Where a retriever may cache what it derives from the corpus (passage graphs, indexes).
    """

    doc_ids: list[str]
    titles: list[str]
    texts: list[str]
    embeddings: torch.Tensor
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        n = len(self.doc_ids)
        if n == 0:
            raise ValueError("doc_ids: the corpus is empty")
        if len(self.titles) != n or len(self.texts) != n:
            raise ValueError(
                f"doc_ids ({n}), titles ({len(self.titles)}) and texts "
                f"({len(self.texts)}) must have one entry per passage"
            )
        if self.embeddings.dim() != 2 or self.embeddings.shape[0] != n:
            raise ValueError(
                f"embeddings must have shape ({n}, D), got {tuple(self.embeddings.shape)}"
            )
        _check_finite("embeddings", self.embeddings)

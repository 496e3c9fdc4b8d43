"""The reranking contract: what goes into a reranker and what comes out.

Every reranker in georag takes a :class:`CandidateBatch` (B queries, each with up to
M candidates padded and masked) and returns a :class:`RerankResult` (a score for each
candidate and a keep mask). The batch dimension is always there, so one query and ten
thousand go through the same code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

import torch

__all__ = ["CandidateBatch", "RerankResult", "Reranker", "IdentityReranker"]


def _check_finite(name: str, tensor: torch.Tensor, where: torch.Tensor | None = None) -> None:
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

    def to(self, device: torch.device | str) -> CandidateBatch:
        """Return a copy with every tensor on ``device``."""
        return replace(
            self,
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
        return replace(self, mask=self.mask & keep.to(self.mask.device))

    def slice(self, start: int, stop: int) -> CandidateBatch:
        """Return queries ``start:stop`` as a new batch."""
        return replace(
            self,
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
        k = self.scores.shape[1] if top_k is None else min(top_k, self.scores.shape[1])
        order = torch.argsort(self.scores, dim=1, descending=True, stable=True)[:, :k].cpu()
        scores = self.scores.detach().cpu()
        keep = self.keep.cpu()
        run: dict[str, dict[str, float]] = {}
        for row, qid in enumerate(batch.query_ids):
            ranked = {}
            for rank, col in enumerate(order[row].tolist()):
                doc_id = batch.doc_ids[row][col]
                # Chunks of one document share its id: the best chunk speaks for it (MaxP).
                if keep[row, col] and doc_id not in ranked:
                    # pytrec_eval sorts by score; rank-derived tie breaks keep our order.
                    ranked[doc_id] = float(scores[row, col]) - rank * 1e-9
            run[qid] = ranked
        return run


@runtime_checkable
class Reranker(Protocol):
    """Anything that maps a :class:`CandidateBatch` to a :class:`RerankResult`.

    A reranker never mutates its input, holds no global state and is deterministic.
    """

    name: str

    def __call__(self, batch: CandidateBatch) -> RerankResult: ...


class IdentityReranker:
    """Keeps the first-stage order: scores are the first-stage scores."""

    name = "none"

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        return RerankResult.from_scores(batch.scores.clone(), batch.mask.clone())

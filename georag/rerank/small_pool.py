"""Few documents: what every pool method does with a query of only 1, 2 or 3 candidates.

A method's graph may need more candidate slots than a short docs list fills (Maniscope's
k-NN graph needs ``k + 1``), and with a single candidate there is no geometry to apply.
Each method states its rule in its own module, as a ``small_pool_rule()`` method returning a
:class:`SmallPool` (a method without one scores any number of documents, :data:`ANY`):

- ``slots``: candidate slots the method's kernels need; a narrower batch is padded with
  masked slots, so a short list is answered exactly as it would be inside a wider batch
  (Maniscope: the complete graph on its ``n <= k`` documents, i.e. k capped at ``n - 1``);
- ``fewest``: real candidates the method's geometry needs; a query with fewer gets the
  first-stage order (its scores, everything kept), flagged as a fallback.

:func:`rerank_small_pools` applies the rule around any built stage: the text API
(:class:`georag.Reranker`) and the service call it, so both answer alike, whether a
query comes alone or in a micro-batch with wider ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch, RerankResult

__all__ = ["ANY", "SmallPool", "small_pool", "pad_slots", "rerank_small_pools"]


@dataclass(frozen=True)
class SmallPool:
    """A method's rule for short candidate lists.

    Attributes
    ----------
    slots : int
        Candidate slots its kernels need (narrower batches are padded).
    fewest : int
        Real candidates below which a query keeps the first-stage order (a fallback).
    rule : str
        The behaviour in words (docs and the service's ``/health``).
    """

    slots: int
    fewest: int
    rule: str


#: the rule of a method that states none: it scores any number of documents
ANY = SmallPool(slots=1, fewest=1, rule="scores any number of documents")


def small_pool(stage) -> SmallPool:
    """The rule of a built stage; a ``+`` pipeline pads for its widest stage and falls back
    only where every stage would (``ricci+bi`` scores a single document with ``bi``: Ricci
    keeps a lone candidate, as its own rule for too small graphs says)."""
    stages = getattr(stage, "stages", None)
    if stages is not None:
        rules = [small_pool(s) for s in stages]
        return SmallPool(
            slots=max(r.slots for r in rules),
            fewest=min(r.fewest for r in rules),
            rule="; ".join(f"{s.name}: {r.rule}" for s, r in zip(stages, rules)),
        )
    rule = getattr(getattr(stage, "stage", stage), "small_pool_rule", None)  # unwrap Float32Compute
    return ANY if rule is None else rule()


def pad_slots(batch: CandidateBatch, slots: int) -> CandidateBatch:
    """``batch`` widened to at least ``slots`` candidate slots with masked padding.

    Parameters
    ----------
    batch : CandidateBatch, M slots
    slots : int

    Returns
    -------
    CandidateBatch, max(M, slots) slots
    """
    extra = slots - batch.num_candidates
    if extra <= 0:
        return batch
    b, _, d = batch.cands.shape
    pad = [""] * extra
    return CandidateBatch(
        query=batch.query,
        cands=torch.cat([batch.cands, batch.cands.new_zeros(b, extra, d)], dim=1),
        scores=torch.cat([batch.scores, batch.scores.new_zeros(b, extra)], dim=1),
        mask=torch.cat([batch.mask, batch.mask.new_zeros(b, extra)], dim=1),
        query_ids=batch.query_ids,
        doc_ids=[row + pad for row in batch.doc_ids],
        query_texts=batch.query_texts,
        cand_texts=None if batch.cand_texts is None else [row + pad for row in batch.cand_texts],
    )


def rerank_small_pools(stage, batch: CandidateBatch) -> tuple[RerankResult, torch.Tensor]:
    """Run ``stage`` on ``batch`` under its :func:`small_pool` rule.

    Parameters
    ----------
    stage : Reranker
    batch : CandidateBatch, shape (B, M)

    Returns
    -------
    result : RerankResult, shape (B, M)
    fallback : torch.Tensor, shape (B,), bool
        Queries answered in first-stage order because they have fewer than ``fewest``
        candidates (their scores are the first-stage scores, every candidate kept).
    """
    rule = small_pool(stage)
    fallback = batch.mask.sum(dim=1) < rule.fewest
    first = RerankResult.from_scores(batch.scores.clone(), batch.mask.clone())
    if bool(fallback.all()):
        return first, fallback
    m = batch.num_candidates
    out = stage(pad_slots(batch, rule.slots))
    result = RerankResult(scores=out.scores[:, :m], keep=out.keep[:, :m])
    if bool(fallback.any()):
        rows = fallback.to(result.keep.device).unsqueeze(1)
        result = RerankResult(
            scores=torch.where(rows, first.scores.to(result.scores), result.scores),
            keep=torch.where(rows, first.keep.to(result.keep.device), result.keep),
        )
    return result, fallback

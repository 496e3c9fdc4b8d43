"""A document prior: a bonus for documents known to be relevant to other queries.

``s' = s + weight * prior`` with ``prior`` a per-candidate feature, here the indicator
"this document is relevant to some training query" (:func:`relevant_elsewhere`). No
learning beyond the one weight, chosen on held-out training queries; it is the bar that
tells a learned model's gain from the memory of the training labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.rerank.baselines.adapter import require_features
from georag.rerank.registry import register

__all__ = ["DocPriorConfig", "DocPrior", "prior_scores", "relevant_elsewhere"]


def prior_scores(
    scores: torch.Tensor, prior: torch.Tensor, weight: float | torch.Tensor
) -> torch.Tensor:
    """``scores + weight * prior``, both of shape (B, M)."""
    return scores + weight * prior.to(scores.dtype)


def relevant_elsewhere(
    query_ids: list[str],
    doc_ids: list[list[str]],
    qrels: Mapping[str, Mapping[str, int]],
) -> torch.Tensor:
    """Whether each candidate is relevant (gain > 0) to some query of ``qrels`` other than
    its own, shape (B, M) float (leave-one-out: a query's own labels never count)."""
    owners: dict[str, set[str]] = {}
    for q, judged in qrels.items():
        for d, gain in judged.items():
            if gain > 0:
                owners.setdefault(d, set()).add(q)
    return torch.tensor(
        [
            [float(bool(owners.get(d, set()) - {q})) if d else 0.0 for d in row]
            for q, row in zip(query_ids, doc_ids, strict=True)
        ]
    )


@dataclass(frozen=True)
class DocPriorConfig:
    """Parameters
    ----------
    weight : float
        Weight of the prior beside the first-stage score.
    """

    weight: float = 0.0


@register
class DocPrior:
    """First-stage score plus a weighted prior (the feature ``prior``)."""

    name = "prior"
    config_class = DocPriorConfig

    def __init__(self, config: DocPriorConfig | None = None) -> None:
        self.config = config or DocPriorConfig()

    def __call__(
        self, batch: CandidateBatch, features: Mapping[str, torch.Tensor] | None = None
    ) -> RerankResult:
        (prior,) = require_features(features, ("prior",), self.name, batch.mask.shape).unbind(-1)
        return RerankResult.from_scores(
            prior_scores(batch.scores, prior, self.config.weight), batch.mask
        )

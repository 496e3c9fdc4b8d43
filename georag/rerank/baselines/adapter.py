"""A learned linear adapter of the embeddings, with learned weights of extra score features.

The strongest non-geometric second stage over a dense pool: the cosine under a learned
linear map (on the query side only, or on both sides), plus a learned weight of each
named per-candidate feature (``bm25``: a lexical score beside the mapped cosine, as in
hybrid retrieval). Everything starts at zero change: the map is the identity and every
feature weight is 0, so the untrained adapter is the first-stage cosine.

:func:`adapter_scores` is the whole scoring rule on tensors; :class:`LearnedAdapter`
holds its parameters. Features the batch does not carry (BM25 needs the corpus) are given
as ``features={name: (B, M) tensor}``; a missing one is a one-line ``ValueError`` naming
``features``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from georag.batch import CandidateBatch
from georag.models.knobs import EmbeddingMap
from georag.rerank.learned import LearnableReranker
from georag.rerank.registry import register

__all__ = [
    "AdapterConfig",
    "LearnedAdapter",
    "adapter_scores",
    "mapped_cosine",
    "require_features",
    "standardized",
    "SIDES",
]

SIDES = ("both", "query")


def require_features(
    features: Mapping[str, torch.Tensor] | None, names: tuple[str, ...], method: str, shape
) -> torch.Tensor:
    """The named features stacked to shape ``(*shape, F)`` (``F = len(names)``).

    Raises
    ------
    ValueError
        Naming ``features`` when one is missing or has another shape.
    """
    features = features or {}
    missing = [n for n in names if n not in features]
    if missing:
        raise ValueError(
            f"features: {method} needs {', '.join(missing)} (a (B, M) tensor each), "
            f"got {sorted(features) or 'none'}"
        )
    bad = [n for n in names if tuple(features[n].shape) != tuple(shape)]
    if bad:
        raise ValueError(f"features: {', '.join(bad)} must have shape {tuple(shape)}")
    if not names:
        return torch.zeros(*shape, 0)
    return torch.stack([features[n] for n in names], dim=-1)


def standardized(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-query zero mean, unit variance over the real candidates; 0 elsewhere.

    Parameters
    ----------
    values : torch.Tensor, shape (B, M, F)
    mask : torch.Tensor, shape (B, M), bool

    Returns
    -------
    torch.Tensor, shape (B, M, F)
        A constant feature (variance 0) becomes 0.
    """
    m = mask.unsqueeze(-1)
    count = m.sum(dim=1, keepdim=True).clamp_min(1)
    mean = torch.where(m, values, 0.0).sum(dim=1, keepdim=True) / count
    centred = torch.where(m, values - mean, 0.0)
    std = (centred.square().sum(dim=1, keepdim=True) / count).sqrt()
    return centred / (std + 1e-6)


def mapped_cosine(query: torch.Tensor, cands: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cosine of each candidate with its query, ``(B, M)``; 0 at padded slots.

    Parameters
    ----------
    query : torch.Tensor, shape (B, D)
    cands : torch.Tensor, shape (B, M, D)
    mask : torch.Tensor, shape (B, M), bool
    """
    qnorm = query.norm(dim=1)
    if (qnorm == 0).any():
        raise ValueError("query holds zero vectors; cosine similarity is undefined")
    dots = torch.bmm(cands, query.unsqueeze(2)).squeeze(2)
    return torch.where(
        mask, dots / (torch.where(mask, cands.norm(dim=2), 1.0) * qnorm[:, None]), 0.0
    )


def adapter_scores(
    query: torch.Tensor,
    cands: torch.Tensor,
    mask: torch.Tensor,
    features: torch.Tensor,
    weights: torch.Tensor,
) -> torch.Tensor:
    """``cos(q, c) + sum_f weights_f * standardized feature_f``: the adapter's score.

    Parameters
    ----------
    query, cands : torch.Tensor, shapes (B, D), (B, M, D)
        Embeddings already under the map.
    mask : torch.Tensor, shape (B, M), bool
    features : torch.Tensor, shape (B, M, F)
        Raw feature values (standardized per query here, so a weight is scale-free).
    weights : torch.Tensor, shape (F,)

    Returns
    -------
    torch.Tensor, shape (B, M)
    """
    cos = mapped_cosine(query, cands, mask)
    if features.shape[-1] == 0:
        return cos
    extra = standardized(features.to(cos.dtype), mask) @ weights.to(cos.dtype)
    return cos + extra


@dataclass(frozen=True)
class AdapterConfig:
    """Parameters
    ----------
    side : {"both", "query"}
        Map both the query and the candidates, or the query only.
    features : tuple of str
        Per-candidate features with a learned weight (0 at start), e.g. ``("bm25",)``.
    dim : int
        Embedding width D.
    weights : str, optional
        A file written by :meth:`LearnableReranker.save`; its config replaces this one.
    """

    side: str = "both"
    features: tuple[str, ...] = ()
    dim: int = 384
    weights: str | None = None

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise ValueError(f"side must be one of {SIDES}, got {self.side!r}")


@register
class LearnedAdapter(LearnableReranker):
    """Mapped cosine plus learned feature weights; see the module docstring."""

    name = "learned_adapter"
    config_class = AdapterConfig

    def __init__(self, config: AdapterConfig | None = None) -> None:
        super().__init__(config or AdapterConfig())
        self.embed = EmbeddingMap(self.config.dim)
        self.feature_weights = nn.Parameter(torch.zeros(len(self.config.features)))
        self._load_if_given()

    def map_query(self, x: torch.Tensor) -> torch.Tensor:
        """Queries under the map, shape (..., D)."""
        return self.embed(x)

    def map_docs(self, x: torch.Tensor) -> torch.Tensor:
        """Documents under the map (unchanged with ``side="query"``), shape (..., D)."""
        return self.embed(x) if self.config.side == "both" else x

    def scores_from(
        self,
        query: torch.Tensor,
        cands: torch.Tensor,
        mask: torch.Tensor,
        features: Mapping[str, torch.Tensor] | None,
    ) -> torch.Tensor:
        """:func:`adapter_scores` of mapped embeddings (training maps a document table once)."""
        stacked = require_features(features, self.config.features, self.name, mask.shape)
        return adapter_scores(query, cands, mask, stacked, self.feature_weights)

    def score(
        self, batch: CandidateBatch, features: Mapping[str, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        stacked = require_features(features, self.config.features, self.name, batch.mask.shape)
        query, cands = self.map_query(batch.query), self.map_docs(batch.cands)
        return adapter_scores(query, cands, batch.mask, stacked, self.feature_weights), batch.mask

"""Learnable ISO-RAG on the entity-passage graph: its knobs trained through the Cheeger
pruning's surrogate and PPR; a corpus retriever.

The fixed method (:class:`~georag.retrievers.iso_entity.IsoEntity`) takes ISO-RAG's numbers
(:class:`~georag.retrievers.iso.IsoRagConfig`). Here three of them are parameters,
initialised there and kept valid by :mod:`georag.models.knobs`:

* ``damping`` (0.5) in (0, 1), through a sigmoid: PPR's probability of following an edge;
* ``lam`` (0.9) in (0, 1), through a sigmoid: ``lam * PPR / max(PPR) + (1 - lam) * cosine``;
* ``prune_threshold`` (1.0, ``eta``) > 0, through exp: the pruning of hub-to-fact edges, which
  trains through the surrogate ``w * sigmoid((eta - score) / prune_temperature)``
  (:func:`~georag.retrievers.learned_iso.soft_prune`, as :mod:`~georag.retrievers.learned_iso`
  does on the passage graph).

The seeds, the local graphs, the volumes and the sweep order are recomputed on every call
and not differentiated. Training scores the passages of each query's local graph through
:meth:`IsoEntity.scores` with the knobs as tensors; inference (eval mode,
:meth:`LearnedIsoEntity.retrieve`) runs :class:`IsoEntity` at the current knob values with
the hard rule, so an untrained ``learned_iso_entity`` gives exactly ``iso_entity``'s scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import partial

import torch

from georag.batch import QueryBatch
from georag.models.knobs import Interval, Positive
from georag.rerank.learned import LearningOptions
from georag.rerank.registry import register
from georag.retrievers.iso import IsoRagConfig
from georag.retrievers.iso_entity import IsoEntity, IsoEntityConfig
from georag.retrievers.learned import LearnedRetriever
from georag.retrievers.learned_iso import soft_prune

__all__ = ["LearnedIsoEntity", "LearnedIsoEntityConfig"]

KNOBS = ("damping", "lam", "prune_threshold")


@dataclass(frozen=True)
class LearnedIsoEntityConfig(LearningOptions):
    """The fixed method's config (its knobs: the initial values) and the learning settings.

    Parameters
    ----------
    fixed : IsoEntityConfig
        Everything of the fixed method; ``iso.damping``, ``iso.lam`` and
        ``iso.prune_threshold`` are the initial knobs (``damping`` and ``lam`` in (0, 1),
        the threshold finite and > 0). Its ``iso.max_iter`` is raised to 1000 here, room for
        a learned damping near 1. The rule must be ``pruning="cheeger"``.
    prune_temperature : float
        ``t`` of the surrogate ``sigmoid((eta - score) / t)``.
    top_k : int
        Passages kept when the module is called on a :class:`QueryBatch` (validation).
    embedding_map, dim, weights
        See :class:`~georag.rerank.learned.LearningOptions`; ``embedding_map`` is not
        supported.
    """

    fixed: IsoEntityConfig = field(
        default_factory=lambda: IsoEntityConfig(iso=IsoRagConfig(max_iter=1000))
    )
    prune_temperature: float = 0.1
    top_k: int = 10

    def __post_init__(self) -> None:
        if self.embedding_map:
            raise ValueError("embedding_map: learned_iso_entity learns no map")
        iso = self.fixed.iso
        for name in ("damping", "lam"):
            if not 0.0 < getattr(iso, name) < 1.0:
                raise ValueError(f"{name} must lie in (0, 1), got {getattr(iso, name)}")
        if not (iso.prune_threshold > 0 and math.isfinite(iso.prune_threshold)):
            raise ValueError(
                f"prune_threshold must be finite and positive, got {iso.prune_threshold}"
            )
        if self.fixed.pruning != "cheeger":
            raise ValueError(f"pruning must be 'cheeger' to be learned, got {self.fixed.pruning!r}")
        if not (self.prune_temperature > 0 and math.isfinite(self.prune_temperature)):
            raise ValueError(
                f"prune_temperature must be finite and positive, got {self.prune_temperature}"
            )
        if self.top_k < 1:
            raise ValueError(f"top_k must be positive, got {self.top_k}")


@register
class LearnedIsoEntity(LearnedRetriever):
    """ISO-RAG on the entity graph with learned damping, fusion and pruning threshold
    (module docstring): a corpus-level retriever that is also a :class:`torch.nn.Module`."""

    name = "learned_iso_entity"
    config_class = LearnedIsoEntityConfig
    fixed_method = "iso_entity"
    fixed_class = IsoEntity
    search_space = {
        "fixed.iso.damping": (0.05, 0.95, False),
        "fixed.iso.lam": (0.05, 0.99, False),
        "fixed.iso.prune_threshold": (0.05, 5.0, True),
    }

    def __init__(self, config: LearnedIsoEntityConfig | None = None) -> None:
        super().__init__(config or LearnedIsoEntityConfig())
        iso = self.config.fixed.iso
        self.damping = Interval(iso.damping)
        self.lam = Interval(iso.lam)
        self.prune_threshold = Positive(iso.prune_threshold)
        self._load_if_given()

    def _index(self, fixed: IsoEntity) -> LearnedIsoEntity:
        self.base, self.doc_ids, self._fixed = fixed, fixed.doc_ids, None
        return self

    def _build_fixed(self) -> IsoEntity:
        """:class:`IsoEntity` at the current knob values, fitted on this corpus."""
        cfg = self.config.fixed
        iso = IsoEntity(replace(cfg, iso=replace(cfg.iso, **self.knobs())))
        return iso.fit_graph(self.base.embeddings, self.base.graph, doc_ids=self.doc_ids)

    def score(self, batch: QueryBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable scores of the passages of each query's local graph.

        Returns
        -------
        scores : torch.Tensor, shape (B, N)
            0 outside the local graphs (unless fused with dense scores).
        ranked : torch.Tensor, shape (B, N), bool
            The passages scored.
        """
        self._check_fitted()
        dtype = self.base.embeddings.dtype
        eta = self.prune_threshold().to(dtype)
        prune = partial(soft_prune, eta, temperature=self.config.prune_temperature)
        scores = self.base.scores(
            batch, prune=prune, damping=self.damping().to(dtype), lam=self.lam().to(dtype)
        )
        ranked = torch.isfinite(scores.detach())
        return torch.where(ranked, scores, 0.0), ranked

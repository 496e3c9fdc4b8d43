"""Learning to rank over per-candidate features: LightGBM's LambdaRank.

"From RankNet to LambdaRank to LambdaMART: An Overview" (Burges): gradient-boosted trees
whose gradients are the pairwise lambdas weighted by the change in NDCG. The model ranks
each query's pool from a feature matrix (B, M, F) built by the caller (mapped and raw
cosine, BM25, first-stage rank, a document prior, or geometric features); training stops
early on held-out training queries. Needs ``lightgbm`` (the ``learn`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from georag.batch import CandidateBatch, RerankResult
from georag.rerank.baselines.adapter import require_features
from georag.rerank.registry import register

__all__ = ["LambdaRankConfig", "LambdaRank", "rank_feature"]


def rank_feature(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``1 / log2(2 + rank)`` of each candidate in its query's order by ``scores`` (B, M)."""
    order = scores.masked_fill(~mask, -torch.inf).argsort(dim=1, descending=True, stable=True)
    rank = torch.empty_like(order).scatter_(
        1, order, torch.arange(scores.shape[1]).expand_as(order).contiguous()
    )
    return torch.where(mask, 1.0 / torch.log2(2.0 + rank.to(scores.dtype)), 0.0)


@dataclass(frozen=True)
class LambdaRankConfig:
    """Parameters
    ----------
    features : tuple of str
        Names of the feature columns, in order (recorded for the caller's checks).
    num_leaves, learning_rate, min_data_in_leaf : int, float, int
        LightGBM tree settings.
    rounds : int
        Boosting rounds at most.
    early_stopping : int
        Rounds without a validation NDCG@10 gain before stopping.
    seed : int
    """

    features: tuple[str, ...] = ()
    num_leaves: int = 15
    learning_rate: float = 0.05
    min_data_in_leaf: int = 20
    rounds: int = 300
    early_stopping: int = 30
    seed: int = 0


def _flat(features: torch.Tensor, mask: torch.Tensor, gains: torch.Tensor | None = None):
    keep = mask.reshape(-1).numpy()
    x = features.reshape(-1, features.shape[-1]).double().numpy()[keep]
    group = mask.sum(1).numpy()
    y = None if gains is None else gains.reshape(-1).round().long().clamp_min(0).numpy()[keep]
    return x, y, group[group > 0] if y is None else group


@register
class LambdaRank:
    """A LambdaRank model over a (B, M, F) feature tensor; :meth:`fit` first."""

    name = "ltr"
    config_class = LambdaRankConfig

    def __init__(self, config: LambdaRankConfig | None = None) -> None:
        self.config = config or LambdaRankConfig()
        self.booster = None

    def _check(self, features: torch.Tensor, mask: torch.Tensor) -> None:
        want = len(self.config.features)
        if features.dim() != 3 or features.shape[:2] != mask.shape or features.shape[2] != want:
            raise ValueError(
                f"features: expected shape (B, M, {want}) matching mask {tuple(mask.shape)}, "
                f"got {tuple(features.shape)}"
            )

    def fit(
        self,
        features: torch.Tensor,
        mask: torch.Tensor,
        gains: torch.Tensor,
        val: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    ) -> LambdaRank:
        """Train on (B, M, F) ``features`` with (B, M) ``gains``; ``val`` (features, mask,
        gains) of held-out training queries stops the boosting early."""
        import lightgbm

        cfg = self.config
        self._check(features, mask)
        x, y, group = _flat(features, mask, gains)
        train = lightgbm.Dataset(x, y, group=group[group > 0], free_raw_data=False)
        params = {
            "objective": "lambdarank",
            "metric": "ndcg",
            "eval_at": [10],
            "num_leaves": cfg.num_leaves,
            "learning_rate": cfg.learning_rate,
            "min_data_in_leaf": cfg.min_data_in_leaf,
            "seed": cfg.seed,
            "deterministic": True,
            "num_threads": 1,
            "verbose": -1,
        }
        sets, callbacks = [], []
        if val is not None:
            self._check(val[0], val[1])
            vx, vy, vgroup = _flat(*val)
            sets = [lightgbm.Dataset(vx, vy, group=vgroup[vgroup > 0], reference=train)]
            callbacks = [lightgbm.early_stopping(cfg.early_stopping, verbose=False)]
        self.booster = lightgbm.train(
            params, train, num_boost_round=cfg.rounds, valid_sets=sets, callbacks=callbacks
        )
        return self

    def predict(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Scores (B, M), float64; 0 at padded slots."""
        if self.booster is None:
            raise ValueError("ltr: call fit before predict")
        self._check(features, mask)
        flat = features.reshape(-1, features.shape[-1]).double().numpy()
        out = self.booster.predict(flat, num_iteration=self.booster.best_iteration or None)
        scores = torch.from_numpy(np.asarray(out, dtype=np.float64)).reshape(mask.shape)
        return torch.where(mask, scores, 0.0)

    def __call__(
        self, batch: CandidateBatch, features: Mapping[str, torch.Tensor] | None = None
    ) -> RerankResult:
        """Rank ``batch`` by the model over its named ``features`` ({name: (B, M)})."""
        stacked = require_features(features, self.config.features, self.name, batch.mask.shape)
        return RerankResult.from_scores(self.predict(stacked, batch.mask), batch.mask)

"""LightningModule that trains the Cheeger-aware Poincare head (ISO-RAG's encoder).

Loss = InfoNCE over negative Poincare distance (question -> supporting passage, in-batch
negatives, other supporting passages of the same question masked out)
+ ``align_weight`` * mean squared error between each sampled passage's hyperbolic radius
and its structural target radius (generic passages near the centre, specific ones at the
periphery; see :class:`train.iso_data.IsoDataModule`).
Optimizer: ``geoopt.optim.RiemannianAdam``. Validation: Recall@5 of nearest-by-Poincare-
distance retrieval for the held-out questions of the *training* file, and the Spearman
correlation of radius with target radius over the corpus.
"""

from __future__ import annotations

import os

import geoopt
import lightning as L
import torch
import torch.nn.functional as F

from georag.models.poincare import PoincareHead

__all__ = ["IsoModule"]


def _spearman(x: torch.Tensor, y: torch.Tensor) -> float:
    rx, ry = x.argsort().argsort().double(), y.argsort().argsort().double()
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float((rx * ry).sum() / (rx.norm() * ry.norm()).clamp_min(1e-12))


class IsoModule(L.LightningModule):
    """Contrastive + radius-alignment training of :class:`PoincareHead`.

    Parameters
    ----------
    in_dim, out_dim, hidden : int
        Head sizes (in_dim 384 for all-MiniLM-L6-v2).
    c : float
        Ball curvature.
    temperature : float
        InfoNCE temperature on the negative Poincare distance.
    align_weight : float
        Weight of the radius-alignment term (0: contrastive only).
    lr, weight_decay : float
        RiemannianAdam settings.
    export_path : str, optional
        Where the trained head is saved (``PoincareHead.save``) when fitting ends.
    """

    def __init__(
        self,
        in_dim: int = 384,
        out_dim: int = 64,
        hidden: int = 256,
        c: float = 1.0,
        temperature: float = 0.1,
        align_weight: float = 1.0,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        export_path: str | None = None,
    ) -> None:
        super().__init__()
        if not temperature > 0 or not lr > 0 or align_weight < 0:
            raise ValueError(
                f"need temperature > 0, lr > 0, align_weight >= 0; got "
                f"{temperature}, {lr}, {align_weight}"
            )
        self.save_hyperparameters()
        self.head = PoincareHead(in_dim, out_dim, hidden, c=c)

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Points in the ball, shape (..., out_dim)."""
        return self.head(embeddings)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        query, positive = self(batch["query"]), self(batch["positive"])
        logits = -self.head.distance(query[:, None], positive[None]) / self.hparams.temperature
        logits = logits.masked_fill(batch["false_negatives"], -torch.inf)
        target = torch.arange(query.shape[0], device=logits.device)
        contrastive = F.cross_entropy(logits, target)
        radius = self.head.radius(batch["passages"])
        align = F.mse_loss(radius, batch["targets"].to(radius.dtype))
        loss = contrastive + self.hparams.align_weight * align
        size = query.shape[0]
        norm = torch.cat([query, positive]).norm(dim=-1).max() * self.head.c**0.5
        self.log_dict(
            {"train/loss": loss}, prog_bar=True, on_step=True, on_epoch=True, batch_size=size
        )
        self.log_dict(
            {"train/contrastive": contrastive, "train/align": align, "train/max_norm": norm},
            on_step=False,
            on_epoch=True,
            batch_size=size,
        )
        return loss

    def on_validation_epoch_start(self) -> None:
        data = self.trainer.datamodule
        self._docs = self(data.corpus.to(self.device))
        self._hits: list[float] = []

    def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        data = self.trainer.datamodule
        query = self(data.queries[batch].to(self.device))
        top = self.head.distance(query[:, None], self._docs[None]).topk(5, largest=False).indices
        for q, row in zip(batch.tolist(), top.tolist(), strict=True):
            positives = set(data.positives[q])
            self._hits.append(len(positives & set(row)) / len(positives))

    def on_validation_epoch_end(self) -> None:
        data = self.trainer.datamodule
        radius = self.head.ball.dist0(self._docs).cpu()
        self.log("val/recall@5", sum(self._hits) / max(len(self._hits), 1), prog_bar=True)
        self.log("val/radius_spearman", _spearman(radius, data.targets))
        del self._docs

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return geoopt.optim.RiemannianAdam(
            self.head.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )

    def on_fit_end(self) -> None:
        if self.hparams.export_path and self.trainer.is_global_zero:
            folder = os.path.dirname(os.path.abspath(self.hparams.export_path))
            os.makedirs(folder, exist_ok=True)
            self.head.cpu().save(self.hparams.export_path)

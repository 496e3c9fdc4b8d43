"""LightningModule that trains the HyTE-H projection (W1, W2 and optionally K).

Loss: InfoNCE over Lorentz similarity. For B pairs, each query's logits are
``-d_L(p_q, p_d) / temperature`` (negative geodesic distance, a monotone function of the
inner product ``<p_q, p_d>_L`` used at retrieval; the temperature is learned, as CLIP's
logit scale, so the projection need not inflate distances) against its positive, the other B - 1
positives (in-batch negatives) and every BM25 hard negative in the batch; documents known
to be relevant to the query are masked out. Optimizer: ``geoopt.optim.RiemannianAdam``.

Validation (each epoch) encodes the whole corpus with the current weights and reports
NDCG@10 of exhaustive Lorentz retrieval (``val/ndcg@10``) and of the two-stage hybrid
over BM25 top-M (``val/ndcg@10_hybrid``) on the data module's validation queries: training
queries held out from the pairs (never the test split), so the checkpoint that
``val/ndcg@10`` selects is chosen without looking at test.
"""

from __future__ import annotations

import math
import os

import geoopt
import lightning as L
import torch
import torch.nn.functional as F

from georag.eval.metrics import evaluate
from georag.geometry.hyperbolic import hybrid_scores, lorentz_distance, lorentz_gram
from georag.models.hyte import HyTEEncoder
from georag.resources import DEFAULT_MODEL
from train.checkpoint_io import check_checkpoint

__all__ = ["HyTEModule", "export_projection"]


class HyTEModule(L.LightningModule):
    """Contrastive training of :class:`~georag.models.hyte.HyTEProjection`.

    Parameters
    ----------
    model_path : str
        Checkpoint of the frozen word embeddings (must match the data module's tokenizer).
    hidden : int
        Hidden width of the projection (paper: 256).
    k : float
        Initial curvature parameter K (paper: 1.0).
    power : float
        OEM exponent P (paper: 1.0).
    learn_curvature : bool
        Train K as well (through log K).
    temperature : float
        Initial InfoNCE temperature on the negative Lorentz distance.
    learn_temperature : bool
        Learn the temperature (as log 1/temperature, capped at 1/temperature <= 1e4).
    lr, weight_decay : float
        RiemannianAdam settings of the projection.
    temperature_lr : float
        Learning rate of the log inverse temperature.
    seed : int
        Seed of the projection's initialization.
    max_tokens : int
        Word pieces per text.
    val_alpha : float
        BM25 weight of the hybrid validation metric.
    offset : float
        Sigmoid shift of the hybrid score (paper: 2).
    export_path : str, optional
        Where to save the trained projection (``HyTEEncoder.save``) when fitting ends.
    """

    def __init__(
        self,
        model_path: str = DEFAULT_MODEL,
        hidden: int = 256,
        k: float = 1.0,
        power: float = 1.0,
        learn_curvature: bool = False,
        temperature: float = 0.05,
        learn_temperature: bool = True,
        lr: float = 1e-4,
        weight_decay: float = 0.0,
        temperature_lr: float = 0.05,
        seed: int = 0,
        max_tokens: int = 512,
        val_alpha: float = 0.5,
        offset: float = 2.0,
        export_path: str | None = None,
    ) -> None:
        super().__init__()
        if not temperature > 0 or not lr > 0:
            raise ValueError(f"temperature and lr must be positive, got {temperature}, {lr}")
        self.save_hyperparameters()
        self.encoder = HyTEEncoder.from_pretrained(
            model_path,
            hidden=hidden,
            k=k,
            power=power,
            learn_curvature=learn_curvature,
            max_tokens=max_tokens,
            seed=seed,
        )
        self.projection = self.encoder.projection
        self.log_scale = torch.nn.Parameter(
            torch.tensor(math.log(1.0 / temperature)), requires_grad=learn_temperature
        )

    def forward(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Points of padded token ids, shape (B, d+1)."""
        return self.projection(input_ids, mask)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        query = self(batch["query_ids"], batch["query_mask"])
        docs = self(batch["doc_ids"], batch["doc_mask"])
        distance = lorentz_distance(query.unsqueeze(1), docs.unsqueeze(0), k=self.projection.k)
        scale = self.log_scale.clamp(max=math.log(1e4)).exp()
        logits = -distance * scale
        logits = logits.masked_fill(batch["false_negatives"], -torch.inf)
        target = torch.arange(query.shape[0], device=logits.device)
        loss = F.cross_entropy(logits, target)
        size = query.shape[0]
        self.log("train/loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=size)
        accuracy = (logits.argmax(1) == target).float().mean()
        self.log("train/acc", accuracy, on_step=False, on_epoch=True, batch_size=size)
        self.log(
            "train/temperature", 1.0 / scale.detach(), on_step=False, on_epoch=True, batch_size=size
        )
        if self.hparams.learn_curvature:
            self.log(
                "train/k", self.projection.k.detach(), on_step=False, on_epoch=True, batch_size=size
            )
        return loss

    # ------------------------------------------------------------------ validation
    def on_validation_epoch_start(self) -> None:
        data = self.trainer.datamodule
        self._docs = self.encoder.encode_ids(data.corpus_ids)
        self._runs: dict[str, dict[str, dict[str, float]]] = {"lorentz": {}, "hybrid": {}}

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        data = self.trainer.datamodule
        rows = batch["rows"].tolist()
        query = self.encoder.encode_ids([data.val_query_ids[r] for r in rows])
        top = min(100, self._docs.shape[0])
        best, order = lorentz_gram(query, self._docs).topk(top, dim=1)
        cand = batch["bm25_indices"]
        points = self._docs.index_select(0, cand.flatten()).view(*cand.shape, -1)
        hybrid = hybrid_scores(
            batch["bm25_scores"],
            query,
            points,
            torch.ones_like(cand, dtype=torch.bool),
            alpha=self.hparams.val_alpha,
            offset=self.hparams.offset,
        )
        for i, r in enumerate(rows):
            qid = data.val_qids[r]
            self._runs["lorentz"][qid] = {
                data.doc_ids[d]: s for d, s in zip(order[i].tolist(), best[i].tolist(), strict=True)
            }
            self._runs["hybrid"][qid] = {
                data.doc_ids[d]: s
                for d, s in zip(cand[i].tolist(), hybrid[i].tolist(), strict=True)
            }

    def on_validation_epoch_end(self) -> None:
        qrels = self.trainer.datamodule.val_qrels
        for name, key in (("lorentz", "val/ndcg@10"), ("hybrid", "val/ndcg@10_hybrid")):
            value = evaluate(self._runs[name], qrels, ["ndcg@10"])["ndcg@10"]
            self.log(key, value, prog_bar=name == "lorentz")
        del self._docs

    # ------------------------------------------------------------------ optim / export
    def configure_optimizers(self) -> torch.optim.Optimizer:
        params = [p for p in self.projection.parameters() if p.requires_grad]
        groups = [{"params": params}]
        if self.log_scale.requires_grad:
            groups.append(
                {"params": [self.log_scale], "lr": self.hparams.temperature_lr, "weight_decay": 0.0}
            )
        return geoopt.optim.RiemannianAdam(
            groups, lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )

    def on_fit_end(self) -> None:
        if self.hparams.export_path and self.trainer.is_global_zero:
            os.makedirs(os.path.dirname(os.path.abspath(self.hparams.export_path)), exist_ok=True)
            self.encoder.save(self.hparams.export_path)


def export_projection(checkpoint: str | os.PathLike, out_path: str | os.PathLike) -> None:
    """Save the projection of a Lightning checkpoint for ``HyTEEncoder.from_pretrained``.

    The checkpoint's checksum is checked first (``ValueError`` naming a corrupt file).
    """
    check_checkpoint(checkpoint)
    module = HyTEModule.load_from_checkpoint(checkpoint, map_location="cpu")
    module.encoder.save(out_path)

"""LightningModule that trains any learnable reranker on first-stage candidate pools.

The reranker is built by name through the registry
(:func:`georag.rerank.registry.make_method`, unwrapped), so ``learned_diffusion``,
``learned_maniscope``, ``learned_map`` and any later one train through this one module.
Loss: listwise softmax cross-entropy or approximate NDCG (:mod:`train.losses`) over each
query's ranked candidates, with a learned temperature. Optimizer: Adam, or
``geoopt.optim.RiemannianAdam`` when a parameter lives on a manifold
(``geoopt.ManifoldParameter``). A corpus-level retriever (``learned_iso``) trains on
:class:`~train.corpus_data.CorpusQueryData`, whose batches hold a
:class:`~georag.batch.QueryBatch` and gains over the corpus rows; it is fitted on the data
module's ``corpus`` when fitting starts. Validation each epoch: NDCG@10 of the reranker's
inference output on the held-out training queries (``val/ndcg@10``; ``val/ndcg@10_init``
before the first step). A non-finite gradient raises :class:`FloatingPointError` in the
training step, before the optimizer can touch the weights. When fitting ends, the weights
of the best validation epoch (the starting weights included) are loaded back into the
reranker and written to ``export_path`` (with a JSON summary beside it).
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path

import geoopt
import lightning as L
import torch

from georag.rerank.learned import LearnableReranker
from georag.rerank.registry import make_method
from train.losses import LOSSES, ndcg_at_k, ranking_loss

__all__ = ["LearnedRerankerModule"]


class LearnedRerankerModule(L.LightningModule):
    """Train a learnable reranker end to end.

    Parameters
    ----------
    method : str
        Registry name of a learnable reranker (e.g. ``learned_diffusion``).
    options : dict, optional
        Config overrides of that reranker (initial knobs, ``embedding_map``, ...).
    loss : {"listwise", "approx_ndcg"}
    lr : float
        Learning rate of the scalar knobs.
    map_lr : float
        Learning rate of the embedding map (when the reranker has one).
    temperature : float
        Initial temperature of the standardized scores in the loss (learned).
    smoothing : float
        Sigmoid temperature of approximate NDCG.
    export_path : str, optional
        Where the best weights go when fitting ends.
    """

    def __init__(
        self,
        method: str = "learned_diffusion",
        options: dict | None = None,
        loss: str = "listwise",
        lr: float = 0.02,
        map_lr: float = 1e-3,
        temperature: float = 0.5,
        smoothing: float = 0.1,
        export_path: str | None = None,
    ) -> None:
        super().__init__()
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        if not (lr > 0 and map_lr > 0 and temperature > 0 and smoothing > 0):
            raise ValueError(
                f"need lr, map_lr, temperature, smoothing > 0; got {lr}, {map_lr}, "
                f"{temperature}, {smoothing}"
            )
        self.save_hyperparameters()
        reranker = make_method(method, dict(options or {}))
        if not isinstance(reranker, LearnableReranker):
            raise ValueError(f"method: {method!r} is not a learnable reranker")
        self.reranker = reranker
        self.log_temperature = torch.nn.Parameter(torch.tensor(math.log(temperature)))
        self._best: tuple[float, dict] | None = None
        self._started = 0.0

    def forward(self, batch):
        return self.reranker(batch)

    def transfer_batch_to_device(self, batch: dict, device: torch.device, dataloader_idx: int):
        return {
            "batch": batch["batch"].to(device),
            "gains": batch["gains"].to(device),
            "ideal": batch["ideal"].to(device),
        }

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        scores, ranked = self.reranker.score(batch["batch"])
        loss = ranking_loss(
            scores,
            ranked,
            batch["gains"],
            kind=self.hparams.loss,
            temperature=self.log_temperature.exp(),
            smoothing=self.hparams.smoothing,
        )
        size = batch["batch"].batch_size
        self.log("train/loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=size)
        return loss

    def on_after_backward(self) -> None:
        for name, param in self.named_parameters():
            if param.grad is not None and not bool(torch.isfinite(param.grad).all()):
                raise FloatingPointError(
                    f"non-finite gradient in {name!r} at step {self.global_step} "
                    f"(loss or knobs diverged); the weights were not updated"
                )

    def _ndcg(self, batch: dict) -> torch.Tensor:
        result = self.reranker(batch["batch"])
        return ndcg_at_k(result.scores, result.keep, batch["gains"], batch["ideal"])

    def on_fit_start(self) -> None:
        self.reranker.train()  # built in eval mode (inference); Lightning keeps module modes
        corpus = getattr(self.trainer.datamodule, "corpus", None)
        if corpus is not None:  # a corpus-level retriever (learned_iso) indexes it first
            self.reranker.fit(corpus)

    def on_train_start(self) -> None:
        self._started = time.perf_counter()
        was = self.reranker.training
        self.reranker.eval()
        values = [
            self._ndcg(self.transfer_batch_to_device(b, self.device, 0))
            for b in self.trainer.datamodule.val_dataloader()
        ]
        self.reranker.train(was)
        initial = float(torch.cat(values).mean()) if values else float("nan")
        self.initial_ndcg = initial
        if values:  # the starting knobs compete too: a run never exports worse weights
            self._best = (initial, copy.deepcopy(self.reranker.state_dict()))
        for logger in self.loggers:
            logger.log_metrics({"val/ndcg@10_init": initial}, step=0)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        values = self._ndcg(batch)
        self.log(
            "val/ndcg@10", values.mean(), prog_bar=True, on_epoch=True, batch_size=values.numel()
        )

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            return
        value = float(self.trainer.callback_metrics["val/ndcg@10"])
        for name, knob in self.reranker.knobs().items():
            self.log(f"knob/{name}", knob)
        if self._best is None or value > self._best[0]:
            self._best = (value, copy.deepcopy(self.reranker.state_dict()))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        maps, knobs = [], [self.log_temperature]
        for name, param in self.reranker.named_parameters():
            (maps if name.startswith("embed.") else knobs).append(param)
        groups = [{"params": knobs, "lr": self.hparams.lr}]
        if maps:
            groups.append({"params": maps, "lr": self.hparams.map_lr})
        if any(isinstance(p, geoopt.ManifoldParameter) for p in self.parameters()):
            return geoopt.optim.RiemannianAdam(groups)
        return torch.optim.Adam(groups)

    def on_fit_end(self) -> None:
        if self._best is not None:  # the reranker leaves fit with its best epoch's weights
            self.reranker.load_state_dict(self._best[1])
        self.train_seconds = time.perf_counter() - self._started
        path = self.hparams.export_path
        if not path or not self.trainer.is_global_zero or self._best is None:
            return
        digest = self.reranker.save(path)
        summary = {
            "method": self.hparams.method,
            "val_ndcg@10_init": self.initial_ndcg,
            "val_ndcg@10_best": self._best[0],
            "epochs": self.current_epoch,
            "train_seconds": self.train_seconds,
            "knobs": self.reranker.knobs(),
            "sha256": digest,
            "split": getattr(self.trainer.datamodule, "split", None),
        }
        Path(str(path) + ".json").write_text(json.dumps(summary, indent=1))

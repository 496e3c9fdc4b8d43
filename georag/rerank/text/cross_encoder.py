"""A cross-encoder second stage over any AutoModelForSequenceClassification checkpoint."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.rerank.registry import register
from georag.resources import require_model
from georag.retrieval.backends import calibration_texts, check_backend, compiled
from georag.retrieval.encoder import default_device

__all__ = ["CrossEncoderConfig", "CrossEncoderReranker"]


def _logits(model: torch.nn.Module, features: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(**features).logits


@dataclass(frozen=True)
class CrossEncoderConfig:
    """``model``: a local folder or hub id (no cross-encoder weights ship on PyPI);
    ``encoder_backend``: its runtime (:mod:`georag.retrieval.backends`; ``torch`` by default)."""

    model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    batch_size: int = 64
    max_length: int = 512
    encoder_backend: str = "torch"

    def __post_init__(self) -> None:
        check_backend(self.encoder_backend)


@register
class CrossEncoderReranker:
    """Scores each kept (query, candidate) pair with a sequence-classification model.

    The score is the single logit of a one-label model, or logit[1] - logit[0] of a
    two-label model. Needs ``batch.query_texts`` and ``batch.cand_texts``.

    Parameters
    ----------
    config : CrossEncoderConfig
    device : str or torch.device, optional
        Defaults to CUDA when present.
    model, tokenizer : optional
        Already loaded objects (tests build a tiny BERT from a config).
    """

    name = "ce"
    config_class = CrossEncoderConfig

    def __init__(
        self,
        config: CrossEncoderConfig | None = None,
        *,
        device: str | torch.device | None = None,
        model=None,
        tokenizer=None,
    ) -> None:
        self.config = config or CrossEncoderConfig()
        backend = self.config.encoder_backend
        self.device = torch.device(device) if device is not None else default_device(backend)
        check_backend(backend, self.device)
        if model is None or tokenizer is None:  # no cross-encoder weights ship on PyPI
            path = require_model(self.config.model, hint="give ce.model=PATH (a local folder)")
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
        self.model = (model or AutoModelForSequenceClassification.from_pretrained(path)).to(
            self.device
        )
        self.model.eval()
        if self.model.config.num_labels not in (1, 2):
            raise ValueError(f"model: expected 1 or 2 labels, got {self.model.config.num_labels}")
        self.session = None
        if backend != "torch":
            self.session = compiled(
                self.config.model,
                backend,
                self.model,
                lambda: self._features(["a query"], ["a passage"]),
                _logits,
                self._calibration,
            )

    def _features(self, queries: list[str], passages: list[str]) -> dict[str, torch.Tensor]:
        """Tokenized (query, passage) pairs: ``{name: int64 tensor (N, L)}``."""
        return dict(
            self.tokenizer(
                queries,
                passages,
                padding=True,
                truncation=True,
                max_length=self.config.max_length,
                return_tensors="pt",
            )
        )

    def _calibration(self) -> list[dict[str, torch.Tensor]]:
        """Each calibration passage paired with a calibration query, one pair per input."""
        queries, passages = calibration_texts()
        return [self._features([queries[i % len(queries)]], [p]) for i, p in enumerate(passages)]

    @torch.inference_mode()
    def _score_pairs(self, queries: list[str], passages: list[str]) -> torch.Tensor:
        out = []
        for start in range(0, len(queries), self.config.batch_size):
            stop = start + self.config.batch_size
            inputs = self._features(queries[start:stop], passages[start:stop])
            inputs = {k: v.to(self.device) for k, v in inputs.items()}
            if self.session is not None:
                logits = self.session(inputs)
            else:
                logits = self.model(**inputs).logits.float()
            out.append(logits[:, 0] if logits.shape[1] == 1 else logits[:, 1] - logits[:, 0])
        return torch.cat(out) if out else torch.empty(0)

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        if batch.query_texts is None or batch.cand_texts is None:
            raise ValueError("batch: the cross-encoder needs query_texts and cand_texts")
        rows, cols = batch.mask.nonzero(as_tuple=True)
        queries = [batch.query_texts[r] for r in rows.tolist()]
        passages = [batch.cand_texts[r][c] for r, c in zip(rows.tolist(), cols.tolist())]
        scores = torch.full(batch.mask.shape, float("-inf"), device=batch.scores.device)
        scores[rows, cols] = self._score_pairs(queries, passages).to(scores.device)
        return RerankResult.from_scores(scores, batch.mask.clone())

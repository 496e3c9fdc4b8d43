"""Half-precision batches: every method computes in float32 and answers in the input dtype.

The geometric kernels need float32 at least: power iterations do not converge in float16
(diffusion), and ``torch.cdist`` has no Half kernel on the CPU (Ricci-Filtration). A batch
whose embeddings are float16 or bfloat16 (a GPU encoder's output) is therefore upcast to
float32 once, reranked, and its scores are cast back to the input dtype; the keep mask is
unchanged. float32 and float64 batches pass through untouched.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.rerank.base import PoolReranker

__all__ = ["Float32Compute", "HALF_DTYPES"]

HALF_DTYPES = (torch.float16, torch.bfloat16)


class Float32Compute:
    """Wrap a reranker so that half / bfloat16 batches are computed in float32.

    Parameters
    ----------
    stage : PoolReranker
        The wrapped method (``.stage``); its ``name`` and ``config`` are this object's.
    """

    def __init__(self, stage: PoolReranker) -> None:
        self.stage = stage
        self.name = stage.name
        self.config = getattr(stage, "config", None)

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        dtype = batch.query.dtype
        if dtype not in HALF_DTYPES and batch.cands.dtype not in HALF_DTYPES:
            return self.stage(batch)
        upcast = replace(
            batch, query=batch.query.float(), cands=batch.cands.float(), scores=batch.scores.float()
        )
        result = self.stage(upcast)
        return RerankResult(scores=result.scores.to(dtype), keep=result.keep)

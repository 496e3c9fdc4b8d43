"""Half and bfloat16 batches: computed in float32, answered in the input dtype."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from georag.eval.synthetic import random_batch
from georag.rerank.registry import make_reranker


def _cast(batch, dtype):
    return replace(
        batch,
        query=batch.query.to(dtype),
        cands=batch.cands.to(dtype),
        scores=batch.scores.to(dtype),
    )


@pytest.mark.parametrize("method", ["diffusion", "maniscope", "ricci", "none"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_equal_float32_on_the_same_values(method, dtype):
    half = _cast(
        random_batch(np.random.default_rng(3), 3, 12, 16, unit=True, padded=[(1, 7)]), dtype
    )
    reranker = make_reranker(method)
    got = reranker(half)
    want = reranker(_cast(half, torch.float32))  # the same (rounded) values in float32
    assert got.scores.dtype == dtype
    assert torch.equal(got.keep, want.keep)
    torch.testing.assert_close(got.scores, want.scores.to(dtype), rtol=0, atol=0)


def test_float32_and_float64_pass_through_untouched():
    batch = random_batch(np.random.default_rng(0), 2, 8, 4)
    assert make_reranker("diffusion")(batch).scores.dtype == torch.float64

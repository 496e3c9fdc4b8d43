"""learned_ricci specifics (the shared checks are in test_learned.py): flat and padded
batches, options, gradients of the length exponent, checkpointing, float32 robustness."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from georag.eval.synthetic import random_batch
from georag.rerank.geometric.ricci_filtration import (
    LearnedRicci,
    LearnedRicciConfig,
    RicciFiltration,
    RicciFiltrationConfig,
)
from georag.rerank.registry import make_reranker


def batches():
    rng = np.random.default_rng(0)
    yield random_batch(rng, 4, 30, 16, padded=[(1, 12), (2, 2)], shuffle=True)
    yield random_batch(rng, 3, 8, 8, dtype=torch.float32, unit=True)
    flat = random_batch(rng, 2, 6, 4)
    flat.cands[0] = flat.cands[0, :1]  # identical embeddings: complete graph, flat
    yield flat


@pytest.mark.parametrize("embedding_map", [False, True])
def test_untrained_equals_ricci_filtration(embedding_map):
    for batch in batches():
        dim = batch.query.shape[1]
        learned = LearnedRicci(LearnedRicciConfig(embedding_map=embedding_map, dim=dim))
        fixed = RicciFiltration()(batch)
        assert not torch.equal(fixed.keep, batch.mask)  # the surgery drops candidates
        out = learned(batch)
        assert torch.equal(out.keep, fixed.keep)
        kept = fixed.keep
        assert (out.scores[kept] - fixed.scores[kept]).abs().max() <= 1e-6
        assert torch.isinf(out.scores[~kept]).all()


def test_options_reach_the_fixed_method():
    batch = next(batches())
    options = {"alpha": 0.3, "exp_power": 1.0, "iterations": 5, "quantile": 0.4, "top_m": 10}
    fixed = RicciFiltration(RicciFiltrationConfig(**options))(batch)
    learned = make_reranker("learned_ricci", {"learned_ricci": {"fixed": options}})(batch)
    assert torch.equal(learned.keep, fixed.keep)


def test_training_gradients_reach_every_knob():
    batch = random_batch(np.random.default_rng(1), 3, 12, 8)
    learned = LearnedRicci(
        LearnedRicciConfig(
            fixed=RicciFiltrationConfig(iterations=3),
            embedding_map=True,
            dim=8,
            geometry_weight=0.1,
            length_power=0.5,
        )
    )
    learned.train()
    scores, ranked = learned.score(batch)
    assert ranked.sum() == 3 * 12  # every pooled candidate is ranked in training
    gains = torch.rand(scores.shape, generator=torch.Generator().manual_seed(0))
    (torch.where(ranked, scores, 0.0) * gains).sum().backward()
    for name, param in learned.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, name


def test_checkpointed_training_gives_the_same_gradients():
    batch = random_batch(np.random.default_rng(2), 2, 10, 6)
    grads = []
    for checkpoint in (False, True):
        learned = LearnedRicci(
            LearnedRicciConfig(
                fixed=RicciFiltrationConfig(iterations=3),
                dim=6,
                checkpoint=checkpoint,
                geometry_weight=0.2,
            )
        )
        learned.train()
        scores, ranked = learned.score(batch)
        torch.where(ranked, scores, 0.0).sum().backward()
        grads.append(torch.stack([p.grad for p in learned.parameters()]))
    assert torch.allclose(grads[0], grads[1], atol=1e-10)


def test_bad_config_names_the_argument():
    with pytest.raises(ValueError, match="alpha"):
        LearnedRicciConfig(fixed=RicciFiltrationConfig(alpha=1.0))
    with pytest.raises(ValueError, match="surgery_temperature"):
        LearnedRicciConfig(surgery_temperature=0.0)


def test_float32_training_gradients_are_finite_with_duplicates():
    """Duplicate candidates (r = 0) and padded edges in float32: no NaN in the gradients."""
    batch = random_batch(np.random.default_rng(3), 4, 16, 8, dtype=torch.float32, padded=[(2, 5)])
    batch.cands[:, 1] = batch.cands[:, 0]
    batch.cands[:, 3] = batch.cands[:, 0]
    learned = LearnedRicci(
        LearnedRicciConfig(fixed=RicciFiltrationConfig(iterations=4), dim=8, length_power=0.3)
    )
    learned.train()
    scores, ranked = learned.score(batch)
    torch.where(ranked, scores, 0.0).sum().backward()
    for name, param in learned.named_parameters():
        assert torch.isfinite(param.grad).all(), name

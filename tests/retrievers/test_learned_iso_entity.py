"""Learnable ISO-RAG on the entity graph: untrained equals the fixed method, every knob's
gradient against finite differences (float64), a training step lowers a loss, bad configs."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from georag.retrievers.iso import IsoRagConfig
from georag.retrievers.iso_entity import IsoEntity, IsoEntityConfig
from georag.retrievers.learned_iso_entity import (
    KNOBS,
    LearnedIsoEntity,
    LearnedIsoEntityConfig,
)
from tests.retrievers import entity_cases as cases

FIXED = IsoEntityConfig(linking="both", link_top_k=2, iso=IsoRagConfig(tol=1e-12, max_iter=1000))


def fitted(fixed: IsoEntityConfig = FIXED, **options) -> LearnedIsoEntity:
    c = cases.corpus()
    learned = LearnedIsoEntity(LearnedIsoEntityConfig(fixed=fixed, **options))
    return learned.fit_graph(c.embeddings, cases.graph(), doc_ids=c.doc_ids)


def test_untrained_equals_the_fixed_method():
    c, q = cases.corpus(), cases.queries()
    fixed = IsoEntity(FIXED).fit_graph(c.embeddings, cases.graph(), doc_ids=c.doc_ids)
    learned = fitted()
    torch.testing.assert_close(learned.fixed().scores(q), fixed.scores(q), rtol=1e-6, atol=1e-9)
    assert torch.equal(learned(q).keep, fixed.retrieve(q, top_k=10).keep)


def test_the_surrogate_at_a_cold_temperature_is_the_hard_rule():
    q = cases.queries()
    learned = fitted(prune_temperature=1e-4)
    learned.train()
    scores, ranked = learned.score(q)
    hard = learned.fixed().scores(q)
    assert torch.equal(ranked, torch.isfinite(hard))
    torch.testing.assert_close(scores.detach()[ranked], hard[ranked], rtol=1e-6, atol=1e-8)


def test_gradients_of_every_knob_match_finite_differences():
    iso = IsoRagConfig(prune_threshold=0.05, tol=1e-13, max_iter=2000)  # pruning acts
    learned = fitted(fixed=dataclasses.replace(FIXED, iso=iso))
    cases.check_knob_gradients(learned, KNOBS, seed=1)


def test_a_training_step_lowers_a_listwise_loss():
    learned = fitted()
    learned.train()
    q = cases.queries()
    target = torch.zeros(3, 7, dtype=torch.float64)
    target[0, [0, 1]] = target[1, [3, 4]] = target[2, [5, 6]] = 0.5

    def loss() -> torch.Tensor:
        scores, ranked = learned.score(q)
        return -(target * torch.log_softmax(scores.masked_fill(~ranked, -1e9), dim=1)).sum()

    optimizer = torch.optim.Adam(learned.parameters(), lr=0.1)
    before = float(loss().detach())
    for _ in range(5):
        optimizer.zero_grad()
        loss().backward()
        optimizer.step()
    assert float(loss().detach()) < before


def test_bad_configs_are_one_line_naming_the_field():
    with pytest.raises(ValueError, match="embedding_map"):
        LearnedIsoEntityConfig(embedding_map=True)
    with pytest.raises(ValueError, match="pruning"):
        LearnedIsoEntityConfig(fixed=IsoEntityConfig(pruning="random"))
    with pytest.raises(ValueError, match="prune_threshold"):
        LearnedIsoEntityConfig(
            fixed=IsoEntityConfig(iso=IsoRagConfig(prune_threshold=float("inf")))
        )
    with pytest.raises(ValueError, match="call fit"):
        LearnedIsoEntity().retrieve(cases.queries(), top_k=2)

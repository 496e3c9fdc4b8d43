"""Learnable HippoRAG 2: untrained equals the fixed method, gradients of every knob against
finite differences (float64), a training step that lowers a ranking loss, bad configs."""

from __future__ import annotations

import pytest
import torch

from georag.rerank.registry import make_reranker
from georag.retrievers.hipporag2 import HippoRAG2, HippoRAG2Config
from georag.retrievers.learned_hipporag2 import (
    KNOBS,
    LearnedHippoRAG2,
    LearnedHippoRAG2Config,
)
from tests.retrievers import entity_cases as cases

OPTIONS = {"linking": "both", "link_top_k": 2, "tol": 1e-13}


def fitted(fixed: HippoRAG2Config | None = None) -> LearnedHippoRAG2:
    c = cases.corpus()
    config = LearnedHippoRAG2Config(fixed=fixed or HippoRAG2Config(**OPTIONS))
    return LearnedHippoRAG2(config).fit_graph(c.embeddings, cases.graph(), doc_ids=c.doc_ids)


@pytest.mark.parametrize("fusion", ["none", "dense", "dense+bm25"])
def test_untrained_equals_the_fixed_method_on_both_paths(fusion):
    c, q = cases.corpus(), cases.queries()
    config = HippoRAG2Config(**OPTIONS, fusion=fusion)
    fixed = HippoRAG2(config).fit_graph(c.embeddings, cases.graph(), doc_ids=c.doc_ids)
    learned = fitted(config)
    expected = fixed.scores(q)
    torch.testing.assert_close(learned.fixed().scores(q), expected, rtol=1e-6, atol=1e-9)
    learned.train()
    scores, ranked = learned.score(q)
    assert ranked.all()
    torch.testing.assert_close(scores.detach(), expected, rtol=1e-6, atol=1e-9)
    learned.eval()
    kept = learned(q).keep
    assert torch.equal(kept, fixed.retrieve(q, top_k=10).keep)


def test_gradients_of_every_knob_match_finite_differences():
    cases.check_knob_gradients(fitted(HippoRAG2Config(**OPTIONS, fusion="dense")), KNOBS)


def test_a_training_step_lowers_a_listwise_loss():
    learned = fitted(HippoRAG2Config(**OPTIONS, fusion="dense"))
    learned.train()
    q = cases.queries()
    target = torch.zeros(3, 7, dtype=torch.float64)
    target[0, [0, 1]] = target[1, [3, 4]] = target[2, [5, 6]] = 0.5

    def loss() -> torch.Tensor:
        scores, _ = learned.score(q)
        return -(target * torch.log_softmax(scores, dim=1)).sum()

    optimizer = torch.optim.Adam(learned.parameters(), lr=0.1)
    before = float(loss().detach())
    for _ in range(5):
        optimizer.zero_grad()
        value = loss()
        value.backward()
        optimizer.step()
    assert float(loss().detach()) < before
    assert learned.knobs() != dict.fromkeys(KNOBS, 0.0)


def test_saved_weights_reload_the_knobs(tmp_path):
    learned = fitted()
    with torch.no_grad():
        learned.damping.raw += 0.3
    learned.save(tmp_path / "w.pt")
    again = make_reranker("learned_hipporag2", weights=str(tmp_path / "w.pt"))
    assert again.knobs() == pytest.approx(learned.knobs())


def test_bad_configs_are_one_line_naming_the_field():
    with pytest.raises(ValueError, match="embedding_map"):
        LearnedHippoRAG2Config(embedding_map=True)
    with pytest.raises(ValueError, match="damping"):
        LearnedHippoRAG2Config(fixed=HippoRAG2Config(damping=0.0))
    with pytest.raises(ValueError, match="synonym_scale"):
        LearnedHippoRAG2Config(fixed=HippoRAG2Config(synonym_scale=0.0))
    with pytest.raises(ValueError, match="call fit"):
        LearnedHippoRAG2().retrieve(cases.queries(), top_k=2)

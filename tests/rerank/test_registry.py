"""The registry: a new method and its learnable twin need one file, registered by decorator;
a corpus-level retriever called on a pool says what to call instead."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from georag.batch import CandidateBatch, RerankResult
from georag.cli import main
from georag.eval.synthetic import random_batch
from georag.models.knobs import Interval
from georag.rerank import registry
from georag.rerank.learned import LearnableReranker
from georag.rerank.registry import make_reranker, register
from georag.rerank.small_pool import SmallPool, rerank_small_pools, small_pool

# --- the example sixth method: everything it needs is below (a method module decorates
# its two classes with @register; here the fixture registers them, so that the registry is
# restored after the test) ------------------------------------------------------------------


@dataclass(frozen=True)
class CentroidConfig:
    """Score by cosine to the query pulled towards the pool's centroid."""

    pull: float = 0.25

    def __post_init__(self) -> None:
        if not 0.0 <= self.pull <= 1.0:
            raise ValueError(f"pull must lie in [0, 1], got {self.pull}")


def centroid_scores(batch: CandidateBatch, *, pull: float | torch.Tensor) -> torch.Tensor:
    """``cos(c, (1 - pull) q + pull mean(c))`` over the real candidates, (B, M)."""
    weights = batch.mask.to(batch.cands.dtype).unsqueeze(2)
    centroid = (batch.cands * weights).sum(1) / weights.sum(1).clamp_min(1.0)
    target = (1.0 - pull) * batch.query + pull * centroid
    return torch.nn.functional.cosine_similarity(batch.cands, target.unsqueeze(1), dim=2)


class Centroid:
    name = "centroid"
    config_class = CentroidConfig

    def __init__(self, config: CentroidConfig | None = None) -> None:
        self.config = config or CentroidConfig()

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        return RerankResult.from_scores(centroid_scores(batch, pull=self.config.pull), batch.mask)

    def small_pool_rule(self) -> SmallPool:
        return SmallPool(slots=1, fewest=2, rule="n = 1: first-stage order (fallback)")


@dataclass(frozen=True)
class LearnedCentroidConfig:
    fixed: CentroidConfig = field(default_factory=CentroidConfig)
    weights: str | None = None


class LearnedCentroid(LearnableReranker):
    name = "learned_centroid"
    config_class = LearnedCentroidConfig
    fixed_method = "centroid"

    def __init__(self, config: LearnedCentroidConfig | None = None) -> None:
        super().__init__(config or LearnedCentroidConfig())
        self.pull = Interval(self.config.fixed.pull)
        self._load_if_given()

    def score(self, batch: CandidateBatch) -> tuple[torch.Tensor, torch.Tensor]:
        return centroid_scores(batch, pull=self.pull().to(batch.cands.dtype)), batch.mask


# --------------------------------------------------------------------------------------------


@pytest.fixture
def example_methods(monkeypatch):
    """The registry as it is plus the example methods, restored after the test."""
    registry.available_methods()  # the built-in modules register first
    monkeypatch.setattr(registry, "_METHODS", dict(registry._METHODS))
    register(Centroid)
    register(LearnedCentroid)


def test_a_sixth_method_and_its_twin_need_only_their_own_file(
    example_methods, tmp_path, embedding_cache_dir, monkeypatch
):
    batch = random_batch(np.random.default_rng(0), 3, 12, 8, padded=[(1, 7)])
    fixed = make_reranker("centroid")(batch)
    learned = make_reranker("learned_centroid")(batch)
    torch.testing.assert_close(learned.scores, fixed.scores, rtol=1e-12, atol=1e-12)
    assert torch.equal(learned.keep, fixed.keep)
    moved = make_reranker("learned_centroid", {"learned_centroid": {"fixed.pull": 0.6}})(batch)
    assert not torch.allclose(moved.scores[moved.keep], fixed.scores[fixed.keep])
    # its small-pool rule is its own: one document gets the first-stage order
    assert small_pool(make_reranker("centroid")).fewest == 2
    single = random_batch(np.random.default_rng(1), 2, 4, 8, padded=[(0, 1)])
    result, fallback = rerank_small_pools(make_reranker("centroid"), single)
    assert fallback.tolist() == [True, False]
    assert torch.equal(result.scores[0, :1], single.scores[0, :1])

    from georag.data.bundled import DEMO_DIR

    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    argv = ["eval", "--dataset", str(DEMO_DIR), "--top-m", "20", "--out", str(tmp_path)]
    methods = "none,centroid,learned_centroid,centroid+maniscope"
    assert main([*argv, "--methods", methods, "--method-option", "centroid.pull=0.5"]) == 0
    rows = {r["method"]: r for r in json.loads((tmp_path / "results.json").read_text())}
    assert list(rows) == methods.split(",")
    assert all(0.3 < row["ndcg@10"] <= 1 for row in rows.values())


def test_a_taken_name_or_a_missing_config_class_is_refused(example_methods):
    class Other(Centroid):
        pass

    with pytest.raises(ValueError, match="'centroid' is taken"):
        register(Other)

    class NoConfig:
        name = "no_config"

    with pytest.raises(ValueError, match="config_class"):
        register(NoConfig)


def test_a_corpus_retriever_called_on_a_pool_names_what_to_call():
    batch = random_batch(np.random.default_rng(1), 2, 6, 8)
    with pytest.raises(ValueError, match=r"fit\(corpus\) then retrieve.*'hyte_rescore'"):
        make_reranker("hyte")(batch)
    with pytest.raises(ValueError, match=r"^iso: ranks a whole corpus"):
        make_reranker("iso")(batch)


def test_a_missing_extra_is_skipped_and_a_broken_georag_module_raises(monkeypatch, tmp_path):
    import sys

    from georag.rerank import registry

    (tmp_path / "needs_extra.py").write_text("import not_an_installed_package\n")
    (tmp_path / "broken_import.py").write_text("from georag.batch import NoSuchName\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "METHOD_MODULES", ["needs_extra", "broken_import"])
    monkeypatch.setattr(registry, "_imported", set())
    for name in ("needs_extra", "broken_import"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(ImportError, match="NoSuchName"):
        registry._import_until("no_such_method")
    assert "needs_extra" in registry._imported

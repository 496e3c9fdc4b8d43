"""Learnable rerankers: untrained = fixed, valid knobs, gradients, saved weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from georag.eval.synthetic import random_batch
from georag.models.knobs import EmbeddingMap, Interval, Positive
from georag.rerank.geometric.diffusion import DiffusionConfig, LearnedDiffusionConfig, safe_power
from georag.rerank.registry import make_method, make_reranker

PAIRS = [
    ("diffusion", "learned_diffusion"),
    ("maniscope", "learned_maniscope"),
    ("ricci", "learned_ricci"),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("fixed,learned", PAIRS)
@pytest.mark.parametrize("embedding_map", [False, True])
def test_untrained_equals_fixed(dtype, fixed, learned, embedding_map):
    rng = np.random.default_rng(0)
    padded = [(1, 30), (2, 12)] if fixed == "maniscope" else [(1, 30), (2, 3), (3, 1)]
    batch = random_batch(rng, 5, 60, 16, dtype=dtype, padded=padded, unit=True, shuffle=True)
    want = make_reranker(fixed)(batch)
    got = make_reranker(learned, {learned: {"dim": 16, "embedding_map": embedding_map}})(batch)
    assert torch.equal(got.keep, want.keep)
    assert (got.scores[want.keep] - want.scores[want.keep]).abs().max() <= 1e-6
    assert torch.isneginf(got.scores[~want.keep]).all()


def test_learned_map_untrained_is_the_cosine():
    batch = random_batch(np.random.default_rng(1), 3, 20, 8, padded=[(0, 5)], unit=True)
    got = make_reranker("learned_map", {"learned_map": {"dim": 8}})(batch)
    torch.testing.assert_close(got.scores[batch.mask], batch.scores[batch.mask], atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "learned", ["learned_diffusion", "learned_maniscope", "learned_map", "learned_ricci"]
)
def test_every_parameter_gets_a_finite_gradient(learned):
    batch = random_batch(
        np.random.default_rng(2),
        4,
        30,
        8,
        dtype=torch.float64,
        padded=[(1, 20)],
        unit=True,
        shuffle=True,
    )
    options = {"dim": 8} if learned == "learned_map" else {"dim": 8, "embedding_map": True}
    if learned == "learned_ricci":  # at length_power 0 the embeddings do not reach the flow
        options["length_power"] = 0.5
    reranker = make_method(learned, options).double().train()
    scores, ranked = reranker.score(batch)
    target = torch.randn(
        scores.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
    )
    torch.where(ranked, scores * target, 0.0).sum().backward()
    for name, param in reranker.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert param.grad.abs().max() > 0, name


@pytest.mark.parametrize(
    "learned,knob",
    [
        ("learned_diffusion", "damping"),
        ("learned_diffusion", "edge_power"),
        ("learned_diffusion", "teleport_power"),
        ("learned_maniscope", "alpha"),
        ("learned_maniscope", "length_scale"),
    ],
)
def test_knob_gradient_matches_finite_differences(learned, knob):
    batch = random_batch(
        np.random.default_rng(3), 3, 25, 6, dtype=torch.float64, unit=True, shuffle=True
    )
    reranker = make_method(
        learned, {"dim": 6, "fixed.tol": 1e-13} if learned == "learned_diffusion" else {"dim": 6}
    ).train()
    weight = torch.randn(3, 25, dtype=torch.float64, generator=torch.Generator().manual_seed(1))

    def loss() -> torch.Tensor:
        scores, ranked = reranker.score(batch)
        return torch.where(ranked, scores * weight, 0.0).sum()

    raw = getattr(reranker, knob).raw
    (grad,) = torch.autograd.grad(loss(), raw)
    h = 1e-6
    with torch.no_grad():
        raw += h
        up = loss()
        raw -= 2 * h
        down = loss()
        raw += h
    assert float(grad) == pytest.approx(float((up - down) / (2 * h)), rel=1e-4, abs=1e-8)


def test_parameterisation_keeps_knobs_valid_without_killing_gradients():
    damping, scale = Interval(0.85), Positive(1.0)
    optimizer = torch.optim.SGD(list(damping.parameters()) + list(scale.parameters()), lr=50.0)
    for _ in range(20):  # drive both towards invalid values (damping < 0, scale < 0)
        optimizer.zero_grad()
        (damping() + scale()).backward()
        assert damping.raw.grad != 0 and scale.raw.grad != 0
        optimizer.step()
        assert 0.0 < float(damping()) < 1.0
        assert float(scale()) > 0.0


def test_safe_power_is_exact_at_one_and_zero_safe():
    x = torch.tensor([0.0, 0.25, 1.0, 3.0], dtype=torch.float64, requires_grad=True)
    power = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    y = safe_power(x, power)
    assert torch.equal(y.detach(), x.detach())
    y.sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(power.grad)
    assert x.grad[0] == 0
    torch.testing.assert_close(
        safe_power(x.detach(), torch.tensor(2.5, dtype=torch.float64)), x.detach() ** 2.5
    )


def test_embedding_map_starts_at_identity():
    x = torch.randn(2, 5, 7)
    assert torch.equal(EmbeddingMap(7)(x), x)
    with pytest.raises(ValueError, match="dimension 7"):
        EmbeddingMap(7)(torch.randn(3, 4))


@pytest.mark.parametrize(
    "learned", ["learned_diffusion", "learned_maniscope", "learned_map", "learned_ricci"]
)
def test_saved_weights_load_through_the_registry(tmp_path, learned):
    batch = random_batch(np.random.default_rng(4), 3, 30, 8, unit=True, shuffle=True)
    options = {"dim": 8} if learned == "learned_map" else {"dim": 8, "embedding_map": True}
    reranker = make_method(learned, options)
    with torch.no_grad():
        for param in reranker.parameters():
            param.add_(0.05 * torch.randn_like(param))
    path = tmp_path / "w.pt"
    digest = reranker.save(path)
    assert len(digest) == 64
    loaded = make_method(learned, {"weights": str(path)})
    assert loaded.config.embedding_map if learned != "learned_map" else True
    assert torch.equal(loaded(batch).scores, reranker(batch).scores)
    assert not loaded.training
    # the registry's pool wrapper (float32 compute of half batches) passes it through
    wrapped = make_reranker(learned, {learned: {"weights": str(path)}})
    assert torch.equal(wrapped(batch).scores, reranker(batch).scores)


def test_bad_weights_files(tmp_path):
    with pytest.raises(ValueError, match="weights: .*no such file"):
        make_reranker("learned_diffusion", {"learned_diffusion": {"weights": "/nope.pt"}})
    path = tmp_path / "w.pt"
    make_method("learned_maniscope").save(path)
    with pytest.raises(ValueError, match="'learned_maniscope' weights, not 'learned_diffusion'"):
        make_reranker("learned_diffusion", {"learned_diffusion": {"weights": str(path)}})
    blob = bytearray(path.read_bytes())
    blob[100] ^= 1
    path.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="weights: .*checksum mismatch"):
        make_reranker("learned_maniscope", {"learned_maniscope": {"weights": str(path)}})
    path.write_text("not a weights file")
    with pytest.raises(ValueError, match="weights: .*no georag manifest"):
        make_reranker("learned_maniscope", {"learned_maniscope": {"weights": str(path)}})


def test_bad_config():
    with pytest.raises(ValueError, match="damping"):
        LearnedDiffusionConfig(fixed=DiffusionConfig(damping=1.0))
    with pytest.raises(ValueError, match="length_scale"):
        make_reranker("learned_maniscope", {"learned_maniscope": {"length_scale": -1.0}})
    with pytest.raises(ValueError, match="unknown key"):
        make_reranker("learned_maniscope", {"learned_maniscope": {"eta": 1.0}})

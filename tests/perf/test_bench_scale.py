"""The arithmetic of the corpus-growth benchmark (georag.perf.scaling): synthetic texts,
slopes, extrapolation."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def scale():
    from georag.perf import scaling

    return scaling


def test_a_synthetic_text_comes_from_its_own_cluster_and_covers_it(scale):
    source = np.array([2, 0, 1, 0, 2, 2, 1])
    label = np.repeat([0, 1, 2], 3000)
    pick = scale.texts_of_clusters(label, source, np.random.default_rng(0))
    assert np.array_equal(source[pick], label)
    for cluster in (0, 1, 2):
        members = np.flatnonzero(source == cluster)
        counts = np.bincount(pick[label == cluster], minlength=len(source))[members]
        assert counts.min() > 800  # each member drawn, about uniformly (3000 / 2 or 3)


def test_a_cluster_without_source_documents_is_refused(scale):
    with pytest.raises(ValueError, match="label"):
        scale.texts_of_clusters(np.array([0, 3]), np.array([0, 1]), np.random.default_rng(0))


def test_slope_recovers_a_power_law_and_needs_two_sizes(scale):
    points = [(n, 3e-6 * n**1.5) for n in (1e3, 1e4, 1e5)]
    assert scale.slope(points) == pytest.approx(1.5)
    assert scale.slope(points[:1]) is None
    assert scale.slope([(1e3, 1.0), (1e3, 2.0)]) is None


def test_extrapolation_uses_the_slope_but_never_below_linear(scale):
    quadratic = [(1e3, 1.0), (1e4, 100.0)]
    assert scale.extrapolate(quadratic, 1e5) == pytest.approx(1e4)
    flat = [(1e3, 1.0), (1e4, 1.0)]
    assert scale.extrapolate(flat, 1e5) == pytest.approx(10.0)
    assert scale.extrapolate([(1e3, 2.0)], 1e4) == pytest.approx(20.0)
    assert scale.extrapolate([], 1e4) is None


def test_series_scales_sampled_edges_to_the_whole_graph(scale):
    timing = {"seconds": 2.0, "cpu_seconds": 1.0}
    rows = [
        {
            "kernel": "ricci",
            "n": 100,
            "threads": 1,
            "skipped": None,
            "edges": 1000,
            "ricci_edges": 100,
            "timings": {"ricci": timing},
        },
        {"kernel": "ppr", "n": 100, "threads": 2, "skipped": None, "timings": {"ppr": timing}},
        {"kernel": "ppr", "n": 1000, "threads": 2, "skipped": "time cap"},
    ]
    assert scale.series_of(rows) == {("ricci", 1): [(100, 20.0)], ("ppr", 2): [(100, 2.0)]}
    assert scale.series_of(rows, cpu=True)[("ricci", 1)] == [(100, 10.0)]


def test_edge_sample_is_sorted_distinct_or_everything(scale):
    pick = scale.edge_sample(1000, 100)
    assert len(np.unique(pick)) == 100 and np.all(np.diff(pick) > 0)
    assert np.array_equal(scale.edge_sample(10, 0), np.arange(10))
    assert np.array_equal(scale.edge_sample(10, 50), np.arange(10))


def test_series_can_keep_the_sampled_edges_time(scale):
    row = {
        "kernel": "grc",
        "n": 100,
        "threads": 1,
        "skipped": None,
        "edges": 1000,
        "ricci_edges": 100,
        "timings": {"grc": {"seconds": 2.0, "cpu_seconds": 1.0}},
    }
    assert scale.series_of([row], whole_graph=False) == {("grc", 1): [(100, 2.0)]}


def _fit(count: int = 8, dim: int = 16, seed: int = 0) -> dict:
    gen = np.random.default_rng(seed)
    centres = gen.standard_normal((count, dim)) * 0.5
    weight = gen.random(count)
    return {"centres": centres, "scale": gen.random(count), "weight": weight / weight.sum()}


def test_the_centre_count_grows_at_the_fitted_ratio_never_below_the_fitted(scale):
    assert scale.centre_count(5183, 64, 5183 / 64) == 64
    assert scale.centre_count(100_000, 64, 5183 / 64) == round(100_000 * 64 / 5183) == 1235
    assert scale.centre_count(1000, 64, 5183 / 64) == 64
    assert scale.centre_count(100_000, 64, 0) == 64
    assert scale.centre_count(100_000, 64, None) == 64


def test_grown_centres_keep_the_fitted_ones_and_extend_a_smaller_count(scale):
    fit = _fit()
    small = scale.grown_centres(fit, 20, np.random.default_rng(5))
    large = scale.grown_centres(fit, 50, np.random.default_rng(5))
    assert large["centres"].shape == (50, 16) and len(large["parent"]) == 50
    np.testing.assert_allclose(large["centres"][:8], fit["centres"], rtol=1e-6)
    assert np.array_equal(large["parent"][:8], np.arange(8))
    np.testing.assert_array_equal(small["parent"], large["parent"][:20])
    np.testing.assert_allclose(small["centres"], large["centres"][:20])
    assert large["weight"].sum() == pytest.approx(1.0)
    np.testing.assert_allclose(large["scale"], fit["scale"][large["parent"]])
    fitted_only = scale.grown_centres(fit, 3, np.random.default_rng(5))
    assert len(fitted_only["centres"]) == 8


def test_a_grown_centre_sits_near_its_parent_with_its_norm(scale):
    fit = _fit(count=16, dim=64)
    grown = scale.grown_centres(fit, 2000, np.random.default_rng(1))
    centres = fit["centres"]
    gap = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
    np.fill_diagonal(gap, np.inf)
    nearest = np.median(gap.min(1))
    parent = grown["parent"][16:]
    step = np.linalg.norm(grown["centres"][16:] - centres[parent], axis=1)
    assert 0.5 * nearest < np.median(step) < 1.5 * nearest
    np.testing.assert_allclose(
        np.linalg.norm(grown["centres"][16:], axis=1),
        np.linalg.norm(centres[parent], axis=1),
        rtol=1e-5,
    )
    # parents drawn by cluster weight
    share = np.bincount(parent, minlength=16) / len(parent)
    np.testing.assert_allclose(share, fit["weight"], atol=0.03)

"""The pure helpers of scripts/bench/bench_scale.py: synthetic texts, slopes, extrapolation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def scale():
    sys.path.insert(0, str(ROOT / "scripts" / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(
            "bench_scale", ROOT / "scripts/bench/bench_scale.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(ROOT / "scripts" / "bench"))


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

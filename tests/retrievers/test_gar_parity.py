"""georag's GAR against pyterrier-adaptive 0.2.1's: the same corpus graph (exported to its
``NpTopKCorpusGraph``), the same deterministic scorer, pools and budget give the same
ranking, document for document, and the same step for each document."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("pyterrier_adaptive")

from georag.rerank.baselines.learned_map import LearnedMap, LearnedMapConfig  # noqa: E402
from georag.rerank.registry import make_reranker  # noqa: E402
from tests.retrievers.gar_cases import synthetic_corpus, synthetic_queries  # noqa: E402
from tests.retrievers.gar_peer import GeoragScorer, export_graph, peer_rankings  # noqa: E402


def _compare(stage, pool, folder, *, check_iterations: bool = True) -> int:
    """Assert georag's ranking of every query equals the peer's; returns documents compared."""
    corpus = stage.corpus
    graph = export_graph(stage.graph.neighbours, corpus.doc_ids, folder)
    scorer = GeoragScorer(
        stage.scorer, corpus.embeddings, corpus.doc_ids, dict(zip(pool.query_ids, pool.query))
    )
    ranked, iterations = peer_rankings(
        pool, graph, scorer, budget=stage.config.budget, batch_size=stage.config.batch_size
    )
    ours = stage.rank(pool)
    compared = 0
    for q, qid in enumerate(pool.query_ids):
        rows = [r for r in ours.rows[q].tolist() if r >= 0]
        assert [corpus.doc_ids[r] for r in rows] == ranked[qid], f"query {qid}"
        if check_iterations:
            assert ours.iteration[q, : len(rows)].tolist() == iterations[qid], f"query {qid}"
        compared += len(rows)
    return compared


def _random_map(tmp_path, dim: int) -> str:
    """A learned_map with a seeded random map and fusion weight, saved as weights."""
    torch.manual_seed(0)
    model = LearnedMap(LearnedMapConfig(dim=dim))
    with torch.no_grad():
        model.embed.weight.copy_(torch.eye(dim) + 0.3 * torch.randn(dim, dim))
        model.fusion.raw.fill_(0.5)
    path = tmp_path / "map.pt"
    model.save(path)
    return str(path)


@pytest.mark.parametrize(
    ("graph", "pool_size", "budget", "batch_size"),
    [("dense", 10, 30, 4), ("dense", 20, 20, 16), ("bm25", 8, 40, 3), ("dense", 5, 60, 7)],
)
def test_same_ranking_as_pyterrier_adaptive_on_a_synthetic_corpus(
    tmp_path, graph, pool_size, budget, batch_size
):
    """Duplicated documents make equal scores, so every tie-break is exercised."""
    corpus = synthetic_corpus(tmp_path)
    stage = make_reranker(
        "gar", graph=graph, pool_size=pool_size, budget=budget, batch_size=batch_size, k=6
    ).fit(corpus)
    pool = stage.dense_pool(synthetic_queries(corpus, b=8))
    assert _compare(stage, pool, tmp_path / "pt-graph") >= 8 * pool_size


def test_same_ranking_with_a_learned_map_scorer(tmp_path):
    corpus = synthetic_corpus(tmp_path)
    options = {"learned_map": {"weights": _random_map(tmp_path, 8)}}
    stage = make_reranker(
        "gar", scorer="learned_map", scorer_options=options, pool_size=10, budget=40, batch_size=4
    ).fit(corpus)
    pool = stage.dense_pool(synthetic_queries(corpus, b=8))
    assert _compare(stage, pool, tmp_path / "pt-graph") == 8 * 40


@pytest.mark.slow  # pyterrier-adaptive loops in Python: about a minute for 300 queries
@pytest.mark.data
@pytest.mark.parametrize(
    ("dataset", "graph", "budget", "count"),
    [
        ("scifact", "dense", 100, 300),
        ("scifact", "bm25", 100, 300),
        ("scifact", "dense", 1000, 40),
        ("cranfield", "dense", 100, 225),
        ("cranfield", "bm25", 1000, 40),
    ],
)
def test_same_ranking_as_pyterrier_adaptive_on_real_data(
    data_dir, tmp_path, dataset, graph, budget, count
):
    """Test queries, MiniLM embeddings (the shared cache), the exact dense pool of the
    budget's depth, the dense cosine as the scorer; ``count`` queries."""
    from train.corpus_data import load_query_set

    queries = load_query_set(dataset, split="test", data_dir=str(data_dir))
    stage = make_reranker("gar", graph=graph, pool_size=budget, budget=budget).fit(queries.corpus)
    pool = stage.dense_pool(queries.batch.slice(0, count))
    assert _compare(stage, pool, tmp_path / "pt-graph") == count * budget

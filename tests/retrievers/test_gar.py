"""Corpus-graph adaptive reranking: the contract, batching, bad input, the runner."""

from __future__ import annotations

import pytest
import torch

from georag.rerank.base import PoolExpander, Retriever
from georag.rerank.registry import is_retriever, make_reranker
from georag.retrieval.corpus_graph import build_corpus_graph
from georag.retrievers.gar import AdaptiveReranker
from tests.retrievers.gar_cases import synthetic_corpus, synthetic_queries


def _stage(tmp_path, **options) -> AdaptiveReranker:
    return make_reranker("gar", **{"pool_size": 10, "budget": 30, "batch_size": 4, **options})


def test_gar_is_a_registered_pool_expander(tmp_path):
    stage = _stage(tmp_path).fit(synthetic_corpus(tmp_path))
    assert isinstance(stage, PoolExpander) and isinstance(stage, Retriever)
    assert is_retriever("gar") and stage.row_ids == stage.corpus.doc_ids


@pytest.mark.parametrize("graph", ["dense", "bm25"])
def test_expansion_scores_the_budget_and_reaches_beyond_the_pool(tmp_path, graph):
    corpus = synthetic_corpus(tmp_path)
    stage = _stage(tmp_path, graph=graph).fit(corpus)
    queries = synthetic_queries(corpus)
    pool = stage.dense_pool(queries)
    ranking = stage.rank(pool)
    assert ranking.rows.shape == (6, 30) and (ranking.rows >= 0).all()
    for q in range(6):
        rows = ranking.rows[q].tolist()
        assert len(set(rows)) == 30
        pool_ids = set(pool.doc_ids[q])
        assert any(corpus.doc_ids[r] not in pool_ids for r in rows)  # expanded
        assert (ranking.scores[q][:-1] >= ranking.scores[q][1:]).all()
        # the scorer is the dense cosine: every score is that document's cosine
        cos = corpus.embeddings[ranking.rows[q]] @ queries.embeddings[q]
        scored = ranking.iteration[q] >= 0
        torch.testing.assert_close(ranking.scores[q][scored], cos[scored])
    result = stage.expand(pool)
    assert result.scores.shape == (6, len(corpus.doc_ids))
    assert result.keep.sum(1).tolist() == [30] * 6


def test_each_query_is_ranked_as_if_alone(tmp_path):
    corpus = synthetic_corpus(tmp_path)
    stage = _stage(tmp_path, budget=40, batch_size=3).fit(corpus)
    pool = stage.dense_pool(synthetic_queries(corpus))
    together = stage.rank(pool)
    for q in range(pool.batch_size):
        alone = stage.rank(pool.slice(q, q + 1))
        assert torch.equal(alone.rows[0], together.rows[q])
        assert torch.equal(alone.iteration[0], together.iteration[q])


def test_budget_equal_to_the_pool_with_an_empty_frontier_backfills_the_pool(tmp_path):
    """A graph whose every edge points back to the document itself adds nothing: the
    frontier stays empty, so the pool is scored batch by batch and keeps its order."""
    corpus = synthetic_corpus(tmp_path)
    graph = build_corpus_graph(corpus.doc_ids, kind="dense", k=1, embeddings=corpus.embeddings)
    graph.neighbours[:] = torch.arange(len(corpus.doc_ids)).unsqueeze(1).int().numpy()
    graph.save(tmp_path / "self-loops")
    stage = _stage(tmp_path, k=1, graph_path=str(tmp_path / "self-loops"), budget=10)
    stage = stage.fit(corpus)
    pool = stage.dense_pool(synthetic_queries(corpus))
    ranking = stage.rank(pool)
    for q in range(pool.batch_size):  # the pool's order (equal scores: later batch first)
        assert {corpus.doc_ids[r] for r in ranking.rows[q]} == set(pool.doc_ids[q])
        torch.testing.assert_close(ranking.scores[q], pool.scores[q], rtol=0, atol=1e-6)
    assert set(ranking.iteration.flatten().tolist()) == {0, 2, 4}  # steps 1, 3 skipped


def test_bad_input_is_one_line_naming_the_argument(tmp_path):
    corpus = synthetic_corpus(tmp_path)
    with pytest.raises(ValueError, match=r"^gar options: budget: 5 is below the pool size 10$"):
        make_reranker("gar", budget=5, pool_size=10)
    stage = _stage(tmp_path, budget=10).fit(corpus)
    deeper = make_reranker("gar", pool_size=20, budget=20).fit(corpus)
    pool = deeper.dense_pool(synthetic_queries(corpus))
    with pytest.raises(ValueError, match=r"^budget: 10 is below the pool size 20$"):
        stage.expand(pool)
    other = synthetic_corpus(tmp_path, seed=5)
    other = type(other)([f"x{i}" for i in range(150)], other.titles, other.texts, other.embeddings)
    build_corpus_graph(other.doc_ids, kind="dense", k=16, embeddings=other.embeddings).save(
        tmp_path / "other"
    )
    with pytest.raises(ValueError, match=r"^graph: a corpus graph of another corpus"):
        _stage(tmp_path, graph_path=str(tmp_path / "other")).fit(corpus)
    foreign = make_reranker("gar", pool_size=10).fit(other).dense_pool(synthetic_queries(other))
    with pytest.raises(ValueError, match=r"^pool: document 'x\d+' is not in the corpus"):
        stage.expand(foreign)
    with pytest.raises(ValueError, match=r"^scorer: 'gar' ranks a corpus, not a pool$"):
        make_reranker("gar", scorer="gar")
    with pytest.raises(ValueError, match=r"^gar: call fit\(corpus\) before ranking$"):
        _stage(tmp_path).expand(pool)


def test_a_scorer_needing_a_feature_is_one_line_naming_it(tmp_path):
    """gar gives its scorer the candidates' embeddings, scores and texts, no features."""
    corpus = synthetic_corpus(tmp_path)
    options = {"learned_adapter": {"features": ("bm25",), "dim": 8}}
    stage = _stage(tmp_path, scorer="learned_adapter", scorer_options=options).fit(corpus)
    pool = stage.dense_pool(synthetic_queries(corpus))
    with pytest.raises(ValueError, match=r"^features: learned_adapter needs bm25") as err:
        stage.expand(pool)
    assert "\n" not in str(err.value)


def test_the_runner_hands_gar_the_shared_pool(tmp_path):
    """``evaluate_methods`` runs gar on the pool it is given, not on a pool of its own: a
    pool in reverse order starts the alternation from its tail and ends elsewhere."""
    from georag.batch import scores_to_run
    from georag.eval.runner import evaluate_methods, score_run

    corpus = synthetic_corpus(tmp_path)
    queries = synthetic_queries(corpus)
    options = {"pool_size": 10, "budget": 20, "batch_size": 4}
    stage = make_reranker("gar", **options).fit(corpus)
    pool = stage.dense_pool(queries)
    flipped = pool._derive(scores=-pool.scores)
    qrels = {q: {corpus.doc_ids[r]: 1 for r in range(0, 150, 3)} for q in queries.ids}
    runs = {
        name: scores_to_run(r.scores, r.keep, queries.ids, corpus.doc_ids)
        for name, r in (("given", stage.expand(flipped)), ("own", stage.expand(pool)))
    }
    assert runs["given"] != runs["own"]
    per_query: dict = {}
    rows = evaluate_methods(
        flipped,
        qrels,
        ["gar"],
        dataset="synthetic",
        corpus=corpus,
        queries=queries,
        method_options={"gar": options},
        latency_samples=2,
        per_query_out=per_query,
    )
    assert rows[0]["kept_mean"] == 20
    assert per_query["gar"]["ndcg@10"] == score_run(runs["given"], qrels)[1]["ndcg@10"]

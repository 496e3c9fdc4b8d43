"""learned_iso: untrained = IsoRag, surrogate gradients vs finite differences, the registry,
saved weights through make_reranker and georag eval."""

from __future__ import annotations

import json
import math

import pytest
import torch

from georag.batch import Corpus, QueryBatch
from georag.rerank.registry import is_retriever, make_method, make_reranker
from georag.retrieval.passage_graph import build_passage_graph
from georag.retrievers.iso import IsoRag, IsoRagConfig
from georag.retrievers.learned_iso import LearnedIso, LearnedIsoConfig

N, D = 40, 8


@pytest.fixture(scope="module")
def corpus():
    gen = torch.Generator().manual_seed(0)
    emb = torch.nn.functional.normalize(
        torch.randn(N, D, generator=gen, dtype=torch.float64), dim=1
    )
    titles = [f"Title{i}" for i in range(N)]
    texts = [
        f"passage {i} mentions title{(3 * i) % N} and Big Entity{i % 4} here" for i in range(N)
    ]
    graph = build_passage_graph(emb, titles, texts)
    queries = torch.nn.functional.normalize(
        torch.randn(6, D, generator=gen, dtype=emb.dtype), dim=1
    )
    return emb, graph, queries


def _queries(q: torch.Tensor) -> QueryBatch:
    return QueryBatch([f"q{i}" for i in range(len(q))], [""] * len(q), q)


def _local_to_columns(trace, n: int) -> torch.Tensor:
    full = torch.full((trace.nodes.shape[0], n), -torch.inf, dtype=trace.final.dtype)
    rows = torch.arange(trace.nodes.shape[0])[:, None].expand_as(trace.nodes)
    full[rows[trace.mask], trace.nodes[trace.mask]] = trace.final[trace.mask]
    return full


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("embedding_map", [False, True])
@pytest.mark.parametrize("cfg", [{}, {"prune_threshold": 0.3, "max_nodes": 12}])
def test_untrained_equals_iso(corpus, dtype, embedding_map, cfg):
    emb, graph, queries = corpus
    emb, queries = emb.to(dtype), queries.to(dtype)
    fixed = IsoRag(IsoRagConfig(**cfg)).fit_graph(emb, graph)
    dotted = {f"fixed.{key}": value for key, value in cfg.items()}
    learned = make_reranker("learned_iso", embedding_map=embedding_map, dim=D, **dotted)
    learned.fit_graph(emb, graph)
    a = fixed.retrieve(_queries(queries), top_k=N)
    b = learned.retrieve(_queries(queries), top_k=N)
    assert torch.equal(a.keep, b.keep)
    assert (a.scores[a.keep] - b.scores[b.keep]).abs().max() <= 1e-6
    # the differentiable path with the hard rule is the same computation
    expect = _local_to_columns(fixed.trace(queries), N)
    scores, ranked = learned.score(_queries(queries), hard=True)
    assert torch.equal(ranked, expect > -torch.inf)
    assert (scores[ranked] - expect[ranked]).abs().max() <= 1e-6


def _loss(model: LearnedIso, queries: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    scores, ranked = model.score(_queries(queries))
    return torch.where(ranked, scores * weights, 0.0).sum()


@pytest.mark.parametrize("embedding_map", [False, True])
def test_surrogate_gradient_matches_finite_differences(corpus, embedding_map):
    emb, graph, queries = corpus
    model = LearnedIso(
        LearnedIsoConfig(
            fixed=IsoRagConfig(prune_threshold=0.4, damping=0.6, lam=0.7, tol=1e-14, max_iter=5000),
            prune_temperature=0.2,
            embedding_map=embedding_map,
            dim=D,
        )
    ).fit_graph(emb, graph)
    if embedding_map:  # float64 for the check, and a small move so sources and local graphs stay
        model.embed.weight.data = model.embed.weight.data.double()
        model.embed.weight.data += 0.05 * torch.randn(D, D, dtype=torch.float64)
    model.train()
    weights = torch.rand(len(queries), N, generator=torch.Generator().manual_seed(1)).double()
    loss = _loss(model, queries, weights)
    loss.backward()
    params = dict(model.named_parameters())
    checked = 0
    for name, param in params.items():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        direction = torch.randn_like(param, generator=torch.Generator().manual_seed(2))
        model.zero_grad()
        _loss(model, queries, weights).backward()
        analytic = float((param.grad * direction).sum())
        h = 1e-6
        with torch.no_grad():
            param += h * direction
            up = float(_loss(model, queries, weights))
            param -= 2 * h * direction
            down = float(_loss(model, queries, weights))
            param += h * direction
        numeric = (up - down) / (2 * h)
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-8), name
        assert abs(analytic) > 1e-8, name  # every knob moves the scores
        checked += 1
    assert checked == 4 + embedding_map


def test_surrogate_approaches_the_hard_rule(corpus):
    emb, graph, queries = corpus
    fixed = IsoRagConfig(prune_threshold=0.3, max_nodes=12)
    hard = LearnedIso(LearnedIsoConfig(fixed=fixed)).fit_graph(emb, graph)
    sharp = LearnedIso(LearnedIsoConfig(fixed=fixed, prune_temperature=1e-6)).fit_graph(emb, graph)
    a, ranked = hard.score(_queries(queries), hard=True)
    b, _ = sharp.score(_queries(queries))
    assert (a[ranked] - b[ranked]).abs().max() < 1e-6
    soft, _ = hard.score(_queries(queries))
    assert (a[ranked] - soft[ranked]).abs().max() > 1e-4  # the surrogate does differ


def test_a_corpus_retriever_in_the_registry(corpus, tmp_path):
    emb, graph, queries = corpus
    assert is_retriever("learned_iso") and is_retriever(LearnedIso)
    assert not is_retriever("learned_diffusion") and not is_retriever("learned_map")
    method = make_reranker("learned_iso")
    assert isinstance(method, LearnedIso) and not method.training
    with pytest.raises(ValueError, match="call fit"):
        method.retrieve(_queries(queries), top_k=3)
    with pytest.raises(ValueError, match="composed"):
        make_reranker("learned_iso+none")


def test_saved_weights_load_through_the_registry(corpus, tmp_path):
    emb, graph, queries = corpus
    model = make_method("learned_iso", {"embedding_map": True, "dim": D}).fit_graph(emb, graph)
    before = model.retrieve(_queries(queries), top_k=10)
    with torch.no_grad():
        for param in model.parameters():
            param += 0.3 * torch.randn_like(param)
    moved = model.retrieve(_queries(queries), top_k=10)  # the cached IsoRag is rebuilt
    assert not torch.equal(before.scores, moved.scores)
    path = tmp_path / "iso.pt"
    model.save(path)
    loaded = make_reranker("learned_iso", {"learned_iso": {"weights": str(path)}})
    assert loaded.knobs() == pytest.approx(model.knobs())
    again = loaded.fit_graph(emb, graph).retrieve(_queries(queries), top_k=10)
    assert torch.equal(again.keep, moved.keep) and torch.equal(again.scores, moved.scores)
    other = tmp_path / "diffusion.pt"
    make_method("learned_diffusion").save(other)
    with pytest.raises(ValueError, match="weights: .*learned_diffusion"):
        make_reranker("learned_iso", weights=str(other))
    path.write_bytes(path.read_bytes()[:-7] + b"garbage")
    with pytest.raises(ValueError, match="weights"):
        make_reranker("learned_iso", weights=str(path))


def test_bad_config():
    with pytest.raises(ValueError, match="lam"):
        LearnedIsoConfig(fixed=IsoRagConfig(lam=1.0))
    with pytest.raises(ValueError, match="damping"):
        LearnedIsoConfig(fixed=IsoRagConfig(damping=0.0))
    with pytest.raises(ValueError, match="prune_threshold"):
        LearnedIsoConfig(fixed=IsoRagConfig(prune_threshold=math.inf))
    with pytest.raises(ValueError, match="prune_temperature"):
        LearnedIsoConfig(prune_temperature=0.0)
    with pytest.raises(ValueError, match="max_nodes"):
        make_reranker("learned_iso", **{"fixed.num_sources": 5, "fixed.max_nodes": 4})


@pytest.mark.slow  # ~25 s: encodes the demo corpus and runs georag eval
def test_untrained_equals_iso_on_the_demo_corpus_and_through_georag_eval(
    tmp_path, embedding_cache_dir, monkeypatch
):
    from georag.cli import main
    from georag.data.bundled import DEMO_DIR
    from train.corpus_data import load_query_set

    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    data = load_query_set(str(DEMO_DIR), cache_dir=embedding_cache_dir)
    fixed = IsoRag().fit(data.corpus).retrieve(data.batch, top_k=20)
    learned = make_reranker("learned_iso").fit(data.corpus).retrieve(data.batch, top_k=20)
    assert torch.equal(fixed.keep, learned.keep)
    assert (fixed.scores[fixed.keep] - learned.scores[learned.keep]).abs().max() <= 1e-6

    path = tmp_path / "untrained.pt"
    make_method("learned_iso").save(path)
    out = tmp_path / "out"
    argv = ["eval", "--dataset", str(DEMO_DIR), "--top-m", "20", "--methods", "iso,learned_iso"]
    argv += ["--method-option", f"learned_iso.weights={path}", "--out", str(out)]
    assert main(argv) == 0
    rows = {r["method"]: r for r in json.loads((out / "results.json").read_text())}
    for metric in ("ndcg@10", "recall@10", "mrr@10"):
        assert rows["learned_iso"][metric] == rows["iso"][metric]


@pytest.mark.slow
def test_untrained_equals_iso_on_musique(data_dir, embedding_cache_dir):
    from train.corpus_data import load_query_set

    data = load_query_set("musique_qa100", data_dir=str(data_dir), cache_dir=embedding_cache_dir)
    corpus = Corpus(
        data.corpus.doc_ids, data.corpus.titles, data.corpus.texts, data.corpus.embeddings
    )
    fixed = IsoRag().fit(corpus).retrieve(data.batch, top_k=64)
    learned = make_reranker("learned_iso").fit(corpus).retrieve(data.batch, top_k=64)
    assert torch.equal(fixed.keep, learned.keep)
    assert (fixed.scores[fixed.keep] - learned.scores[learned.keep]).abs().max() <= 1e-6


def test_the_surrogate_never_hands_pagerank_subnormal_weights(corpus, monkeypatch):
    """A gate below the dtype's eps is 0: a float32 edge of weight < 1 scaled by exp(-87)
    (just above float32's tiny) is subnormal, and PageRank does not converge on a row of such
    weights (seen in training at t = 0.02)."""
    import georag.retrievers.iso as module  # where the shared ISO-RAG scores call PageRank

    emb, graph, queries = corpus
    emb, queries = emb.float(), queries.float()
    scores = IsoRag(IsoRagConfig(max_nodes=16)).fit_graph(emb, graph).trace(queries).scores
    t = 1e-3
    eta = float(scores.max()) - 87 * t  # that edge's gate: sigmoid(-87) ~ 1.6e-38
    assert eta > 0
    seen = []

    def checked(weights, personalization, **options):
        positive = weights[weights > 0]
        seen.append(int(positive.numel()))
        assert (positive >= torch.finfo(weights.dtype).tiny).all(), "subnormal weights"
        return personalized_pagerank(weights, personalization, **options)

    personalized_pagerank = module.personalized_pagerank
    monkeypatch.setattr(module, "personalized_pagerank", checked)
    model = LearnedIso(
        LearnedIsoConfig(fixed=IsoRagConfig(prune_threshold=eta, max_nodes=16), prune_temperature=t)
    ).fit_graph(emb, graph)
    out, ranked = model.score(_queries(queries))
    assert seen and torch.isfinite(out[ranked]).all()

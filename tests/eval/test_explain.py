"""georag.eval.explain on the bundled multi-hop corpus: the mass split it rests on, the
seeds, paths and pruning it reports, and the picture it draws."""

from __future__ import annotations

import pytest
import torch

from georag.batch import QueryBatch
from georag.data.bundled import DEMO_MULTIHOP_DIR
from georag.data.datasets import load_dataset
from georag.eval.demo import fitted_retriever, query_batch
from georag.eval.explain import explain, inflow_path
from georag.eval.explain_draw import draw_png, drawing, write_html


@pytest.fixture(scope="module")
def demo(embedding_cache_dir, text_encoder):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
        dataset = load_dataset(DEMO_MULTIHOP_DIR)
        fitted = {
            m: fitted_retriever(dataset, m, text_encoder) for m in ("hipporag2", "iso_entity")
        }
        yield dataset, text_encoder, fitted


def _query(demo, query_id):
    dataset, encoder, _ = demo
    return query_batch(dataset, query_id, encoder), set(dataset.qrels[query_id])


def test_ppr_mass_splits_into_teleport_and_inflows(demo):
    """x = (1 - d) r + d W^T D^-1 x holds at hipporag2's fixed point, so the inflows of a
    node and its teleport part add up to its mass."""
    retriever = demo[2]["hipporag2"]
    query, _ = _query(demo, "q13")
    reset = retriever.reset(query, retriever.dense_scores(query))[0].double()
    mass = retriever.ppr(reset[None])[0].double()
    weights = retriever.csr.to_dense().double()
    d = retriever.config.damping
    inflow = d * (mass / weights.sum(1))[:, None] * weights  # inflow[u, v]
    assert torch.allclose((1 - d) * reset / reset.sum() + inflow.sum(0), mass, atol=1e-9)


def test_inflow_path_follows_the_largest_inflow():
    """A chain 0 - 1 - 2 seeded at 0: node 2's mass comes from 1, and 1's from 0."""
    weights = torch.tensor([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=torch.float64)
    reset = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    from georag.geometry.diffusion import personalized_pagerank

    mass = personalized_pagerank(weights[None], reset[None], damping=0.5, tol=1e-12)[0]
    path, flows = inflow_path(weights.to_sparse_csr(), mass, reset, 0.5, 2)
    assert path == [0, 1, 2] and flows[1] == pytest.approx(1.0)
    assert 0 < flows[0] < 1  # 1 also receives mass back from 2


def test_hipporag2_reaches_the_bridge_passage_through_the_title(demo):
    retriever = demo[2]["hipporag2"]
    query, gold = _query(demo, "q13")
    result = explain(retriever, query, k=5, relevant=gold)
    phrases = [s for s in result.seeds if s.node.kind == "phrase"]
    assert [s.node.label for s in phrases] == ["the weaver s song"] and phrases[0].score == 1.0
    assert result.passage_seeds == 79 and 0 < result.passage_share < 1
    scores = retriever.scores(query)[0]
    assert [h.node.row for h in result.hits] == scores.topk(5).indices.tolist()
    first, bridge = result.hits[0], next(h for h in result.hits if h.node.doc_id == "p35")
    assert first.node.doc_id == "p13" and first.relevant and bridge.relevant
    labels = [n.label for n in bridge.path]
    assert labels == ["the weaver s song", "The Weaver's Song", "greta fallow", "Greta Fallow"]
    assert all(0 < f <= 1 for f in bridge.flows) and len(bridge.flows) == 3
    for hit in result.hits:
        assert hit.score == pytest.approx(hit.base + hit.graph)
    text = result.text()
    assert '"the weaver s song" -> p13 The Weaver\'s Song (' in text and "[gold]" in text


def test_iso_entity_reports_its_local_graph_and_pruning(demo):
    retriever = demo[2]["iso_entity"]
    query, gold = _query(demo, "q01")
    result = explain(retriever, query, k=5, relevant=gold)
    assert result.local_nodes > 0 and 0 < len(result.removed) <= result.local_edges
    for a, b in result.removed:  # ISO-RAG cuts passage-phrase edges here
        assert {a.kind, b.kind} == {"passage", "phrase"}
    scores = retriever.scores(query)[0]
    assert [h.node.row for h in result.hits] == scores.topk(5).indices.tolist()
    lam = retriever.config.iso.lam
    for hit in result.hits:  # the graph part is ISO-RAG's lam * PPR / max, in [0, lam]
        assert hit.score == pytest.approx(hit.base + hit.graph)
        assert -1e-9 <= hit.graph <= lam + 1e-9
    assert "pruning removed" in result.text()


def test_a_query_linked_to_nothing_is_the_dense_fallback(demo):
    retriever = demo[2]["hipporag2"]
    _, encoder, _ = demo
    text = "what is the weather like"
    query = QueryBatch(["x"], [text], encoder.encode([text]))
    result = explain(retriever, query, k=3)
    assert result.fallback and result.seeds == () and len(result.hits) == 3
    assert "dense score alone" in result.text()


def test_bad_input_is_one_line(demo):
    query, _ = _query(demo, "q01")
    with pytest.raises(ValueError, match="retriever: explain reads hipporag2 or iso_entity"):
        explain(object(), query)
    two = QueryBatch(["a", "b"], ["x", "y"], torch.cat([query.embeddings] * 2))
    with pytest.raises(ValueError, match="query: expected a QueryBatch of one query"):
        explain(demo[2]["hipporag2"], two)
    with pytest.raises(ValueError, match="k: need a positive integer"):
        explain(demo[2]["hipporag2"], query, k=0)
    with pytest.raises(ValueError, match="--query: no query 'q99'"):
        query_batch(demo[0], "q99", demo[1])


def test_the_picture_draws_seeds_paths_and_pruned_edges(demo, tmp_path):
    import matplotlib.image

    query, gold = _query(demo, "q13")
    result = explain(demo[2]["hipporag2"], query, relevant=gold)
    picture = drawing(result)
    keys = {n.key for n in picture.nodes}
    assert {f"row:{h.node.row}" for h in result.hits} <= keys
    bridge = picture.node(f"row:{next(h for h in result.hits if h.node.doc_id == 'p35').node.row}")
    seed = next(n for n in picture.nodes if n.label == '"the weaver s song"')
    assert bridge.role == "gold" and bridge.rank == 2 and bridge.x == 3 and seed.role == "seed"
    assert seed.x == 0 and any(e.kind == "path" and e.label.endswith("%") for e in picture.edges)
    png = draw_png(picture, tmp_path / "q13.png")
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 200 and image.shape[1] > 600
    assert float(image[..., :3].std()) > 0.05  # not blank
    iso = explain(demo[2]["iso_entity"], _query(demo, "q01")[0])
    pruned = drawing(iso)
    assert sum(e.kind == "pruned" for e in pruned.edges) == min(len(iso.removed), 12)
    page = write_html(pruned, iso.text(), tmp_path / "q01.html").read_text()
    assert page.count('<g class="node') == len(pruned.nodes) and "stroke-dasharray" in page
    assert "pruning removed" in page

"""The entity graph's settings and the retrievers' own settings: distinct names, one graph per
variant, the weights the docs give, title forms and the mass-share teleport."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from georag.rerank.registry import available_methods, make_reranker
from georag.retrieval.entity_graph import EntityGraphConfig
from georag.retrieval.extractors import mention_key, title_name, title_phrases
from georag.retrievers.entity import GRAPH_FIELDS, EntityGraphOptions, entity_graph_folder
from georag.retrievers.hipporag2 import hipporag2_reset
from tests.retrievers import entity_cases as cases

ENTITY_METHODS = [
    m for m in available_methods() if m in ("hipporag2", "iso_entity", "learned_hipporag2")
]


def test_a_retrievers_own_settings_never_name_a_graph_field():
    graph_names = {f.name for f in dataclasses.fields(EntityGraphConfig)}
    for cls in EntityGraphOptions.__subclasses__():
        own = {f.name for f in dataclasses.fields(cls)} - {"extractors", *GRAPH_FIELDS}
        assert not own & graph_names, (cls.__name__, own & graph_names)


@pytest.mark.parametrize("method", ENTITY_METHODS)
def test_passage_phrase_edges_weigh_one_in_every_retrievers_graph(method, monkeypatch):
    stand_in = type("Encoder", (), {"encode": staticmethod(cases.encode)})
    monkeypatch.setattr("georag.retrievers.entity._encoder", lambda model: stand_in)
    retriever = make_reranker(method).fit(cases.corpus())
    base = getattr(retriever, "base", retriever)  # the learned twin wraps the fixed method
    graph = base.graph
    assert graph.config.edge_weight == 1.0
    n = graph.num_passages
    dense = base.csr.to_dense()
    rows, cols = graph.contains
    assert torch.all(dense[rows, cols + n] == 1.0) and torch.all(dense[cols + n, rows] == 1.0)


def test_the_entity_methods_share_one_cached_graph(tmp_path):
    corpus = dataclasses.replace(cases.corpus(), cache_dir=tmp_path)
    folders = {
        entity_graph_folder(corpus, make_reranker(m).config) for m in ("hipporag2", "iso_entity")
    }
    assert len(folders) == 1


def test_title_forms_name_and_mention_titles():
    assert title_name("Henry King (director)") == "henry king director"
    assert title_name("Henry King (director)", "strip") == "henry king"
    assert title_name("Henry King (director)", "strip_apart") == "henry king (director)"
    assert mention_key("henry king (director)") == "henry king"
    assert title_name("(film)", "strip_apart") == "film"  # nothing left to strip to
    titles = ["Henry King (director)", "Henry King (footballer)", "Alpha", "The One"]
    texts = ["Born in Ohio.", "A striker.", "Alpha was directed by Henry King.", "x"]
    as_is = title_phrases(titles, texts)
    assert as_is[2] == {"alpha"}
    merged = title_phrases(titles, texts, form="strip")
    assert merged[2] == {"alpha", "henry king"} and merged[0] == {"henry king"}
    apart = title_phrases(titles, texts, form="strip_apart")
    assert apart[2] == {"alpha", "henry king (director)", "henry king (footballer)"}
    # stop-word titles and short titles are held by their own passage, never looked up
    assert "the one" not in set().union(*as_is[:3])
    short = title_phrases(titles, texts, form="strip", min_mention=20)
    assert short[2] == {"alpha"}


def test_queries_mention_titles_by_the_passages_rule():
    graph = cases.graph(synonym_threshold=None, min_mention=6)
    found = graph.mentions(["Paris or Bob Smith?"])
    phrases = list(graph.phrases)
    assert found[0, phrases.index("bob smith")] == 1
    assert found[0, phrases.index("paris")] == 0  # five alphanumerics, under the minimum


def test_the_share_teleport_gives_the_passages_their_share_of_the_mass():
    g = torch.Generator().manual_seed(0)
    dense = torch.rand(3, 6, generator=g, dtype=torch.float64)
    links = torch.rand(3, 4, generator=g, dtype=torch.float64)
    spec = torch.rand(4, generator=g, dtype=torch.float64)
    reset = hipporag2_reset(dense, links, spec, passage_node_weight=0.2, teleport="share")
    assert torch.allclose(reset[:, :6].sum(1), torch.full((3,), 0.2, dtype=torch.float64))
    assert torch.allclose(reset.sum(1), torch.ones(3, dtype=torch.float64))
    same = hipporag2_reset(dense, links, spec, passage_node_weight=0.2)
    assert torch.allclose(same[:, 6:], reset[:, 6:] * (links * spec).sum(1, keepdim=True) / 0.8)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"teleport": "uniform"}, "teleport"),
        ({"teleport": "share", "passage_node_weight": 1.5}, "passage_node_weight"),
        ({"title_form": "lower"}, "title_form"),
        ({"min_mention": -1}, "min_mention"),
        ({"hub_df": 0}, "hub_df"),
        ({"specificity_power": float("nan")}, "specificity_power"),
    ],
)
def test_bad_options_are_one_line(options, match):
    with pytest.raises(ValueError, match=match) as err:
        make_reranker("hipporag2", {"hipporag2": options})
    assert "\n" not in str(err.value)

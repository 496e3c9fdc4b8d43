"""The bundled multi-hop corpus: its shape, and that every question's two gold passages are
linked by a title."""

from __future__ import annotations

import pytest

from georag.data.bundled import DEMO_MULTIHOP_DIR
from georag.data.datasets import load_dataset
from georag.retrieval.extractors import normalise


def test_every_question_needs_two_passages_joined_by_a_title():
    dataset = load_dataset(DEMO_MULTIHOP_DIR)
    assert len(dataset.corpus) == 80 and len(dataset.queries) == 26
    titles = [doc.title for doc in dataset.corpus.values()]
    assert len(set(map(normalise, titles))) == 80  # one passage per entity
    for query_id, text in dataset.queries.items():
        gold = sorted(dataset.qrels[query_id])
        assert len(gold) == 2, query_id
        a, b = (dataset.corpus[g] for g in gold)
        mentions = [normalise(x.title) in normalise(y.text) for x, y in ((a, b), (b, a))]
        question = normalise(text)
        asked = [normalise(t) for t in titles if normalise(t) in question]
        # one gold passage is what the question names (or names what it names) ...
        named = [
            any(t == normalise(x.title) or t in normalise(x.text) for t in asked) for x in (a, b)
        ]
        assert any(named), query_id
        # ... and the other is reached through a title
        assert any(mentions) or all(named), query_id


@pytest.mark.slow
def test_the_demo_prints_both_tables_and_the_explained_question(
    tmp_path, embedding_cache_dir, monkeypatch, capsys
):
    from georag.cli import main

    monkeypatch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
    assert main(["demo", "--methods", "none", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for method in ("dense", "bm25", "hybrid", "hipporag2", "iso_entity"):
        assert f"| {method} |" in out
    assert "Why hipporag2 ranks" in out and "[gold]" in out
    assert (tmp_path / "multihop" / "explain.png").stat().st_size > 10_000

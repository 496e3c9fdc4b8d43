"""The text-level API: georag.Reranker against the CandidateBatch path on real scifact texts."""

from __future__ import annotations

import pytest
import torch

import georag
from georag.batch import CandidateBatch
from georag.rerank.registry import make_reranker


@pytest.fixture(scope="module")
def encoder(text_encoder):
    return text_encoder  # the session's encoder (tests/conftest.py)


@pytest.fixture(scope="module")
def scifact_case(data_dir):
    """A real claim, its cited abstract and nine more scifact abstracts."""
    from georag.data.beir import load_beir

    data = load_beir("scifact", data_dir=data_dir, download=False)
    qid = next(iter(data.qrels))
    cited = list(data.qrels[qid])[:1]
    others = [d for d in list(data.corpus)[:20] if d not in cited][:9]
    docs = [{"id": d, "text": data.corpus[d].full_text} for d in cited + others]
    return data, qid, docs


@pytest.fixture(scope="module")
def native_batch(encoder, scifact_case):
    """The CandidateBatch path, built by hand: dense cosine first-stage scores."""
    data, qid, docs = scifact_case
    query = data.queries[qid]
    q = encoder.encode([query])
    c = encoder.encode([d["text"] for d in docs])
    return CandidateBatch(
        query=q,
        cands=c.unsqueeze(0),
        scores=(c @ q[0]).unsqueeze(0),
        mask=torch.ones(1, len(docs), dtype=torch.bool),
        query_ids=["q"],
        doc_ids=[[d["id"] for d in docs]],
        query_texts=[query],
        cand_texts=[[d["text"] for d in docs]],
    )


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("api-cache")


def _native(spec, batch, docs, options):
    result = make_reranker(spec, options)(batch)
    order = torch.argsort(result.scores[0], descending=True, stable=True).tolist()
    return [docs[i]["id"] for i in order], result


@pytest.mark.data
@pytest.mark.parametrize(
    "spec",
    [
        "maniscope",
        "ricci+bi",
        pytest.param("diffusion", marks=pytest.mark.slow),
        pytest.param("ricci", marks=pytest.mark.slow),
    ],
)
def test_rank_equals_the_candidate_batch_path(spec, encoder, scifact_case, native_batch, cache_dir):
    data, qid, docs = scifact_case
    options = {"bi": {"model": "all-MiniLM-L6-v2", "cache_dir": str(cache_dir)}}
    # one on-disk cache for every spec: the first test encodes, the later ones read it
    reranker = georag.Reranker(spec, encoder=encoder, options=options, cache_dir=cache_dir)
    ranked = reranker.rank(data.queries[qid], docs)
    if spec != "maniscope":
        assert reranker.cache.misses == 0
    expected, result = _native(spec, native_batch, docs, options)
    assert [r.id for r in ranked] == expected
    assert [r.rank for r in ranked] == list(range(len(docs)))
    kept = dict(zip([d["id"] for d in docs], result.keep[0].tolist()))
    assert all(r.kept == kept[r.id] for r in ranked)
    assert all((r.score == float("-inf")) != r.kept for r in ranked)
    assert sorted(r.index for r in ranked) == list(range(len(docs)))
    assert reranker.rank(data.queries[qid], docs, top_k=3) == ranked[:3]


@pytest.mark.data
def test_strings_batches_and_the_content_hash_cache(encoder, scifact_case):
    data, qid, docs = scifact_case
    reranker = georag.Reranker("maniscope", encoder=encoder)
    texts = [d["text"] for d in docs]
    ranked = reranker.rank(data.queries[qid], texts)
    assert {r.id for r in ranked} == {str(i) for i in range(len(texts))}
    misses = reranker.cache.misses
    queries = [data.queries[q] for q in list(data.qrels)[:3]]
    lists = [texts, texts[:6], texts[3:]]
    batched = reranker.rank_batch(queries, lists)
    assert reranker.cache.misses == misses + 2  # only the two new queries were encoded
    for query, docs_list, got in zip(queries, lists, batched):
        assert [r.id for r in got] == [r.id for r in reranker.rank(query, docs_list)]
    given = [{"id": str(i), "text": t, "score": float(-i)} for i, t in enumerate(texts)]
    assert reranker.rank(data.queries[qid], given)[0].id == "0"  # anchor = best given score


def test_bad_input_is_one_line_naming_the_argument(encoder):
    reranker = georag.Reranker("maniscope", encoder=encoder)
    cases = [
        (("q", []), "docs: empty"),
        (("q", [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]), "docs\\[1\\]: duplicate id"),
        (("q", [{"id": "a", "text": "x"}, {"id": "b"}]), "docs\\[1\\]: no 'text'"),
        (("q", [{"id": "a", "text": "x"}, 5]), "docs\\[1\\]"),
        (("", ["x"]), "queries\\[0\\]"),
        (("q", "x"), "docs: expected a list"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=message) as info:
            reranker.rank(*args)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="top_k"):
        reranker.rank("q", ["x"], top_k=0)
    with pytest.raises(ValueError, match="docs_lists: 1 lists for 2 queries"):
        reranker.rank_batch(["a", "b"], [["x"]])
    with pytest.raises(ValueError, match="docs_lists\\[1\\]: empty"):
        reranker.rank_batch(["a", "b"], [["x"], []])
    with pytest.raises(ValueError, match="method"):
        georag.Reranker("nosuch", encoder=encoder)

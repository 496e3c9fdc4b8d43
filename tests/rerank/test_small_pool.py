"""Few documents: every pool method answers a query of 1, 2 or 3 documents by its stated
rule (georag.rerank.small_pool), alone and inside a batch with a wider query alike."""

from __future__ import annotations

import json
import math
from unittest import mock

import pytest
import torch

import georag
from georag.data.bundled import DEMO_DIR
from georag.rerank.small_pool import small_pool
from georag.rerank.text.bi_encoder import _parts_installed

METHODS = ["none", "diffusion", "maniscope", "ricci", "learned_diffusion", "learned_maniscope"]
METHODS += ["learned_ricci", "learned_map", "hyte_rescore"]
MPNET = _parts_installed()


@pytest.fixture(scope="module")
def encoder(text_encoder):
    return text_encoder  # the session's encoder (tests/conftest.py)


@pytest.fixture(scope="module")
def demo():
    """A query of the bundled demo corpus and its eight documents, real texts."""
    lines = (DEMO_DIR / "corpus.jsonl").read_text().splitlines()
    docs = [json.loads(line)["text"] for line in lines[:8]]
    query = json.loads((DEMO_DIR / "queries.jsonl").read_text().splitlines()[0])["text"]
    return query, docs


def _check(method, encoder, demo):
    query, docs = demo
    reranker = georag.Reranker(method, encoder=encoder)
    rule = small_pool(reranker.stage)
    first = georag.Reranker("none", encoder=encoder)
    for n in (1, 2, 3):
        alone = reranker.rank(query, docs[:n])
        assert sorted(d.index for d in alone) == list(range(n))
        assert all(d.fallback == (n < rule.fewest) for d in alone)
        if n < rule.fewest:  # the first-stage order, its scores, everything kept
            assert alone == [
                georag.api.RankedDoc(**{**vars(d), "fallback": True})
                for d in first.rank(query, docs[:n])
            ]
        assert all(math.isfinite(d.score) == d.kept for d in alone)
        # the same answer when the query shares a batch with a wider one
        batched = reranker.rank_batch([query, query], [docs[:n], docs])[0]
        assert [d.index for d in batched] == [d.index for d in alone]
        assert [d.kept for d in batched] == [d.kept for d in alone]
        assert [d.fallback for d in batched] == [d.fallback for d in alone]
        for a, b in zip(alone, batched):
            assert b.score == pytest.approx(a.score, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_answers_one_two_and_three_documents(method, encoder, demo):
    _check(method, encoder, demo)


@pytest.mark.slow
@pytest.mark.skipif(not MPNET, reason="the mpnet extra is not installed")
def test_ricci_then_bi_answers_few_documents(encoder, demo):
    _check("ricci+bi", encoder, demo)


def test_maniscope_caps_k_at_the_documents_less_one(encoder, demo):
    query, docs = demo
    default = georag.Reranker("maniscope", encoder=encoder)  # k = 5
    for n in (2, 3):
        capped = georag.Reranker("maniscope", options={"maniscope": {"k": n - 1}}, encoder=encoder)
        got, want = default.rank(query, docs[:n]), capped.rank(query, docs[:n])
        assert [d.index for d in got] == [d.index for d in want]
        assert [d.score for d in got] == pytest.approx([d.score for d in want], abs=1e-6)


def test_the_rule_pads_and_falls_back_per_method():
    build = georag.make_reranker
    assert small_pool(build("maniscope", k=7)).slots == 8
    assert small_pool(build("maniscope")).fewest == 2
    assert small_pool(build("ricci")).fewest == 2
    assert small_pool(build("none")).fewest == 1
    pipeline = small_pool(build("ricci+diffusion"))
    assert (pipeline.slots, pipeline.fewest) == (2, 2)


def test_rows_without_documents_keep_nothing(encoder, demo):
    from georag.rerank.small_pool import rerank_small_pools

    query, docs = demo
    reranker = georag.Reranker("maniscope", encoder=encoder)
    batch, _ = reranker.batch([query, query], [docs[:3], docs[:1]])
    batch = batch.restrict(torch.tensor([[True] * 3, [False] * 3]))
    result, fallback = rerank_small_pools(reranker.stage, batch)
    assert fallback.tolist() == [False, True]
    assert not result.keep[1].any()


def test_missing_models_fail_at_once_naming_the_fix(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with mock.patch("georag.rerank.text.bi_encoder._parts_installed", return_value=False):
        with pytest.raises(OSError, match=r"install the extra 'mpnet'"):
            georag.make_reranker("ricci+bi")
    with pytest.raises(OSError, match=r"HF_HUB_OFFLINE is set; give ce.model=PATH"):
        georag.make_reranker("ce", model="cross-encoder/not-cached-here")
    with pytest.raises(OSError, match=r"not in the Hugging Face cache"):
        georag.TextEncoder("nobody/no-such-model", show_progress=False)

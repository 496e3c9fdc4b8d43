import math

import pytest
import torch

from georag.batch import CandidateBatch, RerankResult
from georag.rerank.base import IdentityReranker, PoolReranker
from georag.rerank.pipeline import RerankPipeline
from georag.rerank.pool import top_k_mask
from georag.rerank.registry import available_methods, make_reranker


def make_batch(b=2, m=4, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(b, m, dtype=torch.bool)
    mask[-1, -1] = False
    return CandidateBatch(
        query=torch.randn(b, d, generator=g),
        cands=torch.randn(b, m, d, generator=g),
        scores=torch.tensor([[4.0, 3.0, 2.0, 1.0]] * b),
        mask=mask,
        query_ids=[f"q{i}" for i in range(b)],
        doc_ids=[[f"d{j}" if mask[i, j] else "" for j in range(m)] for i in range(b)],
    )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"query": torch.zeros(2, 3, 1)}, r"query must have shape \(B, D\)"),
        ({"cands": torch.zeros(2, 4, 5)}, r"does not match query shape"),
        ({"scores": torch.zeros(2, 5)}, r"scores must have shape \(2, 4\)"),
        ({"mask": torch.ones(2, 4)}, r"mask must be a bool tensor"),
        ({"query_ids": ["q0"]}, r"query_ids must have 2 entries"),
        ({"doc_ids": [["a"] * 4, ["b"] * 3]}, r"doc_ids must be a 2 x 4"),
        ({"query": torch.full((2, 3), float("nan"))}, r"query holds 6 non-finite"),
    ],
)
def test_candidate_batch_validation(change, message):
    fields = make_batch().__dict__ | change
    with pytest.raises(ValueError, match=message):
        CandidateBatch(**fields)


def test_padding_may_hold_garbage():
    fields = make_batch().__dict__
    cands = fields["cands"].clone()
    cands[1, 3] = float("nan")  # masked slot
    CandidateBatch(**fields | {"cands": cands})


@pytest.mark.parametrize(
    "values, bad",
    [
        ([math.inf], 1),
        ([math.nan], 1),
        ([math.inf, -math.inf], 2),  # sums to nan
        ([3e38, 3e38], 0),  # finite terms whose sum overflows: no error
        ([-3e38, -3e38, math.nan], 1),
    ],
)
def test_finiteness_is_exact_past_the_one_pass_check(values, bad):
    fields = make_batch(d=3).__dict__
    cands = fields["cands"].clone()
    cands[0, 1, : len(values)] = torch.tensor(values)
    if bad:
        with pytest.raises(ValueError, match=rf"cands holds {bad} non-finite"):
            CandidateBatch(**fields | {"cands": cands})
    else:
        CandidateBatch(**fields | {"cands": cands})


def test_identity_and_run():
    batch = make_batch()
    result = IdentityReranker()(batch)
    assert isinstance(IdentityReranker(), PoolReranker)
    assert torch.equal(result.keep, batch.mask)
    assert result.scores[1, 3] == -math.inf
    run = result.to_run(batch)
    assert list(run["q0"]) == ["d0", "d1", "d2", "d3"]
    assert list(run["q1"]) == ["d0", "d1", "d2"]
    assert list(result.to_run(batch, top_k=2)["q0"]) == ["d0", "d1"]


def test_run_keeps_best_chunk_per_document():
    batch = make_batch()
    batch = CandidateBatch(
        **batch.__dict__ | {"doc_ids": [["a", "b", "a", "c"], ["x", "x", "y", ""]]}
    )
    run = IdentityReranker()(batch).to_run(batch)
    assert list(run["q0"]) == ["a", "b", "c"] and run["q0"]["a"] == pytest.approx(4.0)
    assert list(run["q1"]) == ["x", "y"]


class DropSecond:
    """A filter that drops candidate 1 and reverses the order of the rest."""

    name = "drop"

    def __call__(self, batch):
        keep = batch.mask.clone()
        keep[:, 1] = False
        return RerankResult.from_scores(-batch.scores, keep)


def test_pipeline_second_stage_sees_only_kept():
    seen = []

    class Recorder:
        name = "rec"

        def __call__(self, batch):
            seen.append(batch.mask.clone())
            return IdentityReranker()(batch)

    batch = make_batch()
    result = RerankPipeline([DropSecond(), Recorder()], top_k=2)(batch)
    assert not seen[0][:, 1].any()
    assert result.keep.sum(1).tolist() == [2, 2]
    assert list(result.to_run(batch)["q0"]) == ["d0", "d2"]
    assert batch.mask[:, 1].all()  # the input was not mutated


def test_top_k_mask_respects_keep():
    scores = torch.tensor([[3.0, 2.0, 1.0]])
    keep = torch.tensor([[False, True, True]])
    assert top_k_mask(scores, keep, 1).tolist() == [[False, True, False]]
    with pytest.raises(ValueError, match="top_k"):
        top_k_mask(scores, keep, 0)


def test_registry():
    assert "none" in available_methods()
    assert isinstance(make_reranker("none").stage, IdentityReranker)
    assert make_reranker("none+none").name == "none+none"
    with pytest.raises(ValueError, match="unknown method 'bogus'"):
        make_reranker("bogus")
    with pytest.raises(ValueError, match="malformed"):
        make_reranker("none+")


def test_derived_batches_equal_checked_ones_and_skip_the_checks(monkeypatch):
    batch = make_batch(b=3)
    calls = []
    check = CandidateBatch.__post_init__
    monkeypatch.setattr(
        CandidateBatch, "__post_init__", lambda self: calls.append(1) or check(self)
    )
    keep = torch.tensor([[True, False, True, True]] * 3)
    derived = [batch.slice(1, 3), batch.restrict(keep), batch.to("cpu")]
    assert calls == []  # validated once, when the batch was built
    rebuilt = [
        CandidateBatch(
            query=batch.query[1:3],
            cands=batch.cands[1:3],
            scores=batch.scores[1:3],
            mask=batch.mask[1:3],
            query_ids=batch.query_ids[1:3],
            doc_ids=batch.doc_ids[1:3],
        ),
        CandidateBatch(**(batch.__dict__ | {"mask": batch.mask & keep})),
        CandidateBatch(**batch.__dict__),
    ]
    for got, want in zip(derived, rebuilt, strict=True):
        assert type(got) is CandidateBatch and got.query_ids == want.query_ids
        assert got.doc_ids == want.doc_ids and got.cand_texts == want.cand_texts
        for name in ("query", "cands", "scores", "mask"):
            assert torch.equal(getattr(got, name), getattr(want, name))
    with pytest.raises(ValueError, match="keep must be a bool tensor of shape"):
        batch.restrict(keep[:2])

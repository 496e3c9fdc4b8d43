import pytest
import torch

from georag.data.beir import BeirDataset, load_beir
from georag.data.bundled import DEMO_DIR
from georag.eval.metrics import evaluate
from georag.rerank.base import IdentityReranker
from georag.retrieval.candidates import FirstStage, FirstStageConfig
from georag.retrieval.encoder import TextEncoder


@pytest.fixture(scope="module")
def demo():
    return load_beir(DEMO_DIR)


@pytest.fixture(scope="module")
def encoder():
    return TextEncoder(device="cpu", show_progress=False)


def test_demo_corpus_is_consistent(demo):
    assert 200 <= len(demo.corpus) <= 400 and 20 <= len(demo.queries) <= 40
    assert all(2 <= len(judged) <= 6 for judged in demo.qrels.values())


def test_second_build_hits_cache_and_encodes_nothing(demo, encoder, tmp_path, monkeypatch):
    small = BeirDataset("small", dict(list(demo.corpus.items())[:20]), demo.queries, demo.qrels)
    first = FirstStage(small, encoder=encoder, cache_dir=tmp_path)
    assert not first.cache_hit
    calls = []
    monkeypatch.setattr(encoder, "encode", lambda texts, **kw: calls.append(len(texts)))
    second = FirstStage(small, encoder=encoder, cache_dir=tmp_path)
    assert second.cache_hit and calls == []
    assert torch.equal(first.embeddings, second.embeddings)


@pytest.mark.parametrize("first_stage", ["dense", "bm25", "hybrid"])
def test_first_stages_return_valid_batches(demo, encoder, embedding_cache_dir, first_stage):
    stage = FirstStage(
        demo,
        FirstStageConfig(first_stage=first_stage, top_m=10),
        encoder=encoder,
        cache_dir=embedding_cache_dir / "embeddings",
    )
    ids = list(demo.queries)
    batch = stage.retrieve(ids, [demo.queries[q] for q in ids], with_texts=True)
    assert batch.cands.shape == (len(ids), 10, 384)
    row = stage.units.doc_ids.index(batch.doc_ids[0][0])
    torch.testing.assert_close(batch.cands[0, 0], stage.embeddings[row])
    assert batch.cand_texts[0][0] == stage.units.texts[row]
    scores = evaluate(IdentityReranker()(batch).to_run(batch), demo.qrels, ["ndcg@10"])
    assert scores["ndcg@10"] > 0.5  # a working retriever on an easy hand-judged corpus


def test_chunked_units_map_back_to_documents(demo, encoder, tmp_path):
    small = BeirDataset("small", dict(list(demo.corpus.items())[:30]), demo.queries, demo.qrels)
    config = FirstStageConfig(top_m=20, chunk_window=12, chunk_overlap=4)
    stage = FirstStage(small, config, encoder=encoder, cache_dir=tmp_path)
    assert len(stage.units) > len(small.corpus)
    ids = list(demo.queries)[:3]
    batch = stage.retrieve(ids, [demo.queries[q] for q in ids])
    run = IdentityReranker()(batch).to_run(batch)
    assert all(set(docs) <= set(small.corpus) for docs in run.values())
    assert all(len(docs) == len(set(docs)) for docs in run.values())


def test_bad_config():
    with pytest.raises(ValueError, match="first_stage must be one of"):
        FirstStageConfig(first_stage="sparse")
    with pytest.raises(ValueError, match="top_m must be at least 2"):
        FirstStageConfig(top_m=1)


def test_retrieval_pipeline_end_to_end(demo, encoder, embedding_cache_dir):
    """First stage, then filters and a reranker composed with a final top-k."""
    from georag.batch import RerankResult
    from georag.rerank.pipeline import RerankPipeline

    class KeepEven:
        name = "even"

        def __call__(self, batch):
            keep = batch.mask.clone()
            keep[:, 1::2] = False
            return RerankResult.from_scores(batch.scores, keep)

    stage = FirstStage(
        demo,
        FirstStageConfig(top_m=10),
        encoder=encoder,
        cache_dir=embedding_cache_dir / "embeddings",
    )
    ids = list(demo.queries)[:4]
    texts = [demo.queries[q] for q in ids]
    batch = stage.retrieve(ids, texts, with_texts=True)
    result = RerankPipeline([KeepEven(), IdentityReranker()], top_k=3)(batch)
    assert result.keep.sum(1).tolist() == [3] * 4
    assert not result.keep[:, 1::2].any()
    run = RerankPipeline([KeepEven()], top_k=3)(batch).to_run(batch)
    assert [list(run[q]) for q in ids] == [
        [batch.doc_ids[i][j] for j in (0, 2, 4)] for i in range(4)
    ]

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

from georag.batch import CandidateBatch
from georag.rerank.text.cross_encoder import CrossEncoderConfig, CrossEncoderReranker
from georag.resources import resolve_model_path
from georag.retrieval.backends import calibration_texts


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A tiny random BERT cross-encoder saved to disk, with MiniLM's tokenizer."""
    folder = tmp_path_factory.mktemp("tiny-ce")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizerFast.from_pretrained(resolve_model_path("all-MiniLM-L6-v2")).save_pretrained(
        folder
    )
    return folder


def make_batch():
    mask = torch.tensor([[True, True, True], [True, True, False]])
    texts = [["cats purr", "dogs bark", "fish swim"], ["red", "blue", ""]]
    return CandidateBatch(
        query=torch.zeros(2, 2),
        cands=torch.zeros(2, 3, 2),
        scores=torch.zeros(2, 3),
        mask=mask,
        query_ids=["a", "b"],
        doc_ids=[["1", "2", "3"], ["4", "5", ""]],
        query_texts=["what purrs", "a colour"],
        cand_texts=texts,
    )


def test_scores_equal_direct_model_calls(tiny_model_dir):
    reranker = CrossEncoderReranker(
        CrossEncoderConfig(model=str(tiny_model_dir), batch_size=2), device="cpu"
    )
    batch = make_batch()
    result = reranker(batch)
    assert torch.equal(result.keep, batch.mask)
    assert result.scores[1, 2] == float("-inf")
    model, tok = reranker.model, reranker.tokenizer
    with torch.no_grad():
        direct = model(**tok(["what purrs"], ["dogs bark"], return_tensors="pt")).logits[0, 0]
    torch.testing.assert_close(result.scores[0, 1], direct, atol=1e-5, rtol=1e-5)


def test_needs_texts(tiny_model_dir):
    reranker = CrossEncoderReranker(CrossEncoderConfig(model=str(tiny_model_dir)), device="cpu")
    batch = CandidateBatch(**make_batch().__dict__ | {"cand_texts": None})
    with pytest.raises(ValueError, match="needs query_texts and cand_texts"):
        reranker(batch)


def test_scores_through_onnx_equal_torch(tiny_model_dir, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("GEORAG_CACHE", str(tmp_path))
    queries, passages = ["what purrs", "a colour", "x"], ["cats purr", "blue", "y " * 40]
    scores = {}
    for backend in ("torch", "onnx"):
        config = CrossEncoderConfig(model=str(tiny_model_dir), encoder_backend=backend)
        scores[backend] = CrossEncoderReranker(config, device="cpu")._score_pairs(queries, passages)
    torch.testing.assert_close(scores["onnx"], scores["torch"], atol=1e-5, rtol=1e-4)
    assert list((tmp_path / "encoders").glob("*/*/onnx/model.onnx"))


def test_int8_is_calibrated_on_query_passage_pairs(tiny_model_dir, tmp_path, monkeypatch):
    pytest.importorskip("openvino")
    pytest.importorskip("nncf")
    monkeypatch.setenv("GEORAG_CACHE", str(tmp_path))
    config = CrossEncoderConfig(model=str(tiny_model_dir), encoder_backend="openvino-int8")
    reranker = CrossEncoderReranker(config, device="cpu")
    pairs = reranker._calibration()
    assert len(pairs) == len(calibration_texts()[1])
    assert all(p["input_ids"].shape[0] == 1 for p in pairs)
    assert (pairs[0]["token_type_ids"] == 1).any()  # a query and a passage
    scores = reranker._score_pairs(["what purrs", "a colour"], ["cats purr", "blue"])
    assert scores.shape == (2,) and torch.isfinite(scores).all()

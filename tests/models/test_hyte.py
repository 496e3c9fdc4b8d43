"""HyTE-H projection and encoder over the all-MiniLM-L6-v2 word embeddings."""

from __future__ import annotations

import shutil

import pytest
import torch

from georag.geometry.hyperbolic import lorentz_inner, oem_pool
from georag.models.hyte import HyTEEncoder, HyTEProjection, load_word_embeddings
from georag.resources import resolve_model_path

TEXTS = [
    "Hyperbolic geometry embeds trees with low distortion.",
    "BM25 retrieves an initial candidate set.",
    "0-dimensional biomaterials show inductive properties.",
]


@pytest.fixture(scope="module")
def encoder() -> HyTEEncoder:
    return HyTEEncoder.from_pretrained("all-MiniLM-L6-v2")


def test_word_embeddings_are_the_checkpoints_rows_at_unit_norm():
    from transformers import AutoModel

    emb = load_word_embeddings("all-MiniLM-L6-v2")
    assert emb.shape == (30522, 384) and emb.dtype == torch.float32
    torch.testing.assert_close(emb.norm(dim=1), torch.ones(30522))
    ref = AutoModel.from_pretrained(resolve_model_path("all-MiniLM-L6-v2"))
    ref = ref.get_input_embeddings().weight.detach()
    torch.testing.assert_close(emb, ref / ref.norm(dim=1, keepdim=True))


def test_bad_model_path(tmp_path):
    with pytest.raises(ValueError, match="model_path"):
        load_word_embeddings(tmp_path / "missing")
    with pytest.raises(ValueError, match="no model.safetensors"):
        load_word_embeddings(tmp_path)


def test_encode_matches_differentiable_oem_path(encoder):
    points = encoder.encode(TEXTS)
    assert points.shape == (3, 385) and points.dtype == torch.float32
    input_ids, mask = encoder.pad(encoder.tokenize(TEXTS))
    with torch.no_grad():
        reference = oem_pool(encoder.projection.token_points(input_ids), mask, power=1.0)
        forward = encoder.projection(input_ids, mask)
    torch.testing.assert_close(points, reference, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(forward, reference, rtol=1e-5, atol=1e-6)
    # on the hyperboloid of K = 1 within 1e-5 in float32
    assert (lorentz_inner(points, points) + 1.0).abs().max() < 1e-5
    # batching does not change results; encode is deterministic
    one_by_one = torch.cat([encoder.encode([text]) for text in TEXTS])
    torch.testing.assert_close(one_by_one, points, rtol=1e-5, atol=1e-6)


def test_tokenize_drops_special_tokens_and_rejects_empty(encoder):
    ids = encoder.tokenize(["[CLS] hello [SEP]"])
    assert encoder.tokenizer.convert_ids_to_tokens(ids[0].tolist()) == ["hello"]
    with pytest.raises(ValueError, match=r"texts\[1, 2\] have no token"):
        encoder.encode(["fine", "", "\u2603\u2603 \U0001f642"])
    with pytest.raises(ValueError, match="list of str"):
        encoder.encode("a single string")
    assert encoder.encode([]).shape == (0, 385)


def test_gradients_reach_only_the_projection(encoder):
    proj = HyTEProjection(encoder.projection.embeddings, learn_curvature=True, seed=3)
    input_ids, mask = encoder.pad(encoder.tokenize(TEXTS))
    points = proj(input_ids, mask)
    loss = lorentz_inner(points[0], points[1]) - lorentz_inner(points[0], points[2])
    loss.backward()
    assert not proj.embeddings.requires_grad
    for param in (proj.w1.weight, proj.w2.weight, proj.log_k):
        assert param.grad is not None and torch.isfinite(param.grad).all()
        assert param.grad.abs().sum() > 0
    assert {name for name, _ in proj.named_parameters()} == {"w1.weight", "w2.weight", "log_k"}
    assert set(proj.state_dict()) == {"w1.weight", "w2.weight", "log_k"}


def test_vocab_table_follows_in_place_updates(encoder):
    enc = HyTEEncoder(
        HyTEProjection(encoder.projection.embeddings, seed=1),
        encoder.tokenizer,
        model_path="all-MiniLM-L6-v2",
    )
    before = enc.encode(TEXTS[:1])
    with torch.no_grad():
        enc.projection.w2.weight.mul_(3.0)  # what an optimizer step does
    after = enc.encode(TEXTS[:1])
    assert after[0, 0] > before[0, 0] + 1e-3
    assert enc.projection.fingerprint() != encoder.projection.fingerprint()


def test_save_load_round_trip_and_seeded_init(encoder, tmp_path):
    again = HyTEEncoder(
        HyTEProjection(encoder.projection.embeddings, seed=0),
        encoder.tokenizer,
        model_path="all-MiniLM-L6-v2",
    )
    assert again.projection.fingerprint() == encoder.projection.fingerprint()
    path = tmp_path / "proj.pt"
    encoder.save(path)
    loaded = HyTEEncoder.from_pretrained("all-MiniLM-L6-v2", weights=path, seed=123)
    assert loaded.projection.fingerprint() == encoder.projection.fingerprint()
    torch.testing.assert_close(loaded.encode(TEXTS), encoder.encode(TEXTS))
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt: no georag manifest"):
        HyTEEncoder.from_pretrained(weights=tmp_path / "junk.pt")
    torch.save({"format": "other"}, tmp_path / "other.pt")  # a foreign torch file
    with pytest.raises(ValueError, match="other.pt: no georag manifest"):
        HyTEEncoder.from_pretrained(weights=tmp_path / "other.pt")


def test_any_bert_checkpoint_folder(encoder, tmp_path):
    from transformers import BertConfig, BertModel

    folder = tmp_path / "tiny-bert"
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    source = resolve_model_path("all-MiniLM-L6-v2")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(f"{source}/{name}", folder / name)
    tiny = HyTEEncoder.from_pretrained(folder, hidden=16)
    points = tiny.encode(TEXTS)
    assert points.shape == (3, 33) and tiny.dim == 32
    assert (lorentz_inner(points, points) + 1.0).abs().max() < 1e-5
    # a pytorch_model.bin checkpoint works too
    state = {"bert.embeddings.word_embeddings.weight": torch.randn(30522, 32)}
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    assert HyTEEncoder.from_pretrained(folder).dim == 32
    # weights trained for 384-dim embeddings do not fit a 32-dim checkpoint
    encoder.save(tmp_path / "proj.pt")
    with pytest.raises(ValueError, match="expects 384-dim embeddings"):
        HyTEEncoder.from_pretrained(folder, weights=tmp_path / "proj.pt")


def test_float64_projection(encoder):
    proj = HyTEProjection(encoder.projection.embeddings.double(), seed=0).double()
    enc64 = HyTEEncoder(proj, encoder.tokenizer, model_path="all-MiniLM-L6-v2")
    points = enc64.encode(TEXTS)
    assert points.dtype == torch.float64
    assert (lorentz_inner(points, points) + 1.0).abs().max() < 1e-12
    torch.testing.assert_close(points.float(), encoder.encode(TEXTS), rtol=1e-5, atol=1e-6)


def test_state_key_tracks_in_place_updates_and_works_under_inference_mode(encoder):
    key = encoder.state_key()
    assert encoder.state_key() == key
    with torch.no_grad():
        encoder.projection.w1.weight.add_(0.0)  # an in-place step bumps the version
    assert encoder.state_key() != key
    with torch.inference_mode():  # parameters built here keep no version counter
        frozen = HyTEEncoder.from_pretrained("all-MiniLM-L6-v2")
        points = frozen.encode(TEXTS)
    assert frozen.state_key() == frozen.state_key()
    torch.testing.assert_close(points, encoder.encode(TEXTS))

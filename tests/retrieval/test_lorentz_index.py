"""The persistent Lorentz index: round trip, append, atomic writes, rejection of bad files."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from georag.geometry.hyperbolic import lorentz_inner
from georag.models.hyte import HyTEEncoder, HyTEProjection
from georag.rerank.geometric.hyte import HyTEConfig
from georag.retrieval import lorentz_index as li
from georag.retrieval.bm25 import BM25Index
from georag.retrieval.lorentz_index import IndexFormatError, LorentzIndex, build_lorentz_index

DOCS = {
    "notes/hyperbolic.txt": "Hyperbolic space embeds trees and taxonomies with low distortion. "
    * 40,
    "notes/bm25.txt": "BM25 ranks documents by term frequency and inverse document frequency.",
    "notes/pets.txt": "Cats and dogs are popular pets; dogs need walks and cats need naps.",
    "notes/edge.txt": "Edge devices run retrieval locally with a small memory footprint.",
    "notes/physics.txt": "The Lorentz group preserves the Minkowski inner product of spacetime.",
}
QUERIES = ["dogs and cats", "tree embeddings in hyperbolic space", "Minkowski spacetime"]
# the search defaults stored with these indexes: the method's
SEARCH = {key: getattr(HyTEConfig(), key) for key in ("alpha", "top_m", "offset")}


@pytest.fixture(scope="module")
def encoder() -> HyTEEncoder:
    return HyTEEncoder.from_pretrained("all-MiniLM-L6-v2")


@pytest.fixture()
def index(encoder, tmp_path) -> LorentzIndex:
    return build_lorentz_index(
        DOCS, tmp_path / "idx", encoder=encoder, **SEARCH, window=120, overlap=20
    )


def test_round_trip(index, encoder):
    loaded = LorentzIndex.load(index.path)
    assert isinstance(loaded._matrix, np.memmap)
    assert len(loaded) == len(index) == 8  # 360 words in windows of 120/20 make 4 chunks
    assert loaded.sources == list(DOCS)
    assert loaded.chunk_ids[:4] == [f"notes/hyperbolic.txt#{i}" for i in range(4)]
    assert loaded.doc_ids[4:] == list(DOCS)[1:]
    torch.testing.assert_close(loaded.points, encoder.encode(loaded.texts), rtol=0, atol=0)
    assert loaded.texts[4] == DOCS["notes/bm25.txt"]
    assert " ".join(loaded.texts[0].split()[-20:]) == " ".join(loaded.texts[1].split()[:20])
    assert loaded.dim == 385 and loaded.points.dtype == torch.float32
    assert (lorentz_inner(loaded.points, loaded.points) + 1).abs().max() < 1e-5
    for alpha in (0.0, 0.5, 1.0):
        a, b = index.search(QUERIES, 4, alpha=alpha), loaded.search(QUERIES, 4, alpha=alpha)
        torch.testing.assert_close(a, b)


def test_search_is_the_hybrid_formula(index):
    bm25, cand = index.bm25.search(QUERIES, 50)
    assert cand.shape == (3, 8)  # top-M is capped by the number of chunks
    q = index.encoder.encode(QUERIES)
    inner = lorentz_inner(index.points[cand], q.unsqueeze(1))
    for alpha in (0.0, 0.3, 1.0):
        expected = alpha * bm25 / bm25.max(1, keepdim=True).values
        expected = expected + (1 - alpha) * torch.sigmoid(inner + 2.0)
        scores, idx = index.search(QUERIES, 8, alpha=alpha)
        torch.testing.assert_close(scores, expected.sort(dim=1, descending=True).values)
        column = (cand.unsqueeze(1) == idx.unsqueeze(2)).int().argmax(2)  # where idx sits
        torch.testing.assert_close(expected.gather(1, column), scores)
        assert all(len(set(row)) == 8 for row in idx.tolist())
    # alpha = 1 keeps the BM25 order; the top hit of "dogs and cats" is the pets note
    _, idx = index.search(QUERIES, 1, alpha=1.0)
    assert torch.equal(idx, cand[:, :1])
    assert index.doc_ids[idx[0, 0]] == "notes/pets.txt"
    # top_m restricts the candidate set: k is capped at top_m
    scores, idx = index.search(QUERIES, 5, top_m=2)
    assert idx.shape == (3, 2) and set(idx[0].tolist()) <= set(cand[0, :2].tolist())


def test_search_defaults_are_stored_with_the_index(encoder, tmp_path):
    """alpha, top_m and offset given at build time are what a loaded index searches with;
    out-of-range ones are refused before anything is written."""
    built = build_lorentz_index(
        DOCS, tmp_path / "idx", encoder=encoder, alpha=0.3, top_m=2, offset=1.0, window=120
    )
    loaded = LorentzIndex.load(built.path)
    assert (loaded.alpha, loaded.top_m, loaded.offset) == (0.3, 2, 1.0)
    bm25, cand = loaded.bm25.search(QUERIES, 2)
    inner = lorentz_inner(loaded.points[cand], loaded.encoder.encode(QUERIES).unsqueeze(1))
    expected = 0.3 * bm25 / bm25.max(1, keepdim=True).values + 0.7 * torch.sigmoid(inner + 1.0)
    scores, _ = loaded.search(QUERIES, 5)
    torch.testing.assert_close(scores, expected.sort(dim=1, descending=True).values)
    target = tmp_path / "never"
    for bad, match in (({"alpha": 1.5}, "alpha must be in"), ({"top_m": 0}, "top_m must be")):
        with pytest.raises(ValueError, match=match):
            build_lorentz_index(DOCS, target, encoder=encoder, **{**SEARCH, **bad})
    assert not target.exists()


def test_append(index, encoder):
    before = index.search(QUERIES, 3, alpha=0.0)
    grown = index.add({"notes/birds.txt": "Parrots and canaries are pets that sing."})
    assert len(grown) == 9 and grown.sources[-1] == "notes/birds.txt"
    torch.testing.assert_close(grown.points[:8], index.points)
    torch.testing.assert_close(
        grown.points[8:], encoder.encode(["Parrots and canaries are pets that sing."])
    )
    _, idx = grown.search(["parrots canaries"], 1)
    assert grown.doc_ids[idx[0, 0]] == "notes/birds.txt"
    reloaded = LorentzIndex.load(index.path)
    assert reloaded.chunk_ids == grown.chunk_ids and reloaded.bm25.num_docs == 9
    # the folder was replaced whole: its files and nothing else, no temporary beside it
    names = sorted(p.name for p in index.path.iterdir())
    assert names == FILES, names
    assert [p.name for p in index.path.parent.iterdir()] == [index.path.name]
    assert before[1].max() < 8
    with pytest.raises(ValueError, match="already indexed"):
        grown.add({"notes/pets.txt": "again"})
    with pytest.raises(ValueError, match="empty document"):
        grown.add({"notes/blank.txt": "   "})
    assert len(LorentzIndex.load(index.path)) == 9


def test_crash_during_append_leaves_old_index(index, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(li.BM25Index, "save", boom)  # half way through the new folder
    with pytest.raises(RuntimeError, match="disk full"):
        index.add({"notes/new.txt": "a new note"})
    monkeypatch.undo()
    survivor = LorentzIndex.load(index.path)
    assert len(survivor) == 8
    assert [p.name for p in index.path.parent.iterdir()] == [index.path.name]  # no temporary
    survivor.add({"notes/new.txt": "a new note"})
    assert len(LorentzIndex.load(index.path)) == 9


def _corrupt(path, offset=-5):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


FILES = ["bm25", "chunks.json", "manifest.json", "points.bin", "projection.pt", "sources.txt"]
FILES = sorted([*FILES, "texts.z"])


@pytest.mark.parametrize(
    "victim",
    ["points.bin", "texts.z", "chunks.json", "sources.txt", "projection.pt", "bm25/manifest.json"],
)
def test_corrupt_files_are_rejected(index, victim):
    _corrupt(index.path / victim)
    with pytest.raises(IndexFormatError, match=f"{victim}: checksum mismatch"):
        LorentzIndex.load(index.path)
    with pytest.raises(TypeError):  # the check cannot be skipped
        LorentzIndex.load(index.path, verify=False)


def test_truncated_and_foreign_files(index, tmp_path):
    idx_file = index.path / "points.bin"
    full = idx_file.read_bytes()
    idx_file.write_bytes(full[:-100])
    with pytest.raises(IndexFormatError, match="truncated"):
        LorentzIndex.load(index.path)
    # same size but a foreign header
    idx_file.write_bytes(b"NOTGEORA" + full[8:])
    with pytest.raises(IndexFormatError, match="points.bin: checksum mismatch"):
        LorentzIndex.load(index.path)
    idx_file.write_bytes(full)
    (index.path / "texts.z").unlink()
    with pytest.raises(IndexFormatError, match="texts.z: missing"):
        LorentzIndex.load(index.path)
    with pytest.raises(IndexFormatError, match="no manifest.json"):
        LorentzIndex.load(tmp_path / "nowhere")
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(IndexFormatError, match="format .something-else., expected"):
        LorentzIndex.load(other)
    (other / "manifest.json").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(IndexFormatError, match="unreadable manifest"):
        LorentzIndex.load(other)


def test_mismatched_encoder(index, encoder):
    small = HyTEProjection(torch.nn.functional.normalize(torch.randn(30522, 16), dim=1))
    tiny = HyTEEncoder(small, encoder.tokenizer, model_path="tiny")
    with pytest.raises(ValueError, match="mismatched dims"):
        LorentzIndex.load(index.path, encoder=tiny)
    other = HyTEEncoder(
        HyTEProjection(encoder.projection.embeddings, seed=7),
        encoder.tokenizer,
        model_path="all-MiniLM-L6-v2",
    )
    with pytest.raises(ValueError, match="is not the one the index"):
        LorentzIndex.load(index.path, encoder=other)


def test_bad_documents_and_queries(index, encoder, tmp_path):
    target = tmp_path / "never"
    with pytest.raises(ValueError, match="1 empty document"):
        build_lorentz_index({"a": "fine text", "b": "  \n "}, target, encoder=encoder, **SEARCH)
    with pytest.raises(ValueError, match="nothing to index"):
        build_lorentz_index({}, target, encoder=encoder, **SEARCH)
    with pytest.raises(ValueError, match="no token in the vocabulary"):
        build_lorentz_index({"a": "fine", "b": "\u2603\u2603"}, target, encoder=encoder, **SEARCH)
    assert not target.exists()
    with pytest.raises(ValueError, match=r"texts\[1\] have no token"):
        index.search(["dogs", "\U0001f642 \u2603"], 3)
    with pytest.raises(ValueError, match="alpha must be in"):
        index.search(["dogs"], 3, alpha=1.5)
    with pytest.raises(ValueError, match="list of str"):
        index.search("dogs", 3)
    # plain text lists get numbered sources; a rebuild in place replaces the old index
    rebuilt = build_lorentz_index(["one text", "two texts"], index.path, encoder=encoder, **SEARCH)
    assert rebuilt.sources == ["0", "1"] and len(LorentzIndex.load(index.path)) == 2


def test_stored_projection_is_used_without_an_encoder(index, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(index.path, copy)
    loaded = LorentzIndex.load(copy)
    assert loaded._encoder is None
    torch.testing.assert_close(loaded.search(QUERIES, 3), index.search(QUERIES, 3))
    assert isinstance(loaded.bm25, BM25Index) and loaded.bm25.tokenizer == "whitespace"

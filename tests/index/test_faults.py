"""A corpus index under faults: damaged parts fail in one line naming the file or field; a
writer killed (SIGKILL) at any step of an update leaves an index that loads and answers as
before (or, past the commit point, as after)."""

from __future__ import annotations

import json

import pytest

import georag
from georag._io import dump_manifest
from georag.retrieval.generations import current_generation
from tests.index.conftest import QUERIES


def _error(root) -> str:
    from georag.retrievers.index import CorpusIndex

    with pytest.raises(ValueError) as err:
        CorpusIndex.open(root)
    assert "\n" not in str(err.value)
    return str(err.value)


def _edit_manifest(root, **fields):
    path = current_generation(root) / "manifest.json"
    manifest = json.loads(path.read_bytes())
    manifest.update(fields)
    path.write_bytes(dump_manifest(manifest))


def test_corrupt_truncated_and_missing_parts(index_copy):
    generation = current_generation(index_copy)
    data = bytearray((generation / "embeddings.npy").read_bytes())
    data[-3] ^= 0xFF
    (generation / "embeddings.npy").write_bytes(bytes(data))
    assert "embeddings.npy: checksum mismatch" in _error(index_copy)
    (generation / "embeddings.npy").write_bytes(bytes(data[:-10]))
    assert "embeddings.npy" in _error(index_copy) and "truncated" in _error(index_copy)
    (generation / "docs.json").unlink()
    assert "docs.json: missing" in _error(index_copy)
    (index_copy / "CURRENT").write_text("gen-999999\n")
    assert "CURRENT: names 'gen-999999'" in _error(index_copy)
    (index_copy / "CURRENT").unlink()
    assert "not a georag index (CURRENT missing)" in _error(index_copy)


def test_newer_version_and_other_encoder(index_copy, encoder):
    from georag.retrievers.index import CorpusIndex

    _edit_manifest(index_copy, max_seq_length=128)
    with pytest.raises(ValueError, match="max_seq_length is 128, the encoder's is 256"):
        CorpusIndex.open(index_copy).check_encoder(encoder)
    with pytest.raises(ValueError, match="max_seq_length is 128"):
        georag.Retriever(index_copy, "dense")
    _edit_manifest(index_copy, version=2)
    assert "format version 2, this georag reads up to 1" in _error(index_copy)


@pytest.mark.parametrize(
    "step",
    [
        "parts",
        *(pytest.param(s, marks=pytest.mark.slow) for s in ("locked", "encoded", "staged")),
        pytest.param("switched", marks=pytest.mark.slow),
    ],
)
def test_kill_during_update(index_copy, step):
    from georag.experiments.index_bench import kill_during_update

    docs = [{"id": f"k{i}", "title": "Tides", "text": f"Tides and the Moon {i}."} for i in range(3)]
    [found] = kill_during_update(index_copy, docs, QUERIES, steps=(step,)).values()
    assert found["killed"] and found["loads"] and found["mismatches"] == 0, found
    assert found["committed"] == (step == "switched")
    assert found["max_score_gap"] <= 1e-5
    georag.Retriever(index_copy, "dense").add(docs[:1])  # the next writer clears up
    left = sorted(p.name for p in index_copy.iterdir())
    assert left == [".lock", "CURRENT", current_generation(index_copy).name], left

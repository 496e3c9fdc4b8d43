import pytest
import torch

from georag.retrieval.dense import DenseIndex


def unit(n, d, seed=0):
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed))
    return torch.nn.functional.normalize(x, dim=1)


def test_flat_is_exact():
    docs, queries = unit(200, 16), unit(7, 16, seed=1)
    index = DenseIndex(16)
    index.add(docs)
    scores, indices = index.search(queries, 5)
    expected_scores, expected = (queries @ docs.T).topk(5, dim=1)
    assert torch.equal(indices, expected)
    torch.testing.assert_close(scores, expected_scores, atol=1e-5, rtol=0)


def test_ivf_probing_every_list_is_exact():
    docs, queries = unit(400, 8), unit(5, 8, seed=2)
    index = DenseIndex(8, kind="ivf", nlist=16, nprobe=16)
    index.add(docs)
    _, indices = index.search(queries, 10)
    assert torch.equal(indices, (queries @ docs.T).topk(10, dim=1).indices)


def test_save_load_round_trip(tmp_path):
    docs, queries = unit(300, 8), unit(4, 8, seed=3)
    for kind in ("flat", "ivf"):
        index = DenseIndex(8, kind=kind, nlist=8, nprobe=3)
        index.add(docs)
        index.save(tmp_path / f"{kind}.faiss")
        loaded = DenseIndex.load(tmp_path / f"{kind}.faiss")
        assert (loaded.kind, loaded.size, loaded.dim) == (kind, 300, 8)
        assert torch.equal(loaded.search(queries, 7)[1], index.search(queries, 7)[1])


def test_bad_inputs(tmp_path):
    index = DenseIndex(8)
    with pytest.raises(ValueError, match="empty"):
        index.search(unit(1, 8), 3)
    with pytest.raises(ValueError, match="embeddings has dimension 4"):
        index.add(unit(3, 4))
    with pytest.raises(ValueError, match="NaN"):
        index.add(torch.full((2, 8), float("nan")))
    with pytest.raises(ValueError, match="nlist=64"):
        DenseIndex(8, kind="ivf", nlist=64).add(unit(10, 8))
    (tmp_path / "junk.faiss").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="junk.faiss: no georag manifest"):
        DenseIndex.load(tmp_path / "junk.faiss")
    from georag._io import seal
    from georag.retrieval.dense import FORMAT

    (tmp_path / "sealed.faiss").write_bytes(seal(b"garbage", format=FORMAT, version=1))
    with pytest.raises(ValueError, match="not a readable faiss index"):
        DenseIndex.load(tmp_path / "sealed.faiss")


def test_k_larger_than_corpus():
    index = DenseIndex(8)
    index.add(unit(3, 8))
    scores, indices = index.search(unit(2, 8), 10)
    assert indices.shape == (2, 3)

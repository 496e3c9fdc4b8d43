import pytest
import torch

from georag.retrieval.hybrid import fuse


def test_rrf_by_hand():
    dense = (torch.tensor([[0.9, 0.8, 0.1]]), torch.tensor([[0, 1, 2]]))
    lexical = (torch.tensor([[5.0, 3.0, -1.0]]), torch.tensor([[2, 0, -1]]))
    scores, indices = fuse(dense, lexical, num_docs=4, top_m=4, method="rrf", rrf_k=60)
    expected = {0: 1 / 61 + 1 / 62, 1: 1 / 62, 2: 1 / 63 + 1 / 61}
    assert indices[0, :3].tolist() == sorted(expected, key=lambda d: -expected[d])
    assert scores[0, :3].tolist() == pytest.approx(sorted(expected.values(), reverse=True))
    assert indices[0, 3].item() == -1  # doc 3 was never retrieved


def test_linear_by_hand():
    dense = (torch.tensor([[1.0, 0.5, 0.0]]), torch.tensor([[0, 1, 2]]))
    lexical = (torch.tensor([[10.0, 0.0]]), torch.tensor([[2, 1]]))
    scores, indices = fuse(dense, lexical, num_docs=3, top_m=3, method="linear", alpha=0.25)
    expected = {0: 0.25 * 1.0, 1: 0.25 * 0.5, 2: 0.75 * 1.0}
    got = dict(zip(indices[0].tolist(), scores[0].tolist()))
    assert got == pytest.approx(expected)


def test_bad_arguments():
    pair = (torch.zeros(1, 1), torch.zeros(1, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="method"):
        fuse(pair, pair, num_docs=1, top_m=1, method="max")
    with pytest.raises(ValueError, match="alpha"):
        fuse(pair, pair, num_docs=1, top_m=1, method="linear", alpha=2.0)

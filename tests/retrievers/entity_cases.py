"""A tiny multi-hop corpus and a deterministic stand-in encoder for the entity-graph tests."""

from __future__ import annotations

import hashlib

import torch

from georag.batch import Corpus, QueryBatch
from georag.retrieval.entity_graph import EntityGraphConfig, build_entity_graph

DIM = 64

TITLES = [
    "Alpha Film",
    "Bob Smith",
    "Paris",
    "Gamma Song",
    "Carol Jones",
    "Delta River",
    "Echo Lake",
]
TEXTS = [
    "Alpha Film is a 1999 drama directed by Bob Smith and shot in Paris.",
    "Bob Smith is a director born in Lyon who studied in Paris.",
    "Paris is the capital of France and lies on the Seine.",
    "Gamma Song is a ballad written by Carol Jones in 1975.",
    "Carol Jones is a singer born in Dublin.",
    "Delta River flows into Echo Lake through a narrow valley.",
    "Echo Lake is a lake in the mountains with no town nearby.",
]
QUERIES = [
    "Where was the director of Alpha Film born?",
    "Where was the writer of Gamma Song born?",
    "Which lake does Delta River flow into?",
]


def encode(texts: list[str]) -> torch.Tensor:
    """Unit-norm bags of hashed character trigrams (the same text, the same bits)."""
    out = torch.zeros(len(texts), DIM, dtype=torch.float32)
    for row, text in enumerate(texts):
        padded = f"  {text.lower()}  "
        for i in range(len(padded) - 2):
            digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest()
            out[row, int.from_bytes(digest, "little") % DIM] += 1.0
    return out / out.norm(dim=1, keepdim=True).clamp_min(1e-12)


def corpus() -> Corpus:
    ids = [f"d{i}" for i in range(len(TITLES))]
    joined = [f"{t} {x}" for t, x in zip(TITLES, TEXTS)]
    return Corpus(ids, list(TITLES), list(TEXTS), encode(joined).double())


def queries() -> QueryBatch:
    return QueryBatch(
        [f"q{i}" for i in range(len(QUERIES))], list(QUERIES), encode(QUERIES).double()
    )


def graph(**options):
    c = corpus()
    config = EntityGraphConfig(**{"extractors": ("title",), **options})
    return build_entity_graph(c.doc_ids, c.titles, c.texts, config=config, encode=encode)


def check_knob_gradients(learned, knobs, *, seed: int = 0) -> None:
    """Every knob's gradient of ``sum(scores * upstream)`` against central finite
    differences of its raw parameter (the toy corpus, float64)."""
    import pytest

    learned.train()
    q = queries()
    upstream = torch.randn(3, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))

    def loss() -> torch.Tensor:
        scores, _ = learned.score(q)
        return (scores * upstream).sum()

    loss().backward()
    for name in knobs:
        raw = getattr(learned, name).raw
        step = 1e-3
        with torch.no_grad():
            raw += step
            up = float(loss())
            raw -= 2 * step
            down = float(loss())
            raw += step
        assert float(raw.grad) == pytest.approx((up - down) / (2 * step), rel=2e-3, abs=1e-6), name

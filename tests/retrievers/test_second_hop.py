"""The second hop: linked passage pairs against a reference loop, and its wiring in
hipporag2."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.rerank.registry import make_reranker
from georag.retrievers.hipporag2 import title_homes
from georag.retrievers.second_hop import pair_scores, passage_links
from tests.retrievers import entity_cases as cases


def reference(scores: torch.Tensor, links: torch.Tensor, beam: int, bonus: float) -> torch.Tensor:
    """The module docstring's formula, one query, passage and partner at a time."""
    dense_links = links.to_dense()
    b, n = scores.shape
    out = torch.empty_like(scores)
    for q in range(b):
        s = scores[q]
        s = (s - s.min()) / (s.max() - s.min()).clamp_min(torch.finfo(s.dtype).tiny)
        top = s.topk(min(beam, n)).indices.tolist()
        for p in range(n):
            near = range(n) if p in top else top
            partners = [s[r] + bonus * dense_links[r, p] for r in near if r != p]
            unlinked = max(s[r] for r in range(n) if r != p)
            out[q, p] = s[p] + max([unlinked, *partners])
    return out


def random_links(n: int, density: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    upper = torch.triu((torch.rand(n, n, generator=g) < density).double(), diagonal=1)
    return (upper + upper.T).to_sparse_csr()


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 12),
    b=st.integers(1, 4),
    beam=st.integers(1, 14),
    bonus=st.floats(0.0, 3.0),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 10_000),
    ties=st.booleans(),
)
def test_pair_scores_equal_the_reference_loop(n, b, beam, bonus, density, seed, ties):
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(b, n, generator=g, dtype=torch.float64)
    if ties:  # equal scores and a constant row
        scores = scores.round(decimals=1)
        scores[0] = 0.5
    links = random_links(n, density, seed)
    got = pair_scores(scores, links, beam=beam, bonus=bonus)
    want = reference(scores, links, beam, bonus)
    if ties:  # topk may pick another of equal scores; the best pair's value is the same
        assert torch.allclose(got.amax(1), want.amax(1), atol=1e-12)
    else:
        assert torch.allclose(got, want, atol=1e-12)


def test_without_links_the_best_pair_is_the_first_stages_top_two():
    scores = torch.tensor([[0.1, 0.9, 0.5, 0.7]], dtype=torch.float64)
    empty = torch.zeros(4, 4, dtype=torch.float64).to_sparse_csr()
    out = pair_scores(scores, empty, beam=2, bonus=1.0)
    assert out[0].argsort(descending=True)[:2].tolist() == [1, 3]


def test_a_link_lifts_the_partner_of_the_top_passage():
    scores = torch.tensor([[1.0, 0.0, 0.6, 0.8]], dtype=torch.float64)
    link = torch.zeros(4, 4, dtype=torch.float64)
    link[0, 2] = link[2, 0] = 1.0
    out = pair_scores(scores, link.to_sparse_csr(), beam=1, bonus=0.5)
    assert sorted(out[0].argsort(descending=True)[:2].tolist()) == [0, 2]
    assert torch.allclose(out[0, [0, 2]], torch.tensor([2.1, 2.1], dtype=torch.float64))


def test_title_links_join_a_passage_to_the_titles_it_mentions():
    graph = cases.graph(synonym_threshold=None)
    links = passage_links(graph, title_homes(graph), kind="title", max_df=None).to_dense()
    assert torch.equal(links, links.T) and not links.diagonal().any()
    titles = list(cases.TITLES)
    film, person, city = (titles.index(t) for t in ("Alpha Film", "Bob Smith", "Paris"))
    assert links[film, person] == 1 and links[film, city] == 1
    assert links[titles.index("Gamma Song"), person] == 0
    # "paris" is held by three passages: a cap of 2 removes its links
    capped = passage_links(graph, title_homes(graph), kind="title", max_df=2).to_dense()
    assert capped[film, city] == 0 and capped[film, person] == 1
    shared = passage_links(graph, None, kind="shared", max_df=None).to_dense()
    assert shared[person, film] == 1 and shared[titles.index("Bob Smith"), city] == 1


def test_hipporag2_ranks_the_best_linked_pair_first():
    corpus, queries = cases.corpus(), cases.queries()
    off = make_reranker("hipporag2", {"hipporag2": {"synonym_threshold": None}})
    on = make_reranker(
        "hipporag2",
        {"hipporag2": {"synonym_threshold": None, "second_hop": "pairs", "hop_bonus": 0.5}},
    )
    off.fit(corpus), on.fit(corpus)
    first = off.scores(queries)
    want = pair_scores(first, on.passage_links, beam=on.config.hop_beam, bonus=0.5)
    assert torch.allclose(on.scores(queries), want)
    assert torch.allclose(on.first_hop(queries), first)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"second_hop": "beam"}, "second_hop"),
        ({"hop_links": "any"}, "hop_links"),
        ({"hop_beam": 0}, "hop_beam"),
        ({"hop_bonus": -1.0}, "hop_bonus"),
        ({"hop_max_df": 0}, "hop_max_df"),
    ],
)
def test_bad_second_hop_options_are_one_line(options, match):
    with pytest.raises(ValueError, match=match) as err:
        make_reranker("hipporag2", {"hipporag2": options})
    assert "\n" not in str(err.value)

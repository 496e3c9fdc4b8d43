"""A query-aware second hop over the entity-passage graph: linked pairs of passages, each
scored by the query's relevance to both and the link between them, without a language model.

Personalized PageRank spreads the mass of a first passage to every title it mentions, and
nothing asks which of them the question needs ("where was *the director* of X born?"). Here
a passage's final score is the best score of a pair it belongs to:

.. math::

    \\text{final}_p = s_p + \\max\\big(\\max_{q \\ne p} s_q,\\;
    \\max_{q \\ne p,\\ p \\text{ or } q \\in \\text{beam}}
    (s_q + \\beta\\, \\text{link}(p, q))\\big),

with ``s`` the first stage's score of each passage min-max normalized per query (its graph
score fused with dense and BM25: the query's relevance), the beam the first stage's ``beam``
best passages, and ``link(p, q)`` 1 when the two passages are joined through the graph (0
otherwise). The two passages of the best pair rank first, then the members of the next
pairs; without a link the best pair is the first stage's top two, so ``bonus`` is how much
first-stage score a link is worth. Among the neighbours of a first passage, the query's
relevance to each (its ``s``) picks the one the question needs.

Two kinds of links (:func:`passage_links`): ``"title"``, a passage holds the title of the
other (a passage-title-passage path whose middle node is the other passage's own title: the
bridge of a 2WikiMultihopQA or HotpotQA question), and ``"shared"``, the two passages hold a
common phrase. Phrases that more than ``max_df`` passages hold link nothing (hubs).

It follows the beam search over reasoning chains of PropRAG ("PropRAG: Guiding Retrieval
with Beam Search over Proposition Paths", a chain scored by the query's relevance to its
steps), the passage-to-passage hops of HopRAG ("HopRAG: Multi-Hop Reasoning for
Logic-Aware Retrieval-Augmented Generation") and the fusion of graph and first-stage
ranks of SPRIG's GraphRRF; it departs from them in having no language model anywhere (the
links are title mentions, not LLM-written propositions or pseudo-queries), in chains of two
passages only, and in scoring a pair by the sum of its members' first-stage scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from georag.retrieval.entity_graph import EntityGraph

__all__ = ["LINKS", "pair_scores", "passage_links"]

LINKS = ("title", "shared")


def passage_links(
    graph: EntityGraph, homes: Sequence[int] | None, *, kind: str, max_df: int | None
) -> torch.Tensor:
    """The passage-to-passage links of ``graph``, a symmetric sparse CSR (N, N) of ones
    with an empty diagonal.

    Parameters
    ----------
    graph : EntityGraph
    homes : sequence of int, length P, or None
        The passage whose own title each phrase is (-1 for none); needed by ``"title"``.
    kind : {"title", "shared"}
        ``"title"``: p holds phrase j and q is j's home; ``"shared"``: p and q hold j.
    max_df : int or None
        Phrases held by more passages link nothing (None: every phrase links).

    Returns
    -------
    torch.Tensor, sparse CSR (N, N), float32
    """
    if kind not in LINKS:
        raise ValueError(f"hop_links: need one of {LINKS}, got {kind!r}")
    n, p = graph.num_passages, len(graph.phrases)
    rows, cols = graph.contains[0].numpy(), graph.contains[1].numpy()
    df = np.bincount(cols, minlength=p)
    keep = np.ones(len(rows), dtype=bool) if max_df is None else df[cols] <= max_df
    rows, cols = rows[keep], cols[keep]
    if kind == "title":
        if homes is None:
            raise ValueError("homes: the title links need each phrase's home passage")
        home = np.asarray(homes, dtype=np.int64)[cols]
        held = home >= 0
        pairs = sp.coo_matrix((np.ones(int(held.sum())), (rows[held], home[held])), shape=(n, n))
        links = pairs + pairs.T
    else:
        holds = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, p))
        links = holds @ holds.T
    links = sp.csr_matrix(links)
    links.setdiag(0)
    links.eliminate_zeros()
    links.data[:] = 1.0
    links.sort_indices()
    return torch.sparse_csr_tensor(
        torch.from_numpy(links.indptr.astype(np.int64)),
        torch.from_numpy(links.indices.astype(np.int64)),
        torch.from_numpy(links.data.astype(np.float32)),
        (n, n),
    )


def pair_scores(
    scores: torch.Tensor, links: torch.Tensor, *, beam: int, bonus: float
) -> torch.Tensor:
    """Every passage's best pair score (module docstring), batched over queries.

    Parameters
    ----------
    scores : torch.Tensor, shape (B, N)
        The first stage's scores (min-max normalized here, per row).
    links : torch.Tensor, sparse CSR (N, N)
        :func:`passage_links`.
    beam : int
        First passages of a pair: the ``beam`` best by ``scores``.
    bonus : float
        A link's worth, in min-max normalized score.

    Returns
    -------
    torch.Tensor, shape (B, N)
        ``s_p + max(max over q != p of s_q, max over q != p with p or q in the beam of
        (s_q + bonus * link(p, q)))``.
    """
    if beam < 1 or not bonus >= 0:
        raise ValueError(f"need beam >= 1 and bonus >= 0, got {beam}, {bonus}")
    b, n = scores.shape
    if n < 2:
        return scores
    low = scores.amin(dim=1, keepdim=True)
    span = (scores.amax(dim=1, keepdim=True) - low).clamp_min(torch.finfo(scores.dtype).tiny)
    s = (scores - low) / span
    top = s.topk(max(min(beam, n), 2), dim=1)
    # the best partner without a link: the top passage, or the second for the top one
    other = top.values[:, :1].expand(b, n).clone()
    other.scatter_(1, top.indices[:, :1], top.values[:, 1:2])
    top = s.topk(min(beam, n), dim=1)
    crow, col = links.crow_indices(), links.col_indices()
    first = top.indices.flatten()
    degree = crow[first + 1] - crow[first]
    owner = torch.repeat_interleave(torch.arange(first.numel()), degree)
    start = torch.repeat_interleave(crow[first] - torch.cumsum(degree, 0) + degree, degree)
    neighbour = col[start + torch.arange(int(degree.sum()))]
    query = owner // top.indices.shape[1]
    linked = torch.full((b * n,), -torch.inf, dtype=s.dtype)
    # a pair of a beam member and its neighbour scores for both of them
    linked.scatter_reduce_(0, query * n + neighbour, top.values.flatten()[owner] + bonus, "amax")
    partner = s.flatten()[query * n + neighbour] + bonus
    linked.scatter_reduce_(0, query * n + first[owner], partner, "amax")
    return s + torch.maximum(other, linked.view(b, n))

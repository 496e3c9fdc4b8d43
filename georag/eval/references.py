"""Per-query networkx pipelines of the diffusion and Maniscope seeds: the peers that the
tests check the batched rerankers against and that the benchmarks time beside them.

Each takes one query's pool as :func:`georag.eval.synthetic.top_pool` returns it (slots
by decreasing first-stage score, unit-normalized embeddings) and builds its graph itself.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

__all__ = ["networkx_diffusion", "networkx_maniscope"]


def networkx_diffusion(
    emb: np.ndarray, scores: np.ndarray, *, damping: float = 0.85, top_k: int = 20
) -> dict[int, float]:
    """Diffusion-aided RAG's reranker for one query: complete graph, pagerank, top-K.

    Parameters
    ----------
    emb : numpy.ndarray, shape (P, D)
        Unit-normalized candidate embeddings.
    scores : numpy.ndarray, shape (P,)
        First-stage scores (the teleport vector, shifted to be non-negative).

    Returns
    -------
    dict
        ``{pool position: PageRank score}`` of the ``top_k`` best.
    """
    n = len(emb)
    if n == 0:
        return {}
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    sims = emb @ emb.T
    for i in range(n):
        for j in range(i + 1, n):
            w = max(float(sims[i, j]), 0.0)
            if w > 0:
                graph.add_edge(i, j, weight=w)
    p = scores - min(0.0, scores.min())
    if p.sum() == 0:
        p = np.ones_like(p)
    ranks = nx.pagerank(graph, alpha=damping, personalization=dict(enumerate(p)), weight="weight")
    best = sorted(range(n), key=lambda i: -ranks[i])[:top_k]
    return {i: ranks[i] for i in best}


def networkx_maniscope(
    query: np.ndarray, emb: np.ndarray, *, k: int = 5, alpha: float = 0.5
) -> np.ndarray:
    """Maniscope (the paper's recipe) for one query: k-NN graph, Dijkstra from the top-1 candidate.

    Parameters
    ----------
    query : numpy.ndarray, shape (D,)
    emb : numpy.ndarray, shape (P, D)
        Unit-normalized candidate embeddings, best first-stage score first (the anchor).

    Returns
    -------
    numpy.ndarray, shape (P,)
        ``alpha * cos(q, c) + (1 - alpha) / (1 + d)``, with ``1 / (1 + d) = 0`` where the
        anchor cannot be reached.
    """
    n = len(emb)
    if n == 0:
        return np.zeros(0)
    dist = np.clip(1.0 - emb @ emb.T, 0.0, None)
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    for i in range(n):
        order = [j for j in np.argsort(dist[i], kind="stable") if j != i]
        for j in order[:k]:
            graph.add_edge(i, int(j), weight=float(dist[i, j]))
    geo = nx.single_source_dijkstra_path_length(graph, 0, weight="weight")
    cos = emb @ (query / np.linalg.norm(query))
    sim_geo = np.array([1.0 / (1.0 + geo[i]) if i in geo else 0.0 for i in range(n)])
    return alpha * cos + (1 - alpha) * sim_geo

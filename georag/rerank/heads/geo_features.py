"""Soft geometric features of each pooled candidate, for residual heads and rankers.

Every feature is a number per candidate, shape (B, M), computed on the pool's embeddings
with no cut (candidates outside a graph get the mean of those inside, so standardizing
per query gives them 0):

* ``ricci_curvature``: Ollivier-Ricci curvature of the query edge before the flow, and
  ``ricci_length``: its length after the normalized Ricci flow (no surgery), on the
  query graph of "Ricci-Filtration: Boosting Retrieval-Augmented Generation Reranker to
  Query-Answer Tasks by Discrete Ricci Flow" (query + top 20, percentile edges);
* ``ppr``: personalized PageRank mass on the pool's cosine k-NN graph, teleporting to a
  softmax of the first-stage scores ("Topic-sensitive PageRank", Haveliwala);
* ``geodesic``: ``1 / (1 + d)`` with ``d`` the k-NN-graph geodesic distance from the
  best first-stage candidate, as Maniscope;
* ``density``: mean cosine to the ``k`` nearest other candidates;
* ``hub_occurrence``: ``log(1 + N_k(d))``, the number of training queries whose
  first-stage top ``k`` holds the document ("Hubs in Space", Radovanovic, Nanopoulos and
  Ivanovic), and ``csls``: ``-r(d)``, minus the mean cosine of the document to its ``k``
  nearest training queries, the document's term of CSLS ("Word Translation Without
  Parallel Data", Conneau et al.). Both come from training queries only
  (:func:`hubness_features`); a training query's own row never counts for itself.

A Lorentz distance needs a trained HyTE-H projection of the pool (not part of a dense
pool), so it is not among these features.
"""

from __future__ import annotations

import warnings

import torch

from georag.batch import CandidateBatch
from georag.geometry.diffusion import personalized_pagerank
from georag.geometry.graphs import knn_graph, single_source_shortest_paths
from georag.geometry.ricci import RicciConvergenceWarning
from georag.rerank.geometric.ricci_filtration import RicciFiltration, RicciFiltrationConfig

__all__ = ["POOL_FEATURES", "HUB_FEATURES", "pool_features", "hubness_features"]

POOL_FEATURES = ("ricci_curvature", "ricci_length", "ppr", "geodesic", "density")
HUB_FEATURES = ("hub_occurrence", "csls")


def _fill_outside(values: torch.Tensor, inside: torch.Tensor) -> torch.Tensor:
    """``values`` where ``inside``, the per-query mean of those elsewhere (0 if none)."""
    count = inside.sum(1, keepdim=True).clamp_min(1)
    mean = torch.where(inside, values, 0.0).sum(1, keepdim=True) / count
    return torch.where(inside, values, mean.expand_as(values))


def _ricci(batch: CandidateBatch, config: RicciFiltrationConfig) -> tuple[torch.Tensor, ...]:
    out = RicciFiltration(config).filtrate(batch, history=True)
    curvature = out.flow.history_curvature[0][:, 0, 1:]
    pooled = torch.gather(batch.mask, 1, out.slots) & out.flow.adjacency[:, 0, 1:]
    inside = torch.zeros_like(batch.mask).scatter(1, out.slots, pooled)
    curv = torch.zeros_like(batch.scores).scatter(1, out.slots, curvature.to(batch.scores.dtype))
    length = torch.nan_to_num(out.query_lengths.to(batch.scores.dtype), nan=0.0)
    return _fill_outside(curv, inside), _fill_outside(length, inside)


def pool_features(
    batch: CandidateBatch,
    *,
    k: int = 10,
    geodesic_k: int = 5,
    damping: float = 0.85,
    teleport_temperature: float = 0.05,
    ricci: RicciFiltrationConfig | None = None,
) -> dict[str, torch.Tensor]:
    """The features of :data:`POOL_FEATURES`, each of shape (B, M) (0 at padded slots).

    Parameters
    ----------
    batch : CandidateBatch
        At least ``k + 1`` candidate slots.
    k : int
        Neighbours of the PPR graph and of the density.
    geodesic_k : int
        Neighbours of the geodesic graph (Maniscope's default, 5).
    damping : float
        PPR damping.
    teleport_temperature : float
        Temperature of the softmax of first-stage scores that PPR teleports to.
    ricci : RicciFiltrationConfig, optional
        The Ricci graph and flow (the paper's defaults).
    """
    m = batch.num_candidates
    if m <= max(k, geodesic_k):
        raise ValueError(f"batch: needs more than {max(k, geodesic_k)} candidate slots, got M={m}")
    mask = batch.mask
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RicciConvergenceWarning)
        curvature, length = _ricci(batch, ricci or RicciFiltrationConfig())
        lengths, adjacency = knn_graph(batch.cands, k, mask=mask)
        weights = torch.where(adjacency, (1.0 - lengths).clamp_min(0.0), 0.0)
        teleport = torch.softmax(
            (batch.scores / teleport_temperature).masked_fill(~mask, -torch.inf), dim=1
        )
        teleport = torch.nan_to_num(teleport, nan=0.0)
        has = teleport.sum(1) > 0
        teleport = torch.where(has.unsqueeze(1), teleport, 1.0 / m)
        ppr = personalized_pagerank(weights, teleport, damping=damping, mask=mask)
        geo_len, geo_adj = knn_graph(batch.cands, geodesic_k, mask=mask)
        anchor = batch.scores.masked_fill(~mask, -torch.inf).argmax(dim=1)
        geodesic = 1.0 / (1.0 + single_source_shortest_paths(geo_len, geo_adj, anchor))
        density = torch.where(adjacency, 1.0 - lengths, 0.0).sum(2) / adjacency.sum(2).clamp_min(1)
    zero = torch.zeros((), dtype=batch.scores.dtype)
    out = {
        "ricci_curvature": curvature,
        "ricci_length": length,
        "ppr": ppr,
        "geodesic": geodesic,
        "density": density,
    }
    return {n: torch.where(mask, v.to(batch.scores.dtype), zero) for n, v in out.items()}


def hubness_features(
    batch: CandidateBatch,
    train_queries: torch.Tensor,
    train_top: list[list[str]],
    train_ids: list[str],
    *,
    k: int = 10,
    chunk: int = 4096,
) -> dict[str, torch.Tensor]:
    """The features of :data:`HUB_FEATURES`, from training queries only.

    Parameters
    ----------
    batch : CandidateBatch
        The pool to describe.
    train_queries : torch.Tensor, shape (T, D)
        Training query embeddings.
    train_top : list of list of str, length T
        Each training query's first-stage top ``k`` document ids.
    train_ids : list of str, length T
        Training query ids: where a row of ``batch`` is one of them, that query is left
        out of its own features.
    k : int
        Nearest training queries of CSLS's mean.
    chunk : int
        Candidates per matrix product (memory).

    Returns
    -------
    dict of torch.Tensor, each of shape (B, M); 0 at padded slots.
    """
    if train_queries.shape[0] != len(train_top) or len(train_top) != len(train_ids):
        raise ValueError("train_queries, train_top and train_ids must have one entry per query")
    if train_queries.shape[0] < 2:
        raise ValueError(f"train_queries: need at least 2, got {train_queries.shape[0]}")
    position = {q: i for i, q in enumerate(train_ids)}
    owners: dict[str, set[str]] = {}
    for q, top in zip(train_ids, train_top, strict=True):
        for d in top[:k]:
            owners.setdefault(d, set()).add(q)
    occurrence = torch.tensor(
        [
            [float(len(owners.get(d, set()) - {q})) if d else 0.0 for d in row]
            for q, row in zip(batch.query_ids, batch.doc_ids, strict=True)
        ],
        dtype=batch.scores.dtype,
    )
    b, m, d = batch.cands.shape
    own = torch.tensor([position.get(q, -1) for q in batch.query_ids])
    unit_q = torch.nn.functional.normalize(train_queries.to(batch.cands.dtype), dim=1)
    flat = torch.nn.functional.normalize(batch.cands.reshape(b * m, d), dim=1)
    owner = own.repeat_interleave(m)
    kk = min(k, train_queries.shape[0] - 1)
    means = []
    for start in range(0, b * m, chunk):
        sims = flat[start : start + chunk] @ unit_q.T
        rows = owner[start : start + chunk]
        mine = rows >= 0
        sims[mine.nonzero().squeeze(1), rows[mine]] = -torch.inf
        means.append(sims.topk(kk, dim=1).values.mean(1))
    csls = -torch.cat(means).reshape(b, m)
    zero = torch.zeros((), dtype=batch.scores.dtype)
    return {
        "hub_occurrence": torch.where(batch.mask, torch.log1p(occurrence), zero),
        "csls": torch.where(batch.mask, csls, zero),
    }

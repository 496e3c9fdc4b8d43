"""The sections of ``scripts/bench/bench_graph.py``: georag's batched graph kernels against
per-query peers, side by side in one run.

* :func:`bench_ppr`: batched dense personalized PageRank against ``networkx.pagerank``;
* :func:`bench_maniscope`: the Maniscope reranker against a per-query numpy + networkx
  pipeline (:func:`maniscope_reference`) and the paper's scipy pipeline
  (:func:`maniscope_scipy`);
* :func:`bench_sparse`: sparse CSR PPR with many personalization vectors against
  python-igraph's prpack, one query at a time.

Each section prints its rows (:func:`row`: ms per query and georag's speed-up) and records
its medians in :data:`RESULTS`. georag.perf sits below the rerankers timed here, so this
lives in experiments.
"""

from __future__ import annotations

import argparse
import warnings

import networkx as nx
import numpy as np
import torch

from georag.batch import CandidateBatch
from georag.eval.references import networkx_maniscope
from georag.eval.synthetic import clustered_unit_rows, unit_rows
from georag.geometry.diffusion import edge_index_to_csr, personalized_pagerank
from georag.perf.bench import Bench
from georag.rerank.geometric.maniscope import Maniscope, ManiscopeConfig

RESULTS: dict[str, dict] = {}


def median_seconds(bench: Bench, fn, repeats: int, label: str | None = None) -> float:
    """Median seconds of ``fn()`` over ``repeats`` calls (after one warm-up)."""
    timing = bench.time(lambda i: fn(), repeats=repeats)
    if label is not None:
        RESULTS[label] = timing.as_dict()
    return timing.median / 1e3


def row(label: str, ms_per_query: float, ratio: float | None = None, note: str = "") -> None:
    """Print one line: the label, ms per query, the speed-up ``ratio`` and a note."""
    speed = "" if ratio is None else f"{ratio:10.1f}x"
    print(f"  {label:<46} {ms_per_query:12.4f} ms/query {speed:>11}  {note}")


def bench_ppr(args: argparse.Namespace, bench: Bench) -> None:
    """Batched dense PPR on ``--ppr-batch`` complete graphs of ``--ppr-nodes`` nodes against
    ``networkx.pagerank`` per graph (on ``--ppr-subset`` of them)."""
    b, n, d = args.ppr_batch, args.ppr_nodes, args.dim
    rng = np.random.default_rng(0)
    x = clustered_unit_rows(rng, b, n, d, spread=0.6)
    w = np.clip(x @ x.transpose(0, 2, 1), 0.0, None)
    w[:, np.arange(n), np.arange(n)] = 0.0
    p = rng.random((b, n)).astype(np.float32)
    weights, pers = torch.tensor(w), torch.tensor(p)

    ours = median_seconds(
        bench, lambda: personalized_pagerank(weights, pers), args.repeats, "ppr georag batched"
    )
    out = personalized_pagerank(weights, pers)

    subset = min(args.ppr_subset, b)
    graphs = []
    for i in range(subset):
        g = nx.Graph()
        g.add_nodes_from(range(n))
        iu, ju = np.triu_indices(n, 1)
        g.add_weighted_edges_from(
            (int(a), int(c), float(w[i, a, c]))
            for a, c in zip(iu, ju, strict=True)
            if w[i, a, c] > 0
        )
        graphs.append((g, {j: float(p[i, j]) for j in range(n)}))

    def run_nx() -> list[dict]:
        return [nx.pagerank(g, alpha=0.85, personalization=q, weight="weight") for g, q in graphs]

    theirs = median_seconds(bench, run_nx, args.repeats, "ppr networkx subset")
    ref = run_nx()
    err = max(abs(ref[i][j] - float(out[i, j])) for i in range(subset) for j in range(n))
    print(
        f"\n[ppr] dense batched PPR, B={b} complete graphs of N={n} (cosine weights clipped at 0, "
        f"D={d}), float32, damping 0.85, tol 1e-6 (networkx rule)"
    )
    print(f"  networkx.pagerank timed on {subset} graphs, time per query extrapolated")
    row("georag personalized_pagerank (batched)", 1e3 * ours / b, None)
    row("networkx.pagerank (per query)", 1e3 * theirs / subset, (theirs / subset) / (ours / b))
    print(f"  max |georag - networkx| over the {subset} graphs: {err:.2e}")


def maniscope_scipy(query, cands, scores, k: int, alpha: float) -> np.ndarray:
    """The Maniscope paper's optimized per-query pipeline: cKDTree k-NN, CSR graph, C Dijkstra."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra
    from scipy.spatial import cKDTree

    unit = cands / np.linalg.norm(cands, axis=1, keepdims=True)
    chord, nbrs = cKDTree(unit).query(unit, k=k + 1)
    m = len(cands)
    lengths = np.maximum(chord[:, 1:] ** 2 / 2, 1e-12)  # cosine distance = chord^2 / 2
    graph = csr_matrix((lengths.ravel(), (np.repeat(np.arange(m), k), nbrs[:, 1:].ravel())), (m, m))
    geo = dijkstra(graph, directed=False, indices=int(np.argmax(scores)))
    cos = unit @ (query / np.linalg.norm(query))
    return alpha * cos + (1 - alpha) / (1.0 + geo)


def maniscope_reference(query, cands, scores, k: int, alpha: float) -> np.ndarray:
    """Maniscope for one query with networkx (georag.eval.references), best candidate first."""
    order = np.argsort(-scores, kind="stable")
    unit = cands[order] / np.linalg.norm(cands[order], axis=1, keepdims=True)
    out = np.empty(len(cands))
    out[order] = networkx_maniscope(query, unit, k=k, alpha=alpha)
    return out


def bench_maniscope(args: argparse.Namespace, bench: Bench) -> None:
    """Maniscope on ``--mani-batch`` queries of ``--mani-cands`` candidates against the
    per-query pipelines (on ``--mani-subset`` of them)."""
    b, m, d, k = args.mani_batch, args.mani_cands, args.dim, 5
    rng = np.random.default_rng(1)
    query = unit_rows(rng, (b, d))
    cands = unit_rows(rng, (b, m, d)) + 0.5 * query[:, None, :]
    scores = np.einsum("bmd,bd->bm", cands, query) / np.linalg.norm(cands, axis=2)
    order = np.argsort(-scores, axis=1)
    cands = np.take_along_axis(cands, order[:, :, None], 1)
    scores = np.take_along_axis(scores, order, 1)
    batch = CandidateBatch(
        query=torch.tensor(query),
        cands=torch.tensor(cands),
        scores=torch.tensor(scores),
        mask=torch.ones(b, m, dtype=torch.bool),
        query_ids=[str(i) for i in range(b)],
        doc_ids=[[str(j) for j in range(m)] for _ in range(b)],
    )
    reranker = Maniscope(ManiscopeConfig(k=k, alpha=0.5, top_m=m))
    ours = median_seconds(bench, lambda: reranker(batch), args.repeats, "maniscope georag")
    out = reranker(batch).scores.numpy()

    subset = min(args.mani_subset, b)
    nx_time = median_seconds(
        bench,
        lambda: [maniscope_reference(query[i], cands[i], scores[i], k, 0.5) for i in range(subset)],
        args.repeats,
    )
    sp_time = median_seconds(
        bench,
        lambda: [maniscope_scipy(query[i], cands[i], scores[i], k, 0.5) for i in range(subset)],
        args.repeats,
    )
    same = sum(
        np.array_equal(
            np.argsort(-out[i], kind="stable"),
            np.argsort(-maniscope_reference(query[i], cands[i], scores[i], k, 0.5), kind="stable"),
        )
        for i in range(subset)
    )
    per = ours / b
    print(
        f"\n[maniscope] B={b} queries, M={m} candidates, D={d}, k={k}, alpha=0.5, float32; "
        "graph construction included on every side"
    )
    print(f"  per-query peers timed on {subset} queries, time per query extrapolated")
    row("georag Maniscope (batched)", 1e3 * per, None)
    row(
        "numpy k-NN + networkx Dijkstra (per query)", 1e3 * nx_time / subset, nx_time / subset / per
    )
    row(
        "paper's cKDTree + scipy Dijkstra (per query)",
        1e3 * sp_time / subset,
        sp_time / subset / per,
        "(reference only)",
    )
    print(f"  identical rankings vs the networkx pipeline: {same}/{subset} queries")


def bench_sparse(args: argparse.Namespace, bench: Bench) -> None:
    """Sparse CSR PPR of ``--sparse-queries`` seeds at once on ``--sparse-nodes`` nodes
    against python-igraph one query at a time (on ``--sparse-subset``), with accuracy."""
    import igraph

    n, e, q = args.sparse_nodes, args.sparse_edges, args.sparse_queries
    rng = np.random.default_rng(2)
    src = np.concatenate([rng.integers(0, n, e - n), np.arange(n)])
    dst = np.concatenate([rng.integers(0, n, e - n), (np.arange(n) + 1) % n])
    keep = src != dst
    src, dst = src[keep], dst[keep]
    w = (rng.random(len(src)) + 0.1).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: "sparse CSR support is in beta"
        csr = edge_index_to_csr(torch.tensor(np.stack([src, dst])), n, torch.tensor(w))
    pers = np.zeros((n, q), dtype=np.float32)
    for j in range(q):  # HippoRAG-style: a few seed nodes per query
        pers[rng.choice(n, 5, replace=False), j] = rng.random(5) + 0.1
    pers_t = torch.tensor(pers)

    graph = igraph.Graph(n=n, edges=np.stack([src, dst], 1), directed=False)
    graph.es["weight"] = w.astype(np.float64)
    subset = min(args.sparse_subset, q)

    def run_igraph() -> np.ndarray:
        return np.stack(
            [
                graph.personalized_pagerank(
                    damping=0.85, reset=pers[:, j].astype(np.float64), weights="weight"
                )
                for j in range(subset)
            ],
            axis=1,
        )

    theirs = median_seconds(bench, run_igraph, args.repeats, "sparse igraph subset")
    ref = run_igraph()
    print(
        f"\n[sparse] CSR PPR on N={n} nodes, {csr._nnz() // 2} undirected edges "
        f"({csr._nnz()} stored entries), Q={q} personalization vectors (5 seed nodes each), "
        f"float32, damping 0.85"
    )
    print(f"  igraph timed on {subset} queries, time per query extrapolated")
    row("igraph personalized_pagerank, prpack (per query)", 1e3 * theirs / subset, None)
    for tol in (1e-6, 1e-10):
        for block in (None, 32):
            ours = median_seconds(
                bench,
                lambda t=tol, bs=block: personalized_pagerank(
                    csr, pers_t, tol=t, max_iter=300, block_size=bs
                ),
                args.repeats,
                f"sparse georag tol={tol:g} block={block}",
            )
            out = personalized_pagerank(csr, pers_t, tol=tol, max_iter=300, block_size=block)
            diff = np.abs(out[:, :subset].double().numpy() - ref)
            label = f"georag sparse, tol={tol:g} (L1 < {n * tol:g}), block={block}"
            row(
                label,
                1e3 * ours / q,
                (theirs / subset) / (ours / q),
                f"max|d|={diff.max():.1e} L1={diff.sum(0).max():.1e}",
            )

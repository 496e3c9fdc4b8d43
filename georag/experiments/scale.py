"""The cases of the corpus-growth benchmark (``scripts/bench/bench_scale.py``): one kernel
at one corpus size and thread count, timed in a process of its own.

* corpora: :func:`corpus` (SciFact's embeddings, or a synthetic corpus of unit rows drawn
  around k-means centres fitted on them, :func:`centres_file`), :func:`corpus_texts` (a
  SciFact text per synthetic document, from its own cluster);
* the IVF k-NN graph of a corpus, built once per size and kept in ``--work``
  (:func:`ivf_graph`);
* the cases (:data:`CASES`): faiss k-NN graphs, whole-graph personalized PageRank against
  python-igraph's prpack, sparse Ollivier-Ricci curvature against POT and
  GraphRicciCurvature, the GAR corpus graph, the HyTE-H Lorentz index;
* :func:`run_case`: one case, its timings, peak RSS and load averages.

The arithmetic (synthetic centres, slopes, skips, tables) is :mod:`georag.perf.scaling`;
georag.perf sits below the layers timed here, so this lives in experiments.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from georag.perf.bench import peer_python
from georag.perf.peers import GRC_PEER_SCRIPT
from georag.perf.scaling import (
    DIM,
    GAR_K,
    QUERIES,
    Clock,
    K,
    centre_count,
    edge_sample,
    edges_of,
    grown_centres,
    texts_of_clusters,
)

KERNELS = (
    "knn_flat",
    "knn_ivf",
    "ppr",
    "ppr_igraph",
    "ricci",
    "grc",
    "corpus_graph_dense",
    "corpus_graph_bm25",
    "lorentz",
)


def centres_file(work: Path, data_dir, count: int, dataset: str = "scifact") -> Path:
    """Cluster centres, residual scales, weights and the data set's labels (k-means)."""
    path = work / f"{dataset}_centres_{count}.npz"
    if path.is_file() and "label" in np.load(path):
        return path
    import faiss

    if dataset == "random":  # no embeddings at hand: random centres, the noise of a cluster
        gen = np.random.default_rng(0)
        centres = gen.standard_normal((count, DIM)).astype(np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        scale, weight = np.full(count, 0.6), np.full(count, 1.0 / count)
        np.savez(path, centres=centres, scale=scale, weight=weight, label=np.zeros(0, int))
        return path
    embeddings = scifact_embeddings(data_dir, dataset)
    kmeans = faiss.Kmeans(DIM, count, niter=20, seed=0)
    kmeans.train(embeddings)
    _, label = kmeans.index.search(embeddings, 1)
    label = label[:, 0]
    residual = np.linalg.norm(embeddings - kmeans.centroids[label], axis=1)
    scale = np.array(
        [residual[label == c].mean() if (label == c).any() else 0.0 for c in range(count)]
    )
    weight = np.bincount(label, minlength=count) / len(label)
    np.savez(path, centres=kmeans.centroids, scale=scale, weight=weight, label=label)
    return path


def scifact_dataset(data_dir, dataset: str = "scifact"):
    """The BEIR set ``dataset`` (test split), SciFact by default."""
    from georag.data.beir import load_beir

    return load_beir(dataset, split="test", data_dir=data_dir)


def scifact_embeddings(data_dir, dataset: str = "scifact") -> np.ndarray:
    """all-MiniLM-L6-v2 embeddings ``(N, 384) float32`` of the set's documents (the cache)."""
    from georag.retrieval.candidates import corpus_embeddings
    from georag.retrieval.encoder import TextEncoder

    texts = [doc.full_text for doc in scifact_dataset(data_dir, dataset).corpus.values()]
    embeddings, _ = corpus_embeddings(texts, TextEncoder(show_progress=False))
    return np.ascontiguousarray(embeddings.numpy(), dtype=np.float32)


def corpus(size: str, work: Path, data_dir, centres: int, fitted_on: str, docs_per_centre):
    """Unit embeddings ``(N, DIM) float32`` and each document's fitted cluster ``(N,)``
    (its centre's parent; None for SciFact). ``docs_per_centre`` None: the fitted data
    set's documents per centre (SciFact: 5,183 / 64), 0: the fitted centres only."""
    if size == "scifact":
        return scifact_embeddings(data_dir), None
    n = int(size)
    fit = np.load(centres_file(work, data_dir, centres, fitted_on))
    if docs_per_centre is None:
        docs_per_centre = len(fit["label"]) / centres
    grown = grown_centres(
        fit, centre_count(n, centres, docs_per_centre), np.random.default_rng(centres)
    )
    gen = np.random.default_rng(n)
    label = gen.choice(len(grown["weight"]), size=n, p=grown["weight"])
    x = np.empty((n, DIM), dtype=np.float32)
    for start_row in range(0, n, 100_000):
        rows = slice(start_row, start_row + 100_000)
        noise = gen.standard_normal((len(label[rows]), DIM)).astype(np.float32)
        noise *= (grown["scale"][label[rows]] / math.sqrt(DIM))[:, None].astype(np.float32)
        x[rows] = grown["centres"][label[rows]] + noise
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, grown["parent"][label]


def corpus_texts(size: str, label, args) -> list[str]:
    """A text per document of ``size``: SciFact's own, or for a synthetic corpus a
    random SciFact text of each document's fitted cluster ``label (N,)``."""
    texts = [doc.full_text for doc in scifact_dataset(args.data_dir).corpus.values()]
    if size == "scifact":
        return texts
    fit = np.load(centres_file(Path(args.work), args.data_dir, args.centres, "scifact"))
    pick = texts_of_clusters(label, fit["label"], np.random.default_rng(int(size) + 1))
    return [texts[i] for i in pick]


def ivf_knn(x: np.ndarray, k: int):
    """IVF-Flat self-search: similarities and neighbours ``(N, k + 1)``, self included."""
    import faiss

    n = len(x)
    nlist = max(1, int(4 * math.sqrt(n)))
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = 10
    sample = x[np.random.default_rng(0).choice(n, min(n, 16 * nlist), replace=False)]
    index.train(sample)
    index.add(x)
    index.nprobe = 8
    return index.search(x, k + 1)


def graph_path(size: str, args) -> Path:
    """The file of the IVF k-NN graph of ``size`` in ``--work``."""
    grown = "" if args.docs_per_centre is None else f"_per{args.docs_per_centre:g}"
    return (
        Path(args.work) / f"ivf_graph_{size}_{args.centres_dataset}{args.centres}{grown}_k{K}.npz"
    )


def save_graph(path: Path, sims: np.ndarray, neighbours: np.ndarray) -> None:
    """Save the undirected edges and lengths of a k-NN search ``(N, k + 1)`` atomically."""
    edges, lengths = edges_of(neighbours, sims)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, edges=edges, lengths=lengths)
    os.replace(tmp, path)


def ivf_graph(size: str, x: np.ndarray, args) -> tuple[np.ndarray, np.ndarray]:
    """The IVF k-NN graph's edges ``(2, E)`` and lengths ``(E,)``, built once per size."""
    path = graph_path(size, args)
    if not path.is_file():
        save_graph(path, *ivf_knn(x, K))
    graph = np.load(path)
    return graph["edges"], graph["lengths"]


def knn_case(kernel: str, size: str, x, label, args) -> tuple[dict, dict]:
    """The corpus k-NN graph by faiss flat or IVF search; IVF's recall@10 against flat."""
    import faiss

    if kernel == "knn_flat":
        index = faiss.IndexFlatIP(DIM)
        with Clock() as clock:
            index.add(x)
            index.search(x, K + 1)
        return {kernel: clock}, {}
    with Clock() as clock:
        sims, neighbours = ivf_knn(x, K)
    path = graph_path(size, args)
    if not path.is_file():
        save_graph(path, sims, neighbours)
    probe = np.random.default_rng(1).choice(len(x), min(len(x), 1000), replace=False)
    flat = faiss.IndexFlatIP(DIM)
    flat.add(x)
    _, truth = flat.search(x[probe], K + 1)
    recall = np.mean([len(set(a[1:]) & set(b[1:])) / K for a, b in zip(truth, neighbours[probe])])
    return {kernel: clock}, {"recall_at_10": float(recall)}


def ppr_case(kernel: str, size: str, x, label, args) -> tuple[dict, dict]:
    """Whole-graph PPR of :data:`QUERIES` seeds: georag's sparse path, or igraph's prpack
    one seed at a time."""
    import torch

    edges, lengths = ivf_graph(size, x, args)
    n = len(x)
    seeds = np.random.default_rng(2).choice(n, QUERIES, replace=False)
    weight = np.maximum(1.0 - lengths, 0.0)
    extra = {"edges": int(edges.shape[1])}
    if kernel == "ppr_igraph":
        import igraph

        with Clock() as clock:
            graph = igraph.Graph(n=n, edges=edges.T.tolist())
            for seed in seeds:
                graph.personalized_pagerank(
                    damping=0.85, reset_vertices=[int(seed)], weights=weight.tolist()
                )
        return {kernel: clock}, extra
    from georag.geometry.diffusion import personalized_pagerank

    e, w = torch.from_numpy(edges), torch.from_numpy(weight).float()
    with Clock() as clock:
        both = torch.cat([e, e.flip(0)], 1)
        matrix = torch.sparse_coo_tensor(both, torch.cat([w, w]), (n, n), check_invariants=True)
        teleport = torch.zeros(n, QUERIES)
        teleport[torch.from_numpy(seeds), torch.arange(QUERIES)] = 1.0
        personalized_pagerank(matrix.coalesce().to_sparse_csr(), teleport, damping=0.85)
    return {kernel: clock}, extra


def ricci_case(kernel: str, size: str, x, label, args) -> tuple[dict, dict]:
    """Sparse exact curvature of sampled edges (max difference to POT), or
    GraphRicciCurvature's on the first of them in the peers' python (difference to georag)."""
    import torch

    from georag.geometry.ricci.sparse import sparse_ollivier_ricci

    edges, lengths = ivf_graph(size, x, args)
    n, total = len(x), edges.shape[1]
    subset = edge_sample(total, args.ricci_edges)
    if kernel == "grc":
        subset = subset[: args.grc_edges]
    e, lengths_t, subset_t = map(torch.from_numpy, (edges, lengths, subset))
    extra: dict = {"edges": int(total), "ricci_edges": len(subset)}
    triangle = torch.tensor([[0, 1, 2], [1, 2, 0]])
    sparse_ollivier_ricci(triangle, torch.ones(3, dtype=torch.float64), 3)  # numba loaded
    if kernel == "ricci":
        with Clock() as clock:
            kappa = sparse_ollivier_ricci(e, lengths_t, n, subset=subset_t, method="exact")
        if args.pot_edges > 0:
            check = subset_t[: args.pot_edges]
            pot = sparse_ollivier_ricci(e, lengths_t, n, subset=check, method="pot")
            extra.update(
                max_diff_to_pot=float((pot - kappa[: len(check)]).abs().max()),
                pot_edges=len(check),
            )
        return {kernel: clock}, extra
    peer = args.peer_python or peer_python()
    if peer is None:
        raise SystemExit("grc: no .venv-peers (make peers) and no --peer-python")
    mode = "all_pairs" if 8.0 * n * n <= args.max_gib * 2**30 / 2 else "pairwise"
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "g.npz", Path(tmp) / "kappa.npy"
        np.savez(inp, x=edges[0], y=edges[1], w=lengths, num_nodes=n, subset=subset)
        with Clock() as clock:
            done = subprocess.run(
                [str(peer), "-c", GRC_PEER_SCRIPT, str(inp), str(out), str(args.threads), mode],
                check=True,
                capture_output=True,
                text=True,
            )
        theirs = np.load(out)
    inside = Clock()  # GRC's own calls, without the peer's start and its networkx graph
    inside.wall, inside.cpu = (
        json.loads(done.stdout.strip().splitlines()[-1])[key] for key in ("seconds", "cpu_seconds")
    )
    ours = sparse_ollivier_ricci(e, lengths_t, n, subset=subset_t, method="exact").numpy()
    extra.update(
        shortest_path=mode,
        grc_process_seconds=clock.wall,
        max_diff_to_georag=float(np.abs(theirs - ours).max()),
    )
    return {kernel: inside}, extra


def corpus_graph_case(kernel: str, size: str, x, label, args) -> tuple[dict, dict]:
    """The GAR corpus graph (k = :data:`GAR_K`) from the embeddings or the texts."""
    import torch

    from georag.retrieval.corpus_graph import bm25_neighbours, dense_neighbours

    if kernel == "corpus_graph_dense":
        embeddings = torch.from_numpy(x)
        with Clock() as clock:
            dense_neighbours(embeddings, GAR_K)
        return {kernel: clock}, {}
    texts = corpus_texts(size, label, args)
    with Clock() as clock:
        neighbours, _ = bm25_neighbours(texts, GAR_K)
    padded = (neighbours == torch.arange(len(texts)).unsqueeze(1)).any(1).float().mean()
    return {kernel: clock}, {"rows_padded": float(padded)}


def lorentz_case(kernel: str, size: str, x, label, args) -> tuple[dict, dict]:
    """HyTE-H Lorentz index build, then search at B=1 and batched."""
    from georag.models.hyte import HyTEEncoder
    from georag.rerank.geometric.hyte import build_index

    texts = corpus_texts(size, label, args)
    queries = list(scifact_dataset(args.data_dir).queries.values())
    encoder = HyTEEncoder.from_pretrained()
    with tempfile.TemporaryDirectory() as tmp:
        with Clock() as build:
            index = build_index(texts, Path(tmp) / "index", encoder=encoder)
        single = []
        for query in queries[: args.lorentz_queries]:
            with Clock() as clock:
                index.search([query], 10)
            single.append(clock)
        batched = []
        for _ in range(3):
            with Clock() as clock:
                index.search(queries, 10)
            batched.append(clock)
    b1, many = (sorted(c, key=lambda clock: clock.wall)[len(c) // 2] for c in (single, batched))
    b1.per, many.per = 1, len(queries)
    timings = {"lorentz_build": build, "lorentz_search_b1": b1, "lorentz_search_batched": many}
    return timings, {"chunks": len(index), "queries_batched": len(queries)}


CASES = {
    "knn_flat": knn_case,
    "knn_ivf": knn_case,
    "ppr": ppr_case,
    "ppr_igraph": ppr_case,
    "ricci": ricci_case,
    "grc": ricci_case,
    "corpus_graph_dense": corpus_graph_case,
    "corpus_graph_bm25": corpus_graph_case,
    "lorentz": lorentz_case,
}


def run_case(kernel: str, size: str, threads: int, args) -> dict:
    """One case at ``threads`` threads: its timings per unit, peak RSS and load averages."""
    import faiss
    import torch

    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)
    args.threads = threads
    x, label = corpus(
        size,
        Path(args.work),
        args.data_dir,
        args.centres,
        args.centres_dataset,
        args.docs_per_centre,
    )
    load_start = os.getloadavg()
    timings, extra = CASES[kernel](kernel, size, x, label, args)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    per = {name: getattr(c, "per", 1) for name, c in timings.items()}
    return {
        "n": len(x),
        "timings": {
            name: {"seconds": c.wall / per[name], "cpu_seconds": c.cpu / per[name]}
            for name, c in timings.items()
        },
        "peak_mib": peak,
        "load_start": load_start,
        "load": os.getloadavg(),
        **extra,
    }

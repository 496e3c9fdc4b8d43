"""How corpus-level kernels grow with the corpus: SciFact, then synthetic corpora from 1e4 to 1e6.

Synthetic corpora: ``--centres`` cluster centres fitted (faiss k-means) on SciFact's
all-MiniLM-L6-v2 embeddings (the embedding cache, encoded when absent), each document a
centre plus isotropic noise scaled to that cluster's residual norm, normalised; SciFact
itself is the real point (``--sizes scifact``). The number of centres grows with N at
SciFact's documents per centre (5,183 / 64, ``--docs-per-centre``; 0 keeps the fitted 64,
whose clusters then grow denser with N): the new ones are drawn around the fitted ones
(:func:`grown_centres`: a Gaussian step with the fitted centres' covariance, as long as the
median distance between nearest fitted centres), so a larger corpus has more topics, not
denser ones. A synthetic document's text, for the kernels that need texts, is the text of a
random SciFact document of its centre's fitted cluster (so the vocabulary stays SciFact's and
every text recurs about N / 5,183 times). Each (kernel,
size, threads) case runs in its own process (peak RSS = its ru_maxrss, data generation
included) under a wall-time cap (``--max-seconds``); a case is skipped, the reason printed,
when its memory or flops estimate exceeds the caps, or when the kernel's smaller sizes of
the same run extrapolate (log-log, slope at least 1) past the cap. Kernels:

- ``knn_flat`` / ``knn_ivf``: corpus k-NN graph (k=10) by faiss IndexFlatIP / IVF-Flat
  (nlist = 4 sqrt(N) trained 10 rounds on 16 nlist points, nprobe 8; recall@10 of IVF
  against flat on 1,000 documents). The IVF graph is kept in ``--work`` for the graph
  kernels below (built untimed there when absent);
- ``ppr`` / ``ppr_igraph``: whole-graph personalized PageRank for 256 seed documents on the
  IVF k-NN graph, georag's sparse path against python-igraph's prpack (one call per seed);
- ``ricci``: sparse Ollivier-Ricci curvature (exact) of ``--ricci-edges`` random edges of
  the IVF k-NN graph (all when 0), ms per edge, max difference to POT's network simplex on
  ``--pot-edges`` of them;
- ``grc``: GraphRicciCurvature 0.6.1 (OTD, in ``.venv-peers`` or ``--peer-python``, proc =
  threads) on the first ``--grc-edges`` of those edges, all-pairs shortest paths where the
  N x N float64 matrix fits ``--max-gib`` / 2, pairwise ones beyond, timed inside the peer
  (its constructor and ``compute_ricci_curvature_edges``), max difference to georag's exact
  path;
- ``corpus_graph_dense`` / ``corpus_graph_bm25``: the GAR corpus graph
  (:mod:`georag.retrieval.corpus_graph`, k=16) from the embeddings / the texts;
- ``lorentz``: HyTE-H Lorentz index (untrained projection) build of the texts, then hybrid
  search of SciFact's test queries, B=1 (median over ``--lorentz-queries``) and batched
  (all in one call, median of 3), seconds per query.

Kernels whose code is single-threaded (``ricci``, ``ppr_igraph``, ``corpus_graph_bm25``) run
at one thread only.

Per case: wall and process CPU seconds of the timed part (children included), the load
average at its start and end. Then the log-log slope of seconds against size per timing
and thread count (Ricci and GRC: the whole graph, ms per edge x edges), the 1e7
extrapolation, and the plot. ``--report`` redoes the tables and the plot from the JSON of
earlier runs (``--out``); ``--prior`` adds an earlier run's rows to a new run's (larger
sizes after smaller ones)::

    python scripts/bench/bench_scale.py --sizes scifact 10000 100000 --threads-list 1 2 \\
        --max-seconds 240 --data-dir ../shared/data --out runs/scale.json --plot docs/scale.png
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from georag.perf.bench import bench_parser, peer_python, start

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
DIM, K, GAR_K, QUERIES = 384, 10, 16, 256
SCIFACT_DOCS = 5183
#: Per thread, for the time estimates that decide a skip (faiss' flat search of SciFact on
#: this machine: 2.1e10 flops in 0.29 CPU seconds).
FLOPS_PER_S = 5e10
WHOLE_GRAPH = ("ricci", "grc")  # timed on sampled edges; slopes use ms per edge x edges
#: Single-threaded code (numba without parallel loops, prpack, bm25s at n_threads=0): run
#: at one thread only, a second thread would time the same work.
SINGLE_THREADED = ("ricci", "ppr_igraph", "corpus_graph_bm25")
STARTED = time.time()


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
    from georag.data.beir import load_beir

    return load_beir(dataset, split="test", data_dir=data_dir)


def scifact_embeddings(data_dir, dataset: str = "scifact") -> np.ndarray:
    from georag.retrieval.candidates import corpus_embeddings
    from georag.retrieval.encoder import TextEncoder

    texts = [doc.full_text for doc in scifact_dataset(data_dir, dataset).corpus.values()]
    embeddings, _ = corpus_embeddings(texts, TextEncoder(show_progress=False))
    return np.ascontiguousarray(embeddings.numpy(), dtype=np.float32)


def grown_centres(fit, count: int, gen: np.random.Generator) -> dict:
    """The fitted centres, then ``count - fitted`` new ones drawn around them.

    A new centre is a fitted centre (its parent, drawn by cluster weight) plus a Gaussian
    step with the covariance of the fitted centres around their mean, scaled so that its
    expected length is the median distance from a fitted centre to its nearest fitted
    neighbour; it keeps its parent's norm, residual scale and weight (weights then
    renormalised). Parents and steps are drawn in order from two streams of ``gen``, so a
    smaller count's centres are the first ones of a larger count's (with the same seed).

    Parameters
    ----------
    fit : mapping
        ``centres (C, DIM)``, ``scale (C,)``, ``weight (C,)`` of :func:`centres_file`.
    count : int
        Number of centres wanted; at most ``C`` keeps the fitted ones.
    gen : numpy.random.Generator

    Returns
    -------
    dict
        ``centres (M, DIM) float32``, ``scale (M,)``, ``weight (M,)`` summing to 1,
        ``parent (M,)`` (the fitted centre of each; a fitted centre is its own), with
        ``M = max(count, C)``.
    """
    centres, scale, weight = (
        np.asarray(fit[k], dtype=np.float64) for k in ("centres", "scale", "weight")
    )
    fitted = len(centres)
    extra = max(0, count - fitted)
    parents, steps = gen.spawn(2)  # two streams: a count's draws prefix a larger count's
    parent = np.concatenate(
        [np.arange(fitted), parents.choice(fitted, extra, p=weight / weight.sum())]
    )
    gap = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
    np.fill_diagonal(gap, np.inf)
    deviation = centres - centres.mean(0)
    # (C, DIM) deviations mixed by standard normal weights: covariance deviation' deviation / C
    step = steps.standard_normal((extra, fitted)) @ deviation / math.sqrt(fitted)
    step *= np.median(gap.min(1)) / math.sqrt((deviation**2).sum() / fitted)
    grown = centres[parent[fitted:]] + step
    norm = np.linalg.norm(centres, axis=1)[parent[fitted:]]
    grown *= (norm / np.linalg.norm(grown, axis=1))[:, None]
    all_weight = weight[parent]
    return {
        "centres": np.concatenate([centres, grown]).astype(np.float32),
        "scale": scale[parent],
        "weight": all_weight / all_weight.sum(),
        "parent": parent,
    }


def centre_count(n: int, fitted: int, docs_per_centre: float | None) -> int:
    """Centres of an ``n``-document corpus: ``n / docs_per_centre`` (rounded), at least
    the ``fitted`` ones; ``fitted`` whatever ``n`` when ``docs_per_centre`` is 0 or None."""
    if not docs_per_centre:
        return fitted
    return max(fitted, round(n / docs_per_centre))


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


def texts_of_clusters(
    label: np.ndarray, source_label: np.ndarray, gen: np.random.Generator
) -> np.ndarray:
    """For each synthetic document a random source document of its cluster.

    Parameters
    ----------
    label : numpy.ndarray, shape (N,), int
        Cluster of each synthetic document.
    source_label : numpy.ndarray, shape (M,), int
        Cluster of each source (SciFact) document; every cluster in ``label`` has one.
    gen : numpy.random.Generator

    Returns
    -------
    numpy.ndarray, shape (N,), int64
        Index into the source documents, uniform within the cluster.
    """
    order = np.argsort(source_label, kind="stable")
    first = np.searchsorted(source_label[order], label, side="left")
    count = np.searchsorted(source_label[order], label, side="right") - first
    if (count == 0).any():
        raise ValueError("label: a cluster without source documents")
    return order[first + (gen.random(len(label)) * count).astype(np.int64)]


def corpus_texts(size: str, label, args) -> list[str]:
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


def edges_of(neighbours: np.ndarray, sims: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Undirected k-NN edges (each once) without self loops; lengths 1 - cos."""
    n = len(neighbours)
    rows = np.repeat(np.arange(n), neighbours.shape[1])
    cols, sim = neighbours.ravel(), sims.ravel()
    keep = (cols >= 0) & (cols != rows)
    lo, hi = np.minimum(rows, cols)[keep], np.maximum(rows, cols)[keep]
    key, first = np.unique(lo * n + hi, return_index=True)
    return np.stack([key // n, key % n]), np.clip(1.0 - sim[keep][first], 0.0, None).astype(
        np.float64
    )


def graph_path(size: str, args) -> Path:
    grown = "" if args.docs_per_centre is None else f"_per{args.docs_per_centre:g}"
    return (
        Path(args.work) / f"ivf_graph_{size}_{args.centres_dataset}{args.centres}{grown}_k{K}.npz"
    )


def save_graph(path: Path, sims: np.ndarray, neighbours: np.ndarray) -> None:
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


def edge_sample(total: int, count: int) -> np.ndarray:
    """``count`` random edge indices of ``total`` (all when ``count <= 0``), sorted."""
    if count <= 0 or count >= total:
        return np.arange(total)
    return np.sort(np.random.default_rng(3).choice(total, count, replace=False))


class Clock:
    """Wall and CPU seconds (this process and its finished children) of one timed part."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), _cpu()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, _cpu() - self.cpu


def _cpu() -> float:
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + child.ru_utime + child.ru_stime


def knn_case(kernel: str, size: str, x, label, args) -> tuple[dict, dict]:
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
    from bench_sparse_ricci import PEER_SCRIPT

    peer = args.peer_python or peer_python()
    if peer is None:
        raise SystemExit("grc: no .venv-peers (make peers) and no --peer-python")
    mode = "all_pairs" if 8.0 * n * n <= args.max_gib * 2**30 / 2 else "pairwise"
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "g.npz", Path(tmp) / "kappa.npy"
        np.savez(inp, x=edges[0], y=edges[1], w=lengths, num_nodes=n, subset=subset)
        with Clock() as clock:
            done = subprocess.run(
                [str(peer), "-c", PEER_SCRIPT, str(inp), str(out), str(args.threads), mode],
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
    from georag.models.hyte import HyTEEncoder
    from georag.rerank.hyte import build_index

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


def estimate(kernel: str, n: int, threads: int, args) -> str | None:
    """Why a case is skipped on memory or flops before it runs (None: it runs)."""
    memory = n * DIM * 4 * 3 + n * 400  # corpus, its copy in faiss, a graph
    if kernel == "ppr":
        memory += n * QUERIES * 4 * 5
    if memory > args.max_gib * 2**30:
        return f"memory estimate {memory / 2**30:.1f} GiB > --max-gib {args.max_gib}"
    if kernel not in ("knn_flat", "knn_ivf", "corpus_graph_dense"):
        return None
    # flat: every pair; IVF: 8 of 4 sqrt(N) lists scanned plus the 4 sqrt(N) centroids
    flops = 2.0 * n * n * DIM if kernel != "knn_ivf" else 2.0 * n * (6 * math.sqrt(n)) * DIM
    seconds = flops / (FLOPS_PER_S * threads)
    if seconds > args.max_seconds:
        return (
            f"time estimate {seconds:.0f} s ({flops:.1e} flops) > --max-seconds {args.max_seconds}"
        )
    return None


def extrapolate(points: list[tuple[float, float]], n: float) -> float | None:
    """Seconds at ``n`` from measured ``(n, seconds)`` points: the fitted log-log slope
    (at least 1) from the largest point; None without points."""
    if not points:
        return None
    fitted = slope(points) if len(points) > 1 else 1.0
    n_max, t_max = max(points)
    return t_max * (n / n_max) ** max(1.0, fitted)


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log seconds against log size; None below two sizes."""
    if len({p[0] for p in points}) < 2:
        return None
    size, seconds = np.log([p[0] for p in points]), np.log([p[1] for p in points])
    return float(np.polyfit(size, seconds, 1)[0])


def series_of(rows: list[dict], *, cpu: bool = False, whole_graph: bool = True) -> dict:
    """``{(timing, threads): [(n, seconds), ...]}`` of the measured rows; Ricci and GRC
    scaled from their sampled edges to the whole graph (seconds / sampled x edges) unless
    ``whole_graph`` is False."""
    series: dict = {}
    for row in rows:
        if row["skipped"]:
            continue
        whole = whole_graph and row["kernel"] in WHOLE_GRAPH
        scale = row["edges"] / row["ricci_edges"] if whole else 1.0
        for name, timing in row["timings"].items():
            seconds = timing["cpu_seconds" if cpu else "seconds"] * scale
            series.setdefault((name, row["threads"]), []).append((row["n"], seconds))
    return series


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--sizes", nargs="+", default=["scifact", "10000", "100000"])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--threads-list", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-seconds", type=float, default=240.0, help="wall cap per case")
    parser.add_argument("--max-gib", type=float, default=20.0, help="memory cap per case")
    parser.add_argument("--centres", type=int, default=64, help="k-means centres fitted")
    parser.add_argument(
        "--docs-per-centre",
        type=float,
        default=None,
        help="centres grow as N / this (default: the fitted set's ratio; 0: fitted only)",
    )
    parser.add_argument(
        "--centres-dataset",
        default="scifact",
        help="BEIR set whose embeddings the centres fit ('random': random centres, noise 0.6)",
    )
    parser.add_argument("--ricci-edges", type=int, default=20000, help="0: every edge")
    parser.add_argument("--pot-edges", type=int, default=2000)
    parser.add_argument("--grc-edges", type=int, default=20000, help="of the Ricci edges")
    parser.add_argument(
        "--peer-python", default=None, help="python of GraphRicciCurvature (.venv-peers)"
    )
    parser.add_argument("--lorentz-queries", type=int, default=100, help="B=1 searches")
    parser.add_argument("--work", default="runs/bench_scale", help="centres and graphs cache")
    parser.add_argument(
        "--stop-after", type=float, default=None, help="start no case past these seconds"
    )
    parser.add_argument("--plot", default=None, help="log-log PNG of seconds against size")
    parser.add_argument("--report", nargs="+", type=Path, help="tables from earlier --out JSON")
    parser.add_argument(
        "--prior",
        nargs="+",
        type=Path,
        help="earlier --out JSON: their rows inform the skips and join the tables",
    )
    parser.add_argument(
        "--case", nargs=3, metavar=("KERNEL", "SIZE", "THREADS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    if args.case:
        kernel, size, threads = args.case
        print(json.dumps(run_case(kernel, size, int(threads), args)))
        return
    if args.report:
        report([row for path in args.report for row in read_rows(path)], args)
        return
    bench = start(
        args,
        config={
            k: getattr(args, k)
            for k in (
                "sizes",
                "kernels",
                "threads_list",
                "max_seconds",
                "max_gib",
                "centres",
                "centres_dataset",
                "docs_per_centre",
                "ricci_edges",
                "pot_edges",
                "grc_edges",
                "lorentz_queries",
            )
        },
    )
    if any(s != "scifact" for s in args.sizes):
        centres_file(Path(args.work), args.data_dir, args.centres, args.centres_dataset)
    prior = [row for path in args.prior or [] for row in read_rows(path)]
    rows: list[dict] = []
    for size in args.sizes:  # every kernel at a size before the next size
        n = SCIFACT_DOCS if size == "scifact" else int(size)
        for kernel in args.kernels:
            for threads in args.threads_list:
                if threads > 1 and kernel in SINGLE_THREADED:
                    continue
                rows.append(run_one(kernel, size, n, threads, prior + rows, args))
    report(prior + rows, args)
    bench.finish({"rows": rows})


def read_rows(path: Path) -> list[dict]:
    """The case rows of an earlier run's ``--out`` JSON."""
    return json.loads(path.read_text())["results"]["rows"]


def run_one(kernel: str, size: str, n: int, threads: int, rows: list[dict], args) -> dict:
    """One case in its own process, or the reason it is skipped."""
    row = {"kernel": kernel, "size": size, "n": n, "threads": threads}
    reason = estimate(kernel, n, threads, args)
    if args.stop_after and time.time() - STARTED > args.stop_after:
        reason = f"not started: past --stop-after {args.stop_after:.0f} s"
    done_before = series_of([r for r in rows if r["kernel"] == kernel], whole_graph=False)
    for (name, t), points in done_before.items():
        guess = extrapolate(points, n) if t == threads and reason is None else None
        if guess is not None and guess > args.max_seconds:
            reason = f"{name} extrapolates to {guess:.0f} s > --max-seconds {args.max_seconds:.0f}"
    if reason is None:
        command = [sys.executable, __file__, "--case", kernel, size, str(threads)]
        command += sys.argv[1:]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), GEORAG_THREADS=str(threads))
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=args.max_seconds,
                env=env,
                check=False,
            )
            if done.returncode == 0:
                row.update(json.loads(done.stdout.strip().splitlines()[-1]))
            else:
                tail = done.stderr.strip().splitlines() or [str(done.returncode)]
                reason = f"failed: {tail[-1]}"
        except subprocess.TimeoutExpired:
            reason = f"time cap: over --max-seconds {args.max_seconds:.0f} s (killed)"
    row["skipped"] = reason
    if reason:
        figure = "skipped: " + reason
    else:
        figure = ", ".join(
            f"{name} {t['seconds']:.3g} s (CPU {t['cpu_seconds']:.3g})"
            for name, t in row["timings"].items()
        )
        figure += f", peak {row['peak_mib']:.0f} MiB"
    print(f"# {kernel} n={n} threads={threads}: {figure} (load {os.getloadavg()[0]:.1f})")
    sys.stdout.flush()
    return row


NOTES = (
    "edges",
    "recall_at_10",
    "ricci_edges",
    "max_diff_to_pot",
    "shortest_path",
    "max_diff_to_georag",
    "grc_process_seconds",
    "rows_padded",
    "chunks",
)


def report(rows: list[dict], args) -> None:
    print(
        "\n| timing | n | threads | wall s | CPU s | peak MiB | load (start, end) | notes |"
        "\n|---|---:|---:|---:|---:|---:|---|---|"
    )
    for row in rows:
        head = f"| {row['kernel']} | {row['n']} | {row['threads']} |"
        if row["skipped"]:
            print(f"{head} | | | | | skipped: {row['skipped']} |")
            continue
        notes = ", ".join(
            f"{k} {row[k]:.3g}" if isinstance(row[k], float) else f"{k} {row[k]}"
            for k in NOTES
            if k in row
        )
        load = f"{row['load_start'][0]:.1f}, {row['load'][0]:.1f}"
        for name, t in row["timings"].items():
            head = f"| {name} | {row['n']} | {row['threads']} |"
            figures = f"{t['seconds']:.4g} | {t['cpu_seconds']:.4g} | {row['peak_mib']:.0f}"
            if row["kernel"] in WHOLE_GRAPH:
                ms = 1e3 * t["seconds"] / row["ricci_edges"]
                cpu_ms = 1e3 * t["cpu_seconds"] / row["ricci_edges"]
                notes_here = f"{ms:.3g} ms per edge wall, {cpu_ms:.3g} CPU; {notes}"
            else:
                notes_here = notes
            print(f"{head} {figures} | {load} | {notes_here} |")
    print(
        "\n| timing | threads | sizes | slope wall | slope CPU | at 1e7 (extrapolated): wall s "
        "| CPU s |\n|---|---:|---|---:|---:|---:|---:|"
    )
    series, cpu_series = series_of(rows), series_of(rows, cpu=True)
    for key, points in series.items():
        sizes = ", ".join(f"{n:g}" for n, _ in sorted(points))
        fitted, fitted_cpu = slope(points), slope(cpu_series[key])
        if fitted is None:
            print(f"| {key[0]} | {key[1]} | {sizes} | one size only | | | |")
            continue
        (n_max, t_max), (_, c_max) = max(points), max(cpu_series[key])
        print(
            f"| {key[0]} | {key[1]} | {sizes} | {fitted:.2f} | {fitted_cpu:.2f} | "
            f"{t_max * (1e7 / n_max) ** fitted:.3g} | {c_max * (1e7 / n_max) ** fitted_cpu:.3g} |"
        )
    if args.plot:
        plot(series, cpu_series, args.plot)


def plot(series: dict, cpu_series: dict, path: str) -> None:
    """Log-log lines of wall and CPU seconds against documents, one colour per timing,
    dashed at 2 threads."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({name for name, _ in series})
    colours = plt.get_cmap("tab20")(np.linspace(0, 1, max(len(names), 2)))
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.5), sharey=True)
    for ax, data, what in ((axes[0], series, "wall"), (axes[1], cpu_series, "process CPU")):
        for (name, threads), points in sorted(data.items()):
            points = sorted(points)
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                marker="o",
                linestyle="-" if threads == 1 else "--",
                color=colours[names.index(name)],
                label=f"{name} ({threads} thr)",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents")
        ax.set_title(f"{what} seconds")
    axes[0].set_ylabel("seconds (Ricci, GRC: whole graph from sampled edges; search: per query)")
    axes[1].legend(fontsize=6, ncol=2, loc="lower right")
    fig.suptitle("Growth with the corpus (shared 2-core machine: wall is an upper bound)")
    fig.tight_layout()
    tmp = Path(path).with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, path)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()

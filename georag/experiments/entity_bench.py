"""Cost of the entity-passage graph and of HippoRAG 2's retrieval over it (the measurement
logic of ``scripts/bench/bench_entity_graph.py``).

* :func:`index_case`: the graph of one corpus and extractor set, built without the encoder
  (extraction and assembly alone), then with it (phrase encoding and synonym edges on top),
  its counts, its folder on disk and the peak RSS; :func:`full_index_case`: the whole index
  of the default retriever from scratch (passage embeddings with no cache, the graph with
  the encoder, the retriever's CSR and BM25). Both are meant to run in a child process of
  their own (:func:`run_child`), so that the peak RSS (``VmHWM``) is the case's alone;
  neither reads nor writes a cache.
* :func:`latency`: B=1 time per query of a fitted :class:`~georag.retrievers.hipporag2.HippoRAG2`
  from held query embeddings (no query encoding), its linking and PPR steps apart, and
  HippoRAG 2's own PPR call (python-igraph's prpack) on the same graph and reset vector,
  with the largest difference between the two PPR results.
* :func:`ppr_solvers`: georag's two PPR paths, the power iteration (``retriever.ppr``) and
  :class:`~georag.geometry.diffusion.PPRSolver` (a sparse LU of the retriever's graph), beside
  prpack on the same reset vectors, at B=1 and batched.
* :func:`throughput`: all queries in one ``retrieve`` call; :func:`encode_latency`: the
  query encoding at B=1, which the B=1 figures leave out.

georag.perf sits below the retrievers in the layer order, so this lives in experiments.
"""

from __future__ import annotations

import copy
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from georag.batch import QueryBatch
from georag.perf.threads import WAIT_POLICY
from georag.perf.timing import Timing, measure
from georag.resources import DEFAULT_MODEL

__all__ = [
    "DEFAULT_EXTRACTORS",
    "SETS",
    "encode_latency",
    "full_index_case",
    "index_case",
    "latency",
    "ppr_solvers",
    "prpack_graph",
    "run_child",
    "throughput",
]

SETS = ("2wikimultihopqa_hipporag", "hotpotqa_dev500", "musique_qa100")
DEFAULT_EXTRACTORS = ("title", "ngram", "spacy", "title,spacy")
_CHILD = "from georag.experiments.entity_bench import _child_main; _child_main()"


def _peak_rss_mib() -> float:
    """This process' peak resident set so far, MiB: Linux's ``VmHWM`` (the high-water mark of
    this process' own memory; ``ru_maxrss`` also counts the parent's resident set at the
    fork that started it), else ``ru_maxrss``."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _clock(fn: Callable[[], object]) -> tuple[object, float, float]:
    """``(fn(), wall seconds, process CPU seconds)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _columns(dataset) -> tuple[list[str], list[str], list[str]]:
    """Ids, titles and texts of a data set's corpus, in its row order (as ``prepare``)."""
    ids = list(dataset.corpus)
    docs = [dataset.corpus[d] for d in ids]
    return ids, [d.title for d in docs], [d.text for d in docs]


def _folder_mib(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def index_case(
    name: str,
    extractors: Sequence[str],
    data_dir: str | None = None,
    *,
    model: str = DEFAULT_MODEL,
    device: str | None = None,
    encode: Callable[[list[str]], object] | None = None,
) -> dict:
    """Index cost of one corpus and extractor set (run it in a child: :func:`run_child`).

    Parameters
    ----------
    name : str
        A data set name or path (:func:`georag.data.datasets.load_dataset`).
    extractors : sequence of str
        The graph's extractors (:class:`~georag.retrieval.entity_graph.EntityGraphConfig`).
    data_dir : str, optional
    model, device : str
        The phrase encoder (:class:`~georag.retrieval.encoder.TextEncoder`; its load and a
        warm-up call are not timed).
    encode : callable, optional
        A stand-in for the encoder's ``encode`` (tests).

    Returns
    -------
    dict
        ``build_s`` / ``build_cpu_s``: the build without the encoder (wall, process CPU);
        ``encode_synonyms_s`` / ``_cpu_s``: the build with it minus the build without;
        ``spacy_load_s`` (spaCy's model, loaded once before both builds); ``save_s`` and
        ``disk_mib`` of ``graph.save``; ``graph.counts()``; peak RSS in MiB after loading
        the data (``rss_loaded_mib``), after the build without the encoder
        (``rss_build_mib``) and at the end (``rss_peak_mib``, the encoder included).
    """
    from georag.data.datasets import load_dataset
    from georag.retrieval.entity_graph import EntityGraphConfig, build_entity_graph

    ids, titles, texts = _columns(load_dataset(name, data_dir=data_dir))
    config = EntityGraphConfig(extractors=tuple(extractors))
    row = {"dataset": name, "extractors": ",".join(config.extractors), "config": asdict(config)}
    row["rss_loaded_mib"] = _peak_rss_mib()
    if "spacy" in config.extractors:
        from georag.retrieval.extractors import load_spacy

        row["spacy_load_s"] = _clock(load_spacy)[1]
    _, row["build_s"], row["build_cpu_s"] = _clock(
        lambda: build_entity_graph(ids, titles, texts, config=config)
    )
    row["rss_build_mib"] = _peak_rss_mib()
    if encode is None:
        from georag.retrieval.encoder import TextEncoder

        encoder = TextEncoder(model, device=device, show_progress=False)
        encoder.encode(["warm-up"])
        encode = encoder.encode
    graph, wall, cpu = _clock(
        lambda: build_entity_graph(ids, titles, texts, config=config, encode=encode)
    )
    row["build_encoder_s"], row["build_encoder_cpu_s"] = wall, cpu
    row["encode_synonyms_s"] = wall - row["build_s"]
    row["encode_synonyms_cpu_s"] = cpu - row["build_cpu_s"]
    with tempfile.TemporaryDirectory() as tmp:
        folder, row["save_s"], _ = _clock(lambda: graph.save(Path(tmp) / "graph"))
        row["disk_mib"] = _folder_mib(folder)
    row.update(graph.counts())
    row["rss_peak_mib"] = _peak_rss_mib()
    return row


def full_index_case(
    name: str,
    data_dir: str | None = None,
    *,
    method: str | None = None,
    options: dict | None = None,
    model: str = DEFAULT_MODEL,
    device: str | None = None,
) -> dict:
    """The default retriever's whole index of a corpus from scratch (run it in a child).

    Passage embeddings encoded by :func:`~georag.retrieval.candidates.corpus_embeddings`
    into a fresh, empty cache folder; the graph of the retriever's options built with the
    encoder; the retriever fitted on both (``fit_graph``: CSR, specificity, BM25). The
    encoder's load is timed apart (``model_load_s``); ``total_s`` is the three steps.

    Parameters
    ----------
    name, data_dir
        As :func:`index_case`.
    method, options
        The retriever (default: :data:`georag.experiments.entity_multihop.DEFAULT`).
    model, device : str
        The encoder.
    """
    from georag.data.datasets import load_dataset
    from georag.experiments.entity_multihop import DEFAULT
    from georag.rerank.registry import make_reranker
    from georag.retrieval.candidates import FirstStageConfig, corpus_embeddings, corpus_units
    from georag.retrieval.encoder import TextEncoder
    from georag.retrieval.entity_graph import build_entity_graph

    method = method or DEFAULT[0]
    options = DEFAULT[1] if options is None else options
    dataset = load_dataset(name, data_dir=data_dir)
    ids, titles, texts = _columns(dataset)
    units = corpus_units(dataset, FirstStageConfig())
    encoder, load_s, _ = _clock(lambda: TextEncoder(model, device=device, show_progress=False))
    row = {"dataset": name, "method": method, "options": options, "passages": len(ids)}
    row["model"], row["model_load_s"] = model, load_s
    with tempfile.TemporaryDirectory() as cache:
        (embeddings, hit), row["encode_passages_s"], row["encode_passages_cpu_s"] = _clock(
            lambda: corpus_embeddings(units.texts, encoder, cache_dir=cache)
        )
    if hit:
        raise RuntimeError("full index: the fresh embedding cache answered a hit")
    retriever = make_reranker(method, {method: options})
    graph, row["graph_s"], row["graph_cpu_s"] = _clock(
        lambda: build_entity_graph(
            ids, titles, texts, config=retriever.config.graph_config(), encode=encoder.encode
        )
    )
    _, row["fit_s"], _ = _clock(lambda: retriever.fit_graph(embeddings, graph, doc_ids=ids))
    row["total_s"] = row["encode_passages_s"] + row["graph_s"] + row["fit_s"]
    row["config"] = asdict(retriever.config)
    row.update(graph.counts())
    row["rss_peak_mib"] = _peak_rss_mib()
    return row


_KINDS = {"index": index_case, "full_index": full_index_case}


def run_child(kind: str, *, threads: int, timeout: float | None = None, **kwargs) -> dict:
    """Run ``index_case`` (``kind="index"``) or ``full_index_case`` (``"full_index"``) in a
    fresh ``python -c`` process on ``threads`` torch threads (the thread policy applied
    there before torch loads). Returns its dict, with ``child_wall_s`` (the process, imports
    included); on failure ``{"error": last line of its stderr}``.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind: need one of {sorted(_KINDS)}, got {kind!r}")
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), GEORAG_THREADS=str(threads))
    env.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)  # the thread policy's, set before torch loads
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    request = json.dumps({"kind": kind, "threads": threads, "kwargs": kwargs})
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, request],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s (killed)"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return {"error": tail[-1]}
    return {
        **json.loads(done.stdout.strip().splitlines()[-1]),
        "child_wall_s": time.perf_counter() - started,
    }


def _child_main() -> None:
    """Entry point of :func:`run_child`'s process: one JSON request in argv, one JSON line out."""
    from georag.perf.threads import apply_thread_policy

    request = json.loads(sys.argv[1])
    apply_thread_policy(request["threads"])
    result = _KINDS[request["kind"]](**request["kwargs"])
    print(json.dumps(result, default=str))


def prpack_graph(csr) -> object:
    """The ``igraph.Graph`` HippoRAG 2 runs PPR on, from a symmetric sparse CSR matrix: its
    upper triangle (diagonal included) as undirected edges with attribute ``weight``."""
    import igraph

    crow, col = csr.crow_indices().numpy(), csr.col_indices().numpy()
    values = csr.values().double().numpy()
    n = csr.shape[0]
    rows = np.repeat(np.arange(n), np.diff(crow))
    upper = rows <= col
    graph = igraph.Graph(n=n, edges=np.stack([rows[upper], col[upper]], 1).tolist(), directed=False)
    graph.es["weight"] = values[upper].tolist()
    return graph


def latency(
    retriever, queries: QueryBatch, *, num_queries: int = 200, warmup: int = 3, top_k: int = 10
) -> dict:
    """B=1 time per query of a fitted HippoRAG 2 retriever, from held query embeddings.

    Per query, in one loop (after ``warmup`` untimed passes over the first queries):
    ``retrieve`` (whole retrieval, top ``top_k``), ``reset`` (dense scores, linking and the
    reset vector), ``ppr`` (``retriever.ppr`` alone) and ``prpack`` (igraph's
    ``personalized_pagerank(vertices=range(n), damping, directed=False, weights='weight',
    reset=list, implementation='prpack')`` on the same reset vector, given as a list built
    untimed) on a graph built once from the retriever's CSR (``igraph_build_s``).

    Parameters
    ----------
    retriever : HippoRAG2
        Fitted (``fit`` or ``fit_graph``).
    queries : QueryBatch
        With embeddings; the first ``num_queries`` are timed.
    num_queries, warmup, top_k : int

    Returns
    -------
    dict
        Per step :meth:`~georag.perf.timing.Timing.as_dict` (ms; wall and process CPU),
        ``max_abs_diff`` (largest ``|georag PPR - prpack|`` over the timed queries and all
        nodes, in the retriever's dtype ``ppr_dtype``), ``max_abs_diff_float64`` (the same
        with ``retriever.ppr`` on a float64 copy of its graph and reset vector: the method
        apart from the float32 rounding), graph sizes.
    """
    n = min(num_queries, queries.batch_size)
    if n < 1:
        raise ValueError("queries: none to time")
    graph, build_s, _ = _clock(lambda: prpack_graph(retriever.csr))
    exact = copy.copy(retriever)  # the same PPR step on a float64 copy of the graph (untimed)
    exact.csr = retriever.csr.to(torch.float64)
    damping = retriever.config.damping
    steps = ("retrieve", "reset", "ppr", "prpack")
    wall = {s: [] for s in steps}
    cpu = {s: [] for s in steps}
    worst, worst64, skipped = 0.0, 0.0, 0
    for i in range(-min(warmup, n), n):
        q = queries.slice(i % n, i % n + 1)
        _, w_all, c_all = _clock(lambda q=q: retriever.retrieve(q, top_k=top_k))
        reset, w_reset, c_reset = _clock(lambda q=q: retriever.reset(q, retriever.dense_scores(q)))
        ours, w_ppr, c_ppr = _clock(lambda r=reset: retriever.ppr(r))
        vector = reset[0].double().tolist()
        if not sum(vector) > 0:  # prpack needs some reset mass
            skipped += i >= 0
            continue
        theirs, w_pr, c_pr = _clock(lambda v=vector: _prpack(graph, damping, v))
        if i < 0:
            continue
        for step, w, c in zip(steps, (w_all, w_reset, w_ppr, w_pr), (c_all, c_reset, c_ppr, c_pr)):
            wall[step].append(1e3 * w)
            cpu[step].append(1e3 * c)
        theirs = np.asarray(theirs)
        worst = max(worst, float(np.abs(ours[0].double().numpy() - theirs).max()))
        ours64 = exact.ppr(reset.to(torch.float64))[0].numpy()
        worst64 = max(worst64, float(np.abs(ours64 - theirs).max()))
    if not wall["retrieve"]:
        raise ValueError("queries: no timed query had reset mass")
    out = {s: Timing(tuple(wall[s]), tuple(cpu[s])).as_dict() for s in steps}
    return {
        **out,
        "queries": len(wall["retrieve"]),
        "skipped_no_reset_mass": skipped,
        "warmup": min(warmup, n),
        "top_k": top_k,
        "nodes": graph.vcount(),
        "igraph_edges": graph.ecount(),
        "igraph_build_s": build_s,
        "ppr_dtype": str(retriever.csr.dtype),
        "max_abs_diff": worst,
        "max_abs_diff_float64": worst64,
    }


def _prpack(graph, damping: float, reset: list[float]) -> list[float]:
    """HippoRAG 2's PPR call on ``graph`` (:func:`prpack_graph`) with one reset vector."""
    return graph.personalized_pagerank(
        vertices=range(graph.vcount()),
        damping=damping,
        directed=False,
        weights="weight",
        reset=reset,
        implementation="prpack",
    )


def ppr_solvers(
    retriever, queries: QueryBatch, *, num_queries: int = 200, batch: int = 64, repeats: int = 5
) -> dict:
    """georag's PPR paths beside prpack, on a fitted HippoRAG 2 retriever's graph and resets.

    The reset vectors of the first ``num_queries`` questions with reset mass are built once,
    untimed (and prpack's lists from them). B=1, per query in one loop after one untimed
    pass over the first three: ``power`` (``retriever.ppr``, the power iteration), ``solver``
    (:meth:`~georag.geometry.diffusion.PPRSolver.solve` of a solver built once from
    ``retriever.csr`` and the damping, ``setup_s``) and ``prpack`` (:func:`prpack_graph`'s
    graph, ``implementation='prpack'``). Batched: the first ``batch`` resets in one call of
    each georag path (prpack: one call per vector), ``repeats`` times after a warm-up.

    Returns
    -------
    dict
        ``b1``: per path :meth:`~georag.perf.timing.Timing.as_dict` (ms per query);
        ``batched``: per path ``queries_per_s`` (from the median call); ``max_abs_diff``:
        the largest ``|solver - prpack|`` and ``|power - prpack|`` over the B=1 queries and
        all nodes, float64 scores (the solver on float64 resets, the power iteration on a
        float64 copy of the graph), and ``|solver - prpack|`` in the retriever's dtype.
    """
    from georag.geometry.diffusion import PPRSolver

    damping = retriever.config.damping
    graph = prpack_graph(retriever.csr)
    solver, setup_s, _ = _clock(lambda: PPRSolver(retriever.csr, damping))
    exact = copy.copy(retriever)
    exact.csr = retriever.csr.to(torch.float64)
    resets = []
    for i in range(queries.batch_size):
        reset = retriever.reset(
            queries.slice(i, i + 1), retriever.dense_scores(queries.slice(i, i + 1))
        )
        if float(reset.sum()) > 0:  # prpack needs some reset mass
            resets.append(reset)
        if len(resets) == max(num_queries, batch):
            break
    if not resets:
        raise ValueError("queries: none has reset mass")
    lists = [r[0].double().tolist() for r in resets]
    paths = {
        "power": lambda i: retriever.ppr(resets[i])[0],
        "solver": lambda i: solver.solve(resets[i][0]),
        "prpack": lambda i: _prpack(graph, damping, lists[i]),
    }
    n = min(num_queries, len(resets))
    wall = {k: [] for k in paths}
    cpu = {k: [] for k in paths}
    for i in range(-min(3, n), n):
        for key, fn in paths.items():
            _, w, c = _clock(lambda fn=fn, i=i: fn(i % n))
            if i >= 0:
                wall[key].append(1e3 * w)
                cpu[key].append(1e3 * c)
    worst = {"solver": 0.0, "power": 0.0, "solver_" + str(retriever.csr.dtype): 0.0}
    for i in range(n):
        theirs = np.asarray(_prpack(graph, damping, lists[i]))
        ours = {
            "solver": solver.solve(resets[i][0].double()),
            "power": exact.ppr(resets[i].double())[0],
            "solver_" + str(retriever.csr.dtype): solver.solve(resets[i][0]),
        }
        for key, x in ours.items():
            worst[key] = max(worst[key], float(np.abs(x.double().numpy() - theirs).max()))
    block = torch.cat(resets[:batch])
    b = block.shape[0]
    calls = {
        "power": lambda i: retriever.ppr(block),
        "solver": lambda i: solver.solve(block.T).T,
        "prpack": lambda i: [_prpack(graph, damping, v) for v in lists[:b]],
    }
    batched = {
        key: {"queries_per_s": 1e3 / measure(fn, repeats=repeats, per=b).median}
        for key, fn in calls.items()
    }
    return {
        "b1": {k: Timing(tuple(wall[k]), tuple(cpu[k])).as_dict() for k in paths},
        "queries": n,
        "batch": b,
        "repeats": repeats,
        "setup_s": setup_s,
        "lu_fill": solver.fill,
        "nodes": graph.vcount(),
        "igraph_edges": graph.ecount(),
        "batched": batched,
        "max_abs_diff": worst,
    }


def throughput(retriever, queries: QueryBatch, *, repeats: int = 3, top_k: int = 10) -> dict:
    """All ``queries`` in one ``retrieve(queries, top_k)`` call, ``repeats`` times after one
    warm-up: ``queries_per_s`` (from the median call) and the ms per query."""
    b = queries.batch_size
    timing = measure(lambda i: retriever.retrieve(queries, top_k=top_k), repeats=repeats, per=b)
    return {
        "queries": b,
        "repeats": repeats,
        "top_k": top_k,
        "queries_per_s": 1e3 / timing.median,
        "ms_per_query": timing.as_dict(),
    }


def encode_latency(encoder, texts: Sequence[str], *, num: int = 50, warmup: int = 2) -> dict:
    """Query encoding at B=1: ``encoder.encode([text])`` over the first ``num`` texts after
    ``warmup`` calls; :meth:`~georag.perf.timing.Timing.as_dict` in ms."""
    texts = list(texts)[:num]
    if not texts:
        raise ValueError("texts: none to encode")
    timing = measure(lambda i: encoder.encode([texts[i]]), repeats=len(texts), warmup=warmup)
    return timing.as_dict()

"""Corpus-level retrievers in the evaluation harness: ISO-RAG and whole-graph PPR.

These do not rerank a candidate pool; they walk the corpus passage graph from seed
passages. ``georag eval --methods iso,ppr_global`` runs them beside the rerankers, on the
same corpus embeddings, and reports them in the same table.
"""

from __future__ import annotations

import torch

from georag.data.beir import BeirDataset, default_cache_dir
from georag.eval.timing import median_single_ms, timed
from georag.models.poincare import fixed_projection
from georag.rerank.iso_rag import GlobalPPR, IsoRag, IsoRagConfig, output_to_run
from georag.retrieval.candidates import FirstStage
from georag.retrieval.passage_graph import build_passage_graph

__all__ = ["CORPUS_METHODS", "fixed_radius", "run_corpus_method"]

CORPUS_METHODS = ("iso", "ppr_global")


def fixed_radius(embeddings: torch.Tensor) -> torch.Tensor:
    """Hyperbolic radius (c = 1) of the fixed Poincare projection of each embedding, (N,)."""
    import geoopt

    return geoopt.PoincareBall(c=1.0).dist0(fixed_projection(embeddings)).clamp_min(1e-6)


def run_corpus_method(
    name: str,
    dataset: BeirDataset,
    stage: FirstStage,
    query_embeddings: torch.Tensor,
    *,
    top_k: int = 100,
    latency_samples: int = 20,
) -> tuple[dict, float, float]:
    """Run ``iso`` (ISO-RAG, defaults of :class:`IsoRagConfig`) or ``ppr_global`` (HippoRAG-style
    PPR over the whole passage graph from the same seeds, damping 0.5).

    Returns
    -------
    run : dict
        ``{query_id: {doc_id: score}}``.
    queries_per_s : float
        Batched throughput over all queries.
    ms_per_query : float
        Median over single-query calls.
    """
    if name not in CORPUS_METHODS:
        raise ValueError(f"methods: {name!r} is not a corpus method {CORPUS_METHODS}")
    if stage.config.chunk_window is not None:
        raise ValueError(f"methods: {name!r} needs whole passages, not chunks")
    docs = [dataset.corpus[d] for d in stage.units.doc_ids]
    graph = build_passage_graph(
        stage.embeddings,
        [d.title for d in docs],
        [d.text for d in docs],
        cache_dir=default_cache_dir() / "graphs",
    )
    if name == "iso":
        retriever = IsoRag(stage.embeddings, graph, fixed_radius(stage.embeddings), IsoRagConfig())
    else:
        retriever = GlobalPPR(stage.embeddings, graph, damping=0.5, lam=1.0)
    query_ids = list(dataset.queries)
    output, seconds = timed(lambda: retriever.retrieve(query_embeddings, top_k=top_k))
    ms = median_single_ms(
        lambda i: retriever.retrieve(query_embeddings[i : i + 1], top_k=top_k),
        len(query_ids),
        samples=latency_samples,
    )
    run = output_to_run(output, query_ids, list(stage.units.doc_ids))
    return run, len(query_ids) / max(seconds, 1e-12), ms

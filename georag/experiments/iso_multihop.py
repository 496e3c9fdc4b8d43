"""The ISO-RAG multi-hop table: Recall@2 / Recall@5 of supporting paragraphs, every method.

Data sets (pooled corpora, see georag.data.multihop): hotpotqa_dev500 (IRCoT), musique_qa100
(KAG) and musique_train100 (HippoRAG). The trained Poincare head is trained on
musique_train100 only, so its rows on that set are marked "(train)" and are not results.

Methods, all from the same sources (top-s cosine) and the same passage graph:
  dense            top-k by cosine (all-MiniLM-L6-v2)
  ppr_global       HippoRAG-style PPR over the whole unpruned graph, damping 0.5, ranked by PPR
  ppr_global+mix   the same PPR, fused with cosine like ISO-RAG (lam)
  iso_rag          ISO-RAG, fixed Poincare projection (volume = hyperbolic radius)
  iso_rag-noprune  ISO-RAG without pruning (threshold = inf)
  iso_rag-notopo   ISO-RAG without topological edges
  iso_rag-degvol   ablation: classic Cheeger volume (degree) instead of the hyperbolic radius
  iso_rag-random   ablation: as many edges removed as ISO-RAG removes, chosen at random
  iso_rag-trained  ISO-RAG with the trained Cheeger-aware Poincare head

Command lines: ``scripts/quality/quality_iso.py`` (the table), ``scripts/bench/bench_iso.py``
(latency), ``scripts/quality/make_results.py`` (the multi-hop table of docs/results.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from georag.data.beir import BeirDataset
from georag.data.multihop import load_multihop
from georag.eval.metrics import evaluate
from georag.models.poincare import PoincareHead
from georag.perf.timing import timed
from georag.resources import default_cache_dir
from georag.retrieval.candidates import FirstStage, FirstStageConfig, query_batch
from georag.retrieval.encoder import TextEncoder
from georag.retrieval.passage_graph import PassageGraph, build_passage_graph
from georag.retrievers.base import output_to_run
from georag.retrievers.dense import DenseRetriever
from georag.retrievers.iso import IsoRag, IsoRagConfig, fixed_radius, random_prune
from georag.retrievers.ppr_global import GlobalPPR, GlobalPPRConfig

__all__ = [
    "METRICS",
    "DATASETS",
    "TRAIN_SET",
    "Prepared",
    "prepare",
    "head_radius",
    "RandomPrune",
    "methods",
    "dataset_rows",
    "results_rows",
]

METRICS = ("recall@2", "recall@5")
DATASETS = {
    "hotpotqa_dev500": "hotpotqa_dev500_ircot/dev_subsampled.jsonl",
    "musique_qa100": "musique_small/musique_qa100_kag.json",
    "musique_train100": "musique_small/musique_train100_hipporag.json",
}
TRAIN_SET = "musique_train100"


@dataclasses.dataclass
class Prepared:
    """A corpus with embeddings, graph and encoded queries."""

    dataset: BeirDataset
    doc_ids: list[str]
    embeddings: torch.Tensor
    graph: PassageGraph
    query_ids: list[str]
    queries: torch.Tensor


def prepare(name: str, data_dir: Path, encoder: TextEncoder, cache: Path) -> Prepared:
    """Load, embed (cached) and build the passage graph (cached) of one data set.

    Parameters
    ----------
    name : str
        A key of :data:`DATASETS`.
    data_dir : Path
        Holds the files of :data:`DATASETS`.
    encoder : TextEncoder
    cache : Path
        Its ``embeddings/`` and ``graphs/`` folders keep what was computed.
    """
    dataset = load_multihop(data_dir / DATASETS[name], name=name)
    stage = FirstStage(
        dataset,
        FirstStageConfig(first_stage="dense", top_m=10),
        encoder=encoder,
        cache_dir=cache / "embeddings",
    )
    docs = [dataset.corpus[d] for d in stage.units.doc_ids]
    graph = build_passage_graph(
        stage.embeddings,
        [d.title for d in docs],
        [d.text for d in docs],
        cache_dir=cache / "graphs",
    )
    queries = query_batch(dataset, encoder, cache_dir=cache / "embeddings")
    return Prepared(
        dataset, list(stage.units.doc_ids), stage.embeddings, graph, queries.ids, queries.embeddings
    )


def head_radius(head: PoincareHead, embeddings: torch.Tensor) -> torch.Tensor:
    """The trained head's hyperbolic radius of each passage, shape (N,), at least 1e-6
    (``embeddings``: (N, D))."""
    with torch.no_grad():
        return head.radius(embeddings).clamp_min(1e-6)


class RandomPrune(IsoRag):
    """Ablation: remove as many local edges as ISO-RAG would, chosen uniformly at random."""

    name = "iso_rag-random"

    def __init__(self, config: IsoRagConfig, *, seed: int = 0) -> None:
        super().__init__(config)
        self.seed = seed

    def prune(self, weights: torch.Tensor, scores: torch.Tensor):
        _, removed = super().prune(weights, scores)
        return random_prune(weights, removed, seed=self.seed)


def methods(
    p: Prepared, config: IsoRagConfig, radius: torch.Tensor, trained: torch.Tensor | None
) -> list[tuple[str, object]]:
    """Every row's fitted retriever, ``(label, retriever)`` in table order (module
    docstring); ``radius`` and ``trained`` (N,) are the fixed and the trained head's
    volumes (no ``iso_rag-trained`` row without ``trained``)."""

    def iso(cfg: IsoRagConfig, r: torch.Tensor = radius, cls: type = IsoRag) -> IsoRag:
        return cls(cfg).fit_graph(p.embeddings, p.graph, r)

    def ppr(cfg: GlobalPPRConfig) -> GlobalPPR:
        return GlobalPPR(cfg).fit_graph(p.embeddings, p.graph)

    out = [
        ("dense", DenseRetriever().fit_embeddings(p.embeddings)),
        (
            "ppr_global",
            ppr(GlobalPPRConfig(num_sources=config.num_sources, topo_weight=config.topo_weight)),
        ),
        (
            "ppr_global+mix",
            ppr(
                GlobalPPRConfig(
                    num_sources=config.num_sources,
                    damping=config.damping,
                    lam=config.lam,
                    topo_weight=config.topo_weight,
                )
            ),
        ),
        ("iso_rag", iso(config)),
        ("iso_rag-noprune", iso(dataclasses.replace(config, prune_threshold=float("inf")))),
        ("iso_rag-notopo", iso(dataclasses.replace(config, topological=False))),
        ("iso_rag-degvol", iso(dataclasses.replace(config, volume="degree"))),
        ("iso_rag-random", iso(config, cls=RandomPrune)),
    ]
    if trained is not None:
        out.append(("iso_rag-trained", iso(config, trained)))
    return out


def dataset_rows(
    name: str,
    data_dir: Path,
    config: IsoRagConfig,
    head: PoincareHead | None,
    encoder: TextEncoder,
    cache: Path,
) -> tuple[list[dict], dict]:
    """Every method and baseline on one multi-hop set.

    Returns
    -------
    rows : list of dict
        One per method: ``dataset``, ``method`` (marked ``(train)`` on :data:`TRAIN_SET`),
        ``recall@2``, ``recall@5``, mean ``nodes``, ``edges`` and ``edges_removed`` of the
        local graphs, ``ms_per_query`` (the batched search).
    counts : dict
        Passages, questions and the graph's edge counts.
    """
    p = prepare(name, data_dir, encoder, cache)
    trained = head_radius(head, p.embeddings) if head is not None else None
    rows = []
    for label, method in methods(p, config, fixed_radius(p.embeddings), trained):
        out, seconds = timed(lambda m=method: m.search(p.queries, top_k=10))
        values = evaluate(output_to_run(out, p.query_ids, p.doc_ids), p.dataset.qrels, METRICS)
        edges = out.edges.double().mean().item()
        rows.append(
            {
                "dataset": name,
                "method": label + (" (train)" if name == TRAIN_SET else ""),
                "recall@2": values["recall@2"],
                "recall@5": values["recall@5"],
                "nodes": out.nodes.double().mean().item(),
                "edges": edges,
                "edges_removed": out.removed.double().mean().item(),
                "ms_per_query": 1e3 * seconds / len(p.query_ids),
            }
        )
    return rows, {"passages": len(p.doc_ids), "questions": len(p.query_ids), **p.graph.counts()}


def results_rows(data_dir: str | Path, *, head: Path | None = None) -> list[dict]:
    """Rows of every multi-hop set at the default config (:func:`dataset_rows`; the
    multi-hop table of docs/results.md)."""
    encoder = TextEncoder(show_progress=False)
    model = PoincareHead.load(head) if head else None
    rows = []
    for name in DATASETS:
        rows += dataset_rows(
            name, Path(data_dir), IsoRagConfig(), model, encoder, default_cache_dir()
        )[0]
    return rows

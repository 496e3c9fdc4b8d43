"""Retrieval quality of the diffusion and Maniscope rerankers against the dense first stage.

For each data set: all-MiniLM-L6-v2 dense retrieval (faiss flat, cosine) gives a pool of
the top M candidates (M = 50 and M = 100); the dense order, DiffusionReranker and
Maniscope rerank that same pool (each reranker uses the whole pool: ``top_m = M``, other
options at the paper defaults). NDCG@10, MRR@10 and Recall@20 are means over every judged
query (pytrec_eval through georag.eval.metrics), each with its 95% bootstrap interval; the
marks and p-values compare each reranker's per-query values with the dense order (paired
randomization test, Holm-corrected across the rerankers; georag.eval.stats).

The "easy" protocol is the Maniscope paper's: per query, up to 3 relevant documents
plus 7 documents drawn at random (fixed seed) from those not judged relevant, scored by
the same dense model. It is printed beside the hard pools to show the gap.

Usage: ``python scripts/quality/quality_graph.py [--datasets scifact cranfield cisi]``
"""

from __future__ import annotations

import numpy as np
import torch

from georag.batch import CandidateBatch
from georag.data.beir import BeirDataset, load_beir
from georag.eval.metrics import per_query
from georag.eval.report import SIGNIFICANCE, markdown_table
from georag.eval.stats import summarize
from georag.perf.bench import bench_parser, start
from georag.rerank.base import IdentityReranker, PoolReranker
from georag.rerank.diffusion import DiffusionConfig, DiffusionReranker
from georag.rerank.maniscope import Maniscope, ManiscopeConfig
from georag.retrieval.candidates import FirstStage, FirstStageConfig
from georag.retrieval.encoder import TextEncoder

METRICS = ("ndcg@10", "mrr@10", "recall@20")
EASY_RELEVANT, EASY_NEGATIVES = 3, 7


def easy_pool(
    dataset: BeirDataset, stage: FirstStage, query_emb: torch.Tensor, seed: int
) -> CandidateBatch:
    """Maniscope's protocol: up to 3 relevant + 7 random non-relevant documents per query."""
    rng = np.random.default_rng(seed)
    row_of = {doc_id: i for i, doc_id in enumerate(stage.units.doc_ids)}
    all_docs = np.array(stage.units.doc_ids)
    width = EASY_RELEVANT + EASY_NEGATIVES
    query_ids = list(dataset.queries)
    rows = np.zeros((len(query_ids), width), dtype=np.int64)
    mask = np.zeros((len(query_ids), width), dtype=bool)
    doc_ids = []
    for i, qid in enumerate(query_ids):
        relevant = sorted(d for d, gain in dataset.qrels[qid].items() if gain > 0)
        relevant = [relevant[j] for j in rng.permutation(len(relevant))[:EASY_RELEVANT]]
        positive = {d for d, gain in dataset.qrels[qid].items() if gain > 0}
        negatives: list[str] = []
        while len(negatives) < EASY_NEGATIVES:
            doc = str(all_docs[rng.integers(len(all_docs))])
            if doc not in positive and doc not in negatives:
                negatives.append(doc)
        chosen = relevant + negatives
        rows[i, : len(chosen)] = [row_of[d] for d in chosen]
        mask[i, : len(chosen)] = True
        doc_ids.append(chosen + [""] * (width - len(chosen)))
    mask_t = torch.tensor(mask)
    cands = stage.embeddings[torch.tensor(rows)]
    scores = torch.bmm(cands, query_emb.unsqueeze(2)).squeeze(2).masked_fill(~mask_t, 0.0)
    return CandidateBatch(
        query=query_emb,
        cands=cands,
        scores=scores,
        mask=mask_t,
        query_ids=query_ids,
        doc_ids=doc_ids,
    )


def score(reranker: PoolReranker, batch: CandidateBatch, dataset: BeirDataset) -> dict[str, dict]:
    """Per-query values ``{metric: {query_id: value}}``."""
    return per_query(reranker(batch).to_run(batch), dataset.qrels, METRICS)


def print_table(title: str, rows: list[tuple[str, dict[str, dict]]]) -> list[dict]:
    """Means with 95% intervals, marks and the NDCG@10 p-value against the first row."""
    print(f"\n{title}\n")
    table = summarize(dict(rows), METRICS, baseline=rows[0][0])
    print(markdown_table(table, ("method", *METRICS, "ndcg@10_p_value")), end="")
    return table


def run_dataset(name: str, data_dir: str | None, encoder: TextEncoder, pools: list[int], seed: int):
    """Print the tables of one data set and return them (``{pool: summary rows}``)."""
    dataset = load_beir(name, data_dir=data_dir, download=False)
    query_ids = list(dataset.queries)
    query_emb = encoder.encode([dataset.queries[q] for q in query_ids]).float()
    print(f"\n=== {name}: {len(dataset.corpus)} documents, {len(query_ids)} judged queries")
    stage, tables = None, {}
    for m in pools:
        stage = FirstStage(dataset, FirstStageConfig(first_stage="dense", top_m=m), encoder=encoder)
        batch = stage.retrieve(
            query_ids, [dataset.queries[q] for q in query_ids], query_embeddings=query_emb
        )
        methods: list[tuple[str, PoolReranker]] = [
            ("dense", IdentityReranker()),
            ("diffusion", DiffusionReranker(DiffusionConfig(top_m=m))),
            ("maniscope", Maniscope(ManiscopeConfig(top_m=m))),
        ]
        rows = [(label, score(method, batch, dataset)) for label, method in methods]
        tables[f"dense top-{m}"] = print_table(f"[{name}] hard pool: dense top-{m}", rows)
    easy = easy_pool(dataset, stage, query_emb, seed)
    methods = [
        ("dense", IdentityReranker()),
        ("diffusion", DiffusionReranker(DiffusionConfig(top_m=10))),
        ("maniscope", Maniscope(ManiscopeConfig(top_m=10))),
    ]
    rows = [(label, score(method, easy, dataset)) for label, method in methods]
    tables["easy"] = print_table(
        f"[{name}] easy pool (Maniscope paper's protocol): <= {EASY_RELEVANT} relevant + "
        f"{EASY_NEGATIVES} random negatives, seed {seed}",
        rows,
    )
    return tables


def main() -> None:
    parser = bench_parser(__doc__, repeats=None)
    parser.add_argument("--datasets", nargs="+", default=["scifact", "cranfield", "cisi"])
    parser.add_argument("--pools", nargs="+", type=int, default=[50, 100])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    bench = start(args, config={"pools": args.pools, "seed": args.seed, "metrics": METRICS})
    encoder = TextEncoder(show_progress=False, device=bench.device)
    print(
        f"encoder {encoder.name} (D={encoder.dim}); metrics {', '.join(METRICS)} "
        "(means over judged queries); rerankers use the whole pool"
    )
    print(SIGNIFICANCE)
    results = {
        name: run_dataset(name, args.data_dir, encoder, args.pools, args.seed)
        for name in args.datasets
    }
    bench.finish(results)


if __name__ == "__main__":
    main()

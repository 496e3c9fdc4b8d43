"""A plain dense-retrieval reference: sentence-transformers + numpy + pytrec_eval, no georag.

Usage: python scripts/reference/reference_dense.py ../shared/data/scifact [--model FOLDER]
(or: scifact --data-dir DIR)

What it computes uses no georag; only its command line is the harness's.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np
import pytrec_eval
from sentence_transformers import SentenceTransformer


def load(folder: Path, split: str = "test"):
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").open()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (folder / "queries.jsonl").open())}
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / f"{split}.tsv").open() as handle:
        for row in list(csv.reader(handle, delimiter="\t"))[1:]:
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return corpus, {q: queries[q] for q in qrels}, qrels


def score(run, qrels) -> dict[str, float]:
    """NDCG@10, Recall@100 and MRR@10 averaged over all judged queries."""
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_100"}).evaluate(run)
    top10 = {q: dict(sorted(d.items(), key=lambda x: -x[1])[:10]) for q, d in run.items()}
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    n = len(qrels)
    return {
        "ndcg@10": sum(full[q]["ndcg_cut_10"] for q in full) / n,
        "recall@100": sum(full[q]["recall_100"] for q in full) / n,
        "mrr@10": sum(rr[q]["recip_rank"] for q in rr) / n,
    }


def run_dense(folder: Path, model_path: str, k: int = 100) -> dict[str, float]:
    corpus, queries, qrels = load(folder)
    model = SentenceTransformer(model_path, device="cpu")
    texts = [(d.get("title", "") + " " + d["text"]).strip() for d in corpus]
    docs = model.encode(texts, batch_size=64, normalize_embeddings=True)
    qids = list(queries)
    q = model.encode([queries[i] for i in qids], normalize_embeddings=True)
    sims = q @ docs.T
    top = np.argsort(-sims, axis=1)[:, :k]
    run = {qid: {corpus[j]["_id"]: float(sims[i, j]) for j in top[i]} for i, qid in enumerate(qids)}
    return score(run, qrels)


def dataset_folder(args: argparse.Namespace) -> Path:
    """``args.dataset`` as a folder, else as a name under the data folder (``--data-dir``)."""
    from georag.perf.bench import data_root

    folder = Path(args.dataset)
    return folder if folder.is_dir() else data_root(args) / args.dataset


def main() -> None:
    from georag.perf.bench import bench_parser, start
    from georag.resources import DEFAULT_MODEL, resolve_model_path

    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("dataset", help="BEIR folder, or its name under --data-dir")
    parser.add_argument(
        "--model",
        default=resolve_model_path(DEFAULT_MODEL),
        help="sentence-transformers folder (default: the packaged all-MiniLM-L6-v2)",
    )
    args = parser.parse_args()
    bench = start(args, config={"model": args.model}, device="cpu")
    scores = run_dense(dataset_folder(args), args.model)
    print(scores)
    bench.finish(scores)


if __name__ == "__main__":
    main()

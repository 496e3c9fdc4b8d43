"""HyTE-H quality: BM25 alone, untrained and trained HyTE-H at several alpha, dense MiniLM.

Usage:
    python -m train fit --config configs/train/hyte_h.yaml       # writes runs/hyte_h/projection.pt
    python scripts/quality/quality_hyte.py --data-dir ../shared/data \
        --weights runs/hyte_h/projection.pt

Per data set (scifact, cranfield, cisi; test qrels): chunks of W=300 / O=60 words, BM25
(k1=1.2, b=0.75, lowercase whitespace tokens) top-M=50, then the hybrid score
alpha * BM25/max + (1 - alpha) * sigmoid(<p_d, p_q>_L + 2). A document scores as its best
chunk. Also: exhaustive Lorentz nearest neighbours (no BM25 stage, as in the paper's
benchmark) and dense all-MiniLM-L6-v2 cosine (reference). Then the radial check of the
paper's Table 3: r = arcosh(t / sqrt(K)) of general and specific words.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from georag.batch import scores_to_run
from georag.data.beir import load_beir
from georag.eval.metrics import evaluate
from georag.geometry.hyperbolic import lorentz_gram, radial_coordinate
from georag.models.hyte import HyTEEncoder
from georag.perf.bench import bench_parser, start
from georag.perf.timing import timed
from georag.rerank.hyte import build_index
from georag.resources import DEFAULT_MODEL
from georag.retrieval.candidates import corpus_embeddings
from georag.retrieval.encoder import TextEncoder
from georag.retrieval.lorentz_index import LorentzIndex

METRICS = ("ndcg@10", "recall@100", "mrr@10")
ALPHAS = (0.0, 0.3, 0.5, 0.7, 1.0)
# general -> specific word pairs for the radial check (Table 3 of the paper)
PAIRS = [
    ("animal", "dog"),
    ("science", "biology"),
    ("disease", "diabetes"),
    ("food", "apple"),
    ("cell", "neuron"),
    ("vehicle", "bicycle"),
]


def _doc_run(
    qids: list[str], scores: torch.Tensor, rows: torch.Tensor, doc_of: list[str]
) -> dict[str, dict[str, float]]:
    """Hits (rows of ``doc_of``, -1 for none) -> document run; a document scores as its best
    chunk (:func:`georag.batch.scores_to_run`)."""
    ids = [[doc_of[i] for i in row] for row in rows.tolist()]
    return scores_to_run(scores, rows >= 0, qids, ids)


def _exhaustive(index: LorentzIndex, queries: list[str], k: int = 100):
    q = index.encoder.encode(queries)
    return lorentz_gram(q, index.points).topk(min(k, len(index)), dim=1)


def evaluate_dataset(
    name: str,
    data_dir: str | None,
    encoders: dict[str, HyTEEncoder],
    dense: TextEncoder | None,
    work: Path,
) -> list[tuple[str, dict]]:
    ds = load_beir(name, split="test", data_dir=data_dir, download=False)
    docs = {d: doc.full_text for d, doc in ds.corpus.items() if doc.full_text.strip()}
    if len(docs) < len(ds.corpus):
        print(f"  {name}: {len(ds.corpus) - len(docs)} empty document(s) left out of the index")
    qids = list(ds.queries)
    queries = [ds.queries[q] for q in qids]
    rows: list[tuple[str, dict]] = []
    for label, encoder in encoders.items():
        index, seconds = timed(
            lambda e=encoder, w=work / f"{name}-{label}": build_index(docs, w, encoder=e)
        )
        print(f"  {name}: {label} index of {len(index)} chunks built in {seconds:.1f} s")
        if label == "untrained":
            scores, indices = index.bm25.search(queries, 100)
            rows.append(
                (
                    "BM25 (whitespace, k1=1.2, b=0.75)",
                    evaluate(_doc_run(qids, scores, indices, index.doc_ids), ds.qrels, METRICS),
                )
            )
        for alpha in ALPHAS:
            scores, indices = index.search(queries, 50, alpha=alpha)
            rows.append(
                (
                    f"HyTE-H {label}, hybrid alpha={alpha}",
                    evaluate(_doc_run(qids, scores, indices, index.doc_ids), ds.qrels, METRICS),
                )
            )
        scores, indices = _exhaustive(index, queries)
        rows.append(
            (
                f"HyTE-H {label}, exhaustive Lorentz",
                evaluate(_doc_run(qids, scores, indices, index.doc_ids), ds.qrels, METRICS),
            )
        )
    if dense is not None:
        ids = list(docs)
        doc_emb, _ = corpus_embeddings([docs[d] for d in ids], dense)  # georag's disk cache
        q_emb = dense.encode(queries)
        scores, indices = (q_emb @ doc_emb.T).topk(min(100, len(ids)), dim=1)
        run = _doc_run(qids, scores, indices, ids)
        rows.append((f"dense {DEFAULT_MODEL} cosine (reference)", evaluate(run, ds.qrels, METRICS)))
    return rows


def radial_table(encoders: dict[str, HyTEEncoder]) -> list[str]:
    lines = [
        "| general | specific | "
        + " | ".join(f"r {label} (gen / spec)" for label in encoders)
        + " |",
        "|---|---|" + "---|" * len(encoders),
    ]
    wins = dict.fromkeys(encoders, 0)
    for general, specific in PAIRS:
        cells = []
        for label, encoder in encoders.items():
            k = float(encoder.projection.k.detach())
            r = radial_coordinate(encoder.encode([general, specific]), k=k).tolist()
            wins[label] += r[1] > r[0]
            cells.append(f"{r[0]:.4f} / {r[1]:.4f}" + (" ok" if r[1] > r[0] else ""))
        lines.append(f"| {general} | {specific} | " + " | ".join(cells) + " |")
    lines.append(
        "specific farther out: "
        + ", ".join(f"{label} {wins[label]}/{len(PAIRS)}" for label in encoders)
    )
    return lines


def main() -> None:
    parser = bench_parser(__doc__, repeats=None)
    parser.add_argument("--weights", help="trained projection (HyTEEncoder.save)")
    parser.add_argument("--datasets", nargs="+", default=["scifact", "cranfield", "cisi"])
    parser.add_argument("--no-dense", action="store_true")
    args = parser.parse_args()
    bench = start(
        args,
        config={
            "chunks": "W=300 O=60 words",
            "BM25": "k1=1.2 b=0.75 whitespace, top-M=50",
            "Lorentz": "K=1, P=1, sigmoid offset 2",
            "untrained": "seed 0 init",
            "trained": args.weights or "none",
        },
    )
    encoders = {"untrained": HyTEEncoder.from_pretrained()}
    if args.weights:
        encoders["trained"] = HyTEEncoder.from_pretrained(weights=args.weights)
    dense = None if args.no_dense else TextEncoder(DEFAULT_MODEL, device=bench.device)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets:
            rows = evaluate_dataset(name, args.data_dir, encoders, dense, Path(tmp))
            results[name] = dict(rows)
            print(f"\n### {name} (test qrels)\n")
            print("| method | " + " | ".join(METRICS) + " |")
            print("|---|" + "---:|" * len(METRICS))
            for label, values in rows:
                print(f"| {label} | " + " | ".join(f"{values[m]:.4f}" for m in METRICS) + " |")
    print("\n### radial coordinate r = arcosh(t / sqrt(K)) of single words (Table 3 check)\n")
    lines = radial_table(encoders)
    print("\n".join(lines))
    bench.finish({"results": results, "radial": lines})


if __name__ == "__main__":
    main()

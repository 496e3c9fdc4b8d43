"""Ricci-Filtration quality on SciFact (test): filter, then a second stage on the kept set.

Rows: the dense top-20 order (all-MiniLM-L6-v2, faiss), the second stage alone on those
20, Ricci-Filtration alone (dense order of the survivors) and Ricci-Filtration followed by
the same second stage (the paper's pipeline). Also the mean number of kept chunks (the
paper reports 16.7 of 20 on TriviaQA), and how many of the removed chunks are
non-relevant, against removing the same number of the 20 at random::

    python scripts/quality/quality_ricci.py --second-stage all-mpnet-base-v2 --out runs/ricci

The second stage defaults to all-mpnet-base-v2 (from its PyPI parts, or --second-stage
PATH to a sentence-transformers folder); ``--second-stage bm25`` scores the kept chunks by
BM25 instead (mpnet over 6,000 abstracts takes hours on a busy 2-core CPU; its embeddings
are cached per text, so a second run or the `ricci+bi` eval reuses them). It also draws
the flow of one query (the paper's Figure 3) and the histogram of final query-edge
lengths to PNG under --out.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from georag.perf.bench import bench_parser, start
from georag.perf.timing import timed
from georag.resources import DEFAULT_MODEL


class BM25Stage:
    """Lexical second stage: the BM25 score (k1=1.2, b=0.75) of each kept candidate."""

    name = "bm25"

    def __init__(self, dataset) -> None:
        from georag.retrieval.bm25 import BM25Index

        self.doc_ids = list(dataset.corpus)
        self.index = BM25Index.build([dataset.corpus[d].full_text for d in self.doc_ids])
        self.dataset = dataset

    def __call__(self, batch):
        from georag.batch import RerankResult

        texts = [self.dataset.queries[q] for q in batch.query_ids]
        scores, indices = self.index.search(texts, len(self.doc_ids))
        position = {d: k for k, d in enumerate(self.doc_ids)}
        full = torch.zeros(len(texts), len(self.doc_ids))
        full.scatter_(1, indices, scores)
        slots = torch.tensor([[position.get(d, 0) for d in row] for row in batch.doc_ids])
        picked = torch.gather(full, 1, slots)
        return RerankResult.from_scores(picked, batch.mask.clone())


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, out="--json", device=False)
    parser.add_argument(
        "--second-stage",
        default="all-mpnet-base-v2",
        help="bi-encoder model name or sentence-transformers folder, or "
        "'bm25' for a lexical second stage",
    )
    parser.add_argument("--out", default="runs/ricci", help="folder for the PNGs")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random removal")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config_text = {"second stage": args.second_stage, "seed": args.seed, "plots": args.out}
    bench = start(args, config=config_text)

    from georag.data.beir import load_beir
    from georag.eval.metrics import per_query
    from georag.eval.plots_ricci import plot_flow, plot_query_edge_histogram
    from georag.eval.report import SIGNIFICANCE, markdown_table
    from georag.eval.stats import summarize
    from georag.rerank.base import IdentityReranker
    from georag.rerank.bi_encoder import BiEncoderConfig, BiEncoderReranker
    from georag.rerank.pipeline import RerankPipeline
    from georag.rerank.ricci_filtration import RicciFiltration, RicciFiltrationConfig
    from georag.retrieval.candidates import build_candidate_pool

    dataset = load_beir("scifact", split="test", data_dir=args.data_dir)
    pool = build_candidate_pool(dataset, first_stage="dense", top_m=20, with_texts=True)
    qrels = dataset.qrels
    config = RicciFiltrationConfig()
    ricci = RicciFiltration(config)
    details, ricci_s = timed(lambda: ricci.filtrate(pool, history=True))

    def second_stage():
        if args.second_stage == "bm25":
            stage = BM25Stage(dataset)
        else:
            # each text is encoded once, through the on-disk per-text cache (resumes when stopped)
            stage = BiEncoderReranker(BiEncoderConfig(model=args.second_stage))
        return stage, stage(pool)

    (second, alone), second_s = timed(second_stage)

    metrics = ("ndcg@10", "recall@5")
    rows = {
        "dense top-20 order": IdentityReranker()(pool),
        f"second stage alone ({Path(args.second_stage).name}) on the top 20": alone,
        "Ricci-Filtration alone (dense order of the kept)": ricci(pool),
        "Ricci-Filtration + same second stage": RerankPipeline([ricci, second])(pool),
    }
    print(
        f"# SciFact test: {len(pool.query_ids)} queries, dense top-20 ({DEFAULT_MODEL}); "
        f"Ricci-Filtration {config}; flow {ricci_s:.1f} s for the batch; second stage "
        f"{args.second_stage} ({second_s:.1f} s on the 20 of every query)"
    )
    values = {name: per_query(result.to_run(pool), qrels, metrics) for name, result in rows.items()}
    table = summarize(values, metrics, baseline="dense top-20 order")
    print()
    print(markdown_table(table, ("method", *metrics, "ndcg@10_p_value")))
    print(SIGNIFICANCE)

    keep = details.keep.cpu().numpy()
    real = pool.mask.cpu().numpy()
    relevant = (
        np.array(
            [
                [doc in qrels.get(q, {}) and qrels[q][doc] > 0 for doc in row]
                for q, row in zip(pool.query_ids, pool.doc_ids)
            ]
        )
        & real
    )
    removed = real & ~keep
    n_removed = removed.sum(1)
    share_ricci = (removed & ~relevant).sum() / max(n_removed.sum(), 1)
    nonrel = (real & ~relevant).sum(1)
    expected_random = (n_removed * nonrel / np.maximum(real.sum(1), 1)).sum() / max(
        n_removed.sum(), 1
    )
    gen = np.random.default_rng(args.seed)
    drawn = 0
    for row in range(len(pool.query_ids)):
        slots = np.flatnonzero(real[row])
        pick = gen.choice(slots, size=n_removed[row], replace=False)
        drawn += (~relevant[row, pick]).sum()
    print("\n| filter statistic | value |")
    print("|---|---|")
    print(f"| mean kept of 20 (paper: 16.7 on TriviaQA) | {keep.sum(1).mean():.2f} |")
    print(
        f"| queries keeping all 20 / keeping < 10 | {(keep.sum(1) == 20).sum()} / "
        f"{(keep.sum(1) < 10).sum()} |"
    )
    print(f"| removed chunks | {n_removed.sum()} |")
    print(
        f"| relevant chunks in the top 20 / removed by the filter | {relevant.sum()} / "
        f"{(removed & relevant).sum()} |"
    )
    print(
        f"| share of removed chunks that are non-relevant: Ricci-Filtration | {share_ricci:.4f} |"
    )
    print(
        f"| same, removing as many at random (expectation / one draw, seed {args.seed}) | "
        f"{expected_random:.4f} / {drawn / max(n_removed.sum(), 1):.4f} |"
    )

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    row = int(np.argmax(n_removed > 0))
    history = details.flow.history_lengths[:, row, 0, 1:].cpu().numpy()
    labels = relevant[row][details.slots[row].cpu().numpy()]
    plot_flow(
        history,
        out / "ricci_flow_example.png",
        eta=config.eta,
        relevant=labels,
        title=f"SciFact query {pool.query_ids[row]}: query-edge lengths",
    )
    finals = details.query_lengths.cpu().numpy()[real]
    plot_query_edge_histogram(
        finals, out / "ricci_query_edge_histogram.png", eta=config.eta, relevant=relevant[real]
    )
    print(f"\nPNGs: {out / 'ricci_flow_example.png'}, {out / 'ricci_query_edge_histogram.png'}")
    bench.finish(
        {
            "table": table,
            "mean_kept": float(keep.sum(1).mean()),
            "removed": int(n_removed.sum()),
            "share_nonrelevant_removed": float(share_ricci),
            "random_expectation": float(expected_random),
            "flow_s": ricci_s,
            "second_stage_s": second_s,
        }
    )


if __name__ == "__main__":
    main()

"""``georag demo``: every available reranker on the bundled demo corpus, then dense, BM25,
hybrid and the entity-graph retrievers on the bundled multi-hop corpus, one question
explained."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["DEMO_METHODS", "cmd_demo", "notes"]

# The demo runs every geometric method; second stages that need extra model weights
# (bi: all-mpnet-base-v2, ce: any cross-encoder) are left to `georag eval`.
DEMO_METHODS = ("none", "diffusion", "maniscope", "ricci", "hyte", "iso")
MULTIHOP_COLUMNS = ("method", "recall@2", "recall@5", "recall@2_p_value", "ms_per_query")


def notes(rows: list[dict]) -> str:
    """The table's legend, and a word on the hyte row when its projection is untrained."""
    from georag.eval.report import LEGEND

    lines = [LEGEND]
    if any("hyte" in str(row.get("method", "")).split("+") for row in rows):
        lines.append(
            "hyte: unless its `weights` option names a trained projection, the HyTE-H "
            "projection is untrained (seed 0), so the row says little about the method "
            "(train one: python -m train fit --config configs/train/hyte_h.yaml)."
        )
    return "\n".join(lines)


def cmd_demo(args: argparse.Namespace) -> None:
    from georag.data.bundled import DEMO_DIR
    from georag.eval.demo import run_multihop
    from georag.eval.report import markdown_table
    from georag.eval.runner import EvalConfig, run_eval
    from georag.rerank.registry import available_methods

    available = available_methods()
    methods = args.methods or [
        m for m in DEMO_METHODS if all(stage in available for stage in m.split("+"))
    ]
    config = EvalConfig(
        dataset=str(DEMO_DIR),
        methods=methods,
        top_m=20,
        out=args.out,
        latency_samples=10,
        encoder_backend=args.encoder_backend,
    )
    rows = run_eval(config)
    out = Path(args.out)
    multihop = run_multihop(out / "multihop", encoder_backend=args.encoder_backend)
    print("\ngeorag demo: bundled corpus, dense MiniLM first stage (top 20), then each reranker\n")
    print(markdown_table(rows))
    print(notes(rows))
    print(
        "\nMulti-hop: 80 linked passages, 26 questions each needing two of them; "
        "corpus-level retrievers at their defaults (Recall@k: share of the two gold "
        "passages in the top k; p: against dense)\n"
    )
    print(markdown_table(multihop.rows, MULTIHOP_COLUMNS))
    print("\nWhy hipporag2 ranks what it ranks for one question (georag explain):\n")
    print(multihop.explanation.text())
    print(f"\nwrote {out / 'results.md'}, {out / 'multihop' / 'results.md'} and {multihop.picture}")

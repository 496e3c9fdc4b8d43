"""Regenerate docs/results.md (and results.json, results.tex, quality_latency.png) from a fresh run.

Usage:
    python scripts/quality/make_results.py --data-dir ../shared/data

Runs `georag eval` (every reranker on one shared dense top-100 pool) on scifact, cranfield and
cisi, and the multi-hop harness (ISO-RAG and its baselines) on hotpotqa_dev500 and the two
MuSiQue files, then writes the tables with the exact command, the machine and the versions.
The numbers in docs/results.md are printed from docs/results.json, never typed by hand.
The learnable rerankers' tables follow, copied from docs/learned_results.md (the one
source, written by scripts/quality/quality_learned.py); after a new quality_learned run,

    python scripts/quality/make_results.py --learned-only

copies them again without rerunning anything else (the rest of docs/results.md is kept as
it is).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from georag._io import atomic_write
from georag.eval.plots import plot_quality_latency
from georag.eval.report import latex_table
from georag.experiments.iso_multihop import results_rows
from georag.experiments.results_doc import (
    BEIR_COLUMNS,
    BEIR_METHODS,
    beir_rows,
    copy_learned,
    render,
)
from georag.experiments.sections import with_learned
from georag.perf.bench import bench_parser, data_root, start


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--docs", type=Path, default=Path("docs"))
    parser.add_argument("--runs", type=Path, default=Path("runs/results"))
    parser.add_argument("--max-queries", type=int, help="smoke runs only: cut each query set")
    parser.add_argument(
        "--methods", nargs="+", default=list(BEIR_METHODS), help="rerankers for the BEIR-style sets"
    )
    parser.add_argument(
        "--learned-only",
        action="store_true",
        help="only copy the tables of DOCS/learned_results.md into DOCS/results.md again "
        "(runs nothing; the rest of results.md is kept as it is)",
    )
    args = parser.parse_args()
    if args.learned_only:
        try:
            results = copy_learned(args.docs)
        except ValueError as error:
            parser.error(str(error))
        print(f"{results}: learned tables copied from {args.docs / 'learned_results.md'}")
        return
    learned_path = args.docs / "learned_results.md"
    learned = learned_path.read_text() if learned_path.is_file() else ""
    data_dir = str(data_root(args))
    bench = start(args, config={"methods": args.methods, "max_queries": args.max_queries})
    rows = beir_rows(data_dir, args.runs, args.max_queries, args.methods)
    multihop = results_rows(data_dir)  # ISO-RAG and its baselines
    seconds = time.time() - bench.started
    payload = json.dumps({"beir": rows, "multihop": multihop}, indent=2)
    atomic_write(args.docs / "results.json", payload)
    plot_quality_latency(rows, args.docs / "quality_latency.png")
    latex = latex_table(rows, BEIR_COLUMNS)
    atomic_write(args.docs / "results.tex", latex)
    command = "python " + " ".join(sys.argv)
    text = render(rows, multihop, command, seconds, (bench.threads.load[0], os.getloadavg()[0]))
    text = with_learned(text, learned)
    atomic_write(args.docs / "results.md", text)
    print(text)
    bench.finish({"docs": str(args.docs), "beir_rows": len(rows), "multihop_rows": len(multihop)})


if __name__ == "__main__":
    main()

"""Entity-graph multi-hop tables: graph retrievers against the non-graph bars, zero-shot.

Rows, metrics and tests: :mod:`georag.experiments.entity_multihop`. ``--rows bars,graph``
(the default) runs the non-graph bars and the graph rows; ``--rows default`` the bars and the
one zero-shot default; ``--rows candidates --sets 2wikimultihopqa_train500 musique_train200``
the selection of that default on the training files.
Prints one Markdown table per set (and ISO-RAG's ablation tests) and writes them, with the
per-query values, under ``--out``; ``--report FILE`` prints a saved run again.

Usage: ``python scripts/quality/quality_entity_graph.py --data-dir ../shared/data``
"""

from __future__ import annotations

import json
from pathlib import Path

from georag.experiments.entity_multihop import (
    BARS,
    CANDIDATES,
    DEFAULT,
    EVAL_SETS,
    GRAPH_ROWS,
    ablation_markdown,
    ablation_rows,
    markdown,
    prepare,
    run_rows,
    selection,
    table_rows,
)
from georag.perf.bench import bench_parser, data_root, start
from georag.resources import default_cache_dir
from georag.retrieval.encoder import TextEncoder

ROWS = {
    "bars": BARS,
    "graph": GRAPH_ROWS,
    "default": {"default": DEFAULT},
    "candidates": CANDIDATES,
}


def show(results: dict) -> None:
    """Print each set's table and ISO-RAG's ablation tests, then the selection over sets."""
    for result in results.values():
        print("\n" + markdown(result["rows"], counts=result.get("counts", "")))
        tests = ablation_rows(result["per_query"])
        if tests:
            print("\n" + ablation_markdown(tests))
    if len(results) > 1:
        ranked = selection({name: r["rows"] for name, r in results.items()})
        print(f"\nmean of Recall@2 and Recall@5 over {', '.join(results)}, best first:")
        for row, score in ranked:
            print(f"  {score:.4f}  {row}")


def main() -> None:
    parser = bench_parser(__doc__, repeats=None)
    parser.add_argument("--sets", nargs="+", default=list(EVAL_SETS))
    parser.add_argument("--rows", default="bars,graph", help=f"of {sorted(ROWS)}, comma-separated")
    parser.add_argument(
        "--report", type=Path, default=None, help="print the tables of a saved --out JSON"
    )
    args = parser.parse_args()
    if args.report is not None:
        try:
            show(json.loads(args.report.read_text())["results"])
        except (OSError, ValueError, KeyError) as err:
            parser.error(f"--report: {args.report} is not a saved run ({err})")
        return
    kinds = [k.strip() for k in args.rows.split(",")]
    unknown = [k for k in kinds if k not in ROWS]
    if unknown:
        parser.error(f"--rows: unknown {unknown} (known: {sorted(ROWS)})")
    data_dir = data_root(args)
    rows = {label: spec for k in kinds for label, spec in ROWS[k].items()}
    bench = start(args, config={"rows": {k: list(v) for k, v in rows.items()}})
    encoder = TextEncoder(show_progress=False, device=bench.device)
    results = {}
    for name in args.sets:
        p = prepare(name, data_dir, encoder, default_cache_dir())
        values, costs = run_rows(p, {**BARS, **rows})
        results[name] = {
            "rows": table_rows(name, values, costs, bars=tuple(BARS)),
            "per_query": values,
            "counts": f": {len(p.corpus.doc_ids)} passages, {len(p.queries.ids)} questions",
        }
    show(results)
    bench.finish(results)


if __name__ == "__main__":
    main()

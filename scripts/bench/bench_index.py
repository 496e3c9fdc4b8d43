"""The corpus index as a product: build cost, size per part, parity with ``georag eval``,
add/delete against a rebuild, update time, and kill -9 during an update.

Usage: ``python scripts/bench/bench_index.py --data-dir ../shared/data [--sets
2wikimultihopqa_hipporag scifact] [--graphs passage phrase entity:title hyte] [--methods ...]
[--limit DOCS] [--max-queries N] [--out X.json]``

Per data set:

1. ``georag index`` in a fresh child process: build time (in the child, imports excluded),
   peak memory (the child's ``VmHWM``), and bytes on disk of each part.
2. ``Retriever.retrieve_batch`` against ``georag eval``'s run of the same method, every
   question (``--max-queries`` to cut): queries whose top-10 ids differ (0 expected) and
   the largest score gap.
3. The index of the first 90 % of the corpus (plus one passage deleted again), updated
   with the last 10 %, against the index of the whole corpus, per method.
4. Seconds to add 100 passages (encoding included).
5. ``kill -9`` of a writer at each of the 5 steps of an update: the index must load and
   answer as before (or, past the commit point, as after).

``--limit DOCS`` (with ``--max-queries``) runs on a small BEIR folder cut from each set:
those queries' judged passages and the first passages, ``DOCS`` in all (a smoke run).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from georag.data.datasets import load_dataset
from georag.experiments.index_bench import (
    KILL_STEPS,
    add_delete_parity,
    build_in_child,
    eval_parity,
    kill_during_update,
    part_sizes,
    subset_folder,
    time_add,
)
from georag.perf.bench import bench_parser, data_root, positive_int, start
from georag.retrievers.index import documents_from_dataset, update_index
from georag.retrievers.retriever import INDEX_METHODS

SETS = ["2wikimultihopqa_hipporag", "scifact"]
GRAPHS = ["passage", "phrase", "entity:title", "hyte"]


def _table(title: str, found: dict[str, dict]) -> None:
    print(f"\n{title}\n{'method':<20} {'queries':>8} {'mismatches':>10} {'max gap':>10}")
    for method, row in found.items():
        print(
            f"{method:<20} {row['queries']:8d} {row['mismatches']:10d} {row['max_score_gap']:10.2e}"
        )


def one_set(name: str, args, data_dir: Path, tmp: Path) -> dict:
    data = load_dataset(name, data_dir=data_dir)
    if args.limit is not None:
        small = subset_folder(
            data, tmp / f"{name}-subset", docs=args.limit, queries=args.max_queries or 20
        )
        name, data = str(small), load_dataset(small)
    docs = documents_from_dataset(data)
    queries = [data.queries[q] for q in data.queries][: args.max_queries]
    index = tmp / "index"
    print(f"\n## {Path(name).name}: {len(docs)} passages, {len(queries)} queries")
    build = build_in_child(docs, index, args.graphs)
    print(f"build: {json.dumps(build)}")
    if "error" in build:
        return {"build": build}
    sizes = part_sizes(index)
    for part, size in sizes.items():
        print(f"  {part:<60} {size / 2**20:10.2f} MiB")
    parity = eval_parity(
        name, index, args.methods, data_dir=str(data_dir), max_queries=args.max_queries
    )
    _table("retrieve vs georag eval (top 10)", parity)
    updates = add_delete_parity(docs, args.methods, args.graphs, queries[:200])
    _table("90 % + add 10 % (and a delete) vs the whole corpus (top 10)", updates)
    last = docs[-100:]
    update_index(index, delete=[d["id"] for d in last])
    add_s = time_add(index, last)
    print(f"\nadd {len(last)} passages: {add_s:.2f} s")
    fresh = [{"id": f"__kill{i}", "title": "", "text": docs[i]["text"]} for i in range(5)]
    method = "hipporag2" if "entity:title" in args.graphs else "dense"
    kills = kill_during_update(index, fresh, queries[:50], method=method, steps=KILL_STEPS)
    print(f"\nkill -9 during an update ({method}, {len(queries[:50])} queries)")
    for step, row in kills.items():
        print(f"  {step:<10} {json.dumps(row)}")
    return {
        "build": build,
        "part_bytes": sizes,
        "eval_parity": parity,
        "update_parity": updates,
        "add_100_s": add_s,
        "kill": kills,
    }


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--sets", nargs="+", default=SETS, help="data sets (names)")
    parser.add_argument("--graphs", nargs="+", default=GRAPHS, help="graphs of the index")
    parser.add_argument("--methods", nargs="+", default=list(INDEX_METHODS), help="corpus methods")
    parser.add_argument("--limit", type=positive_int, help="passages of a small cut (smoke)")
    parser.add_argument("--max-queries", type=positive_int, help="only the first N queries")
    args = parser.parse_args()
    data_dir = data_root(args)
    bench = start(
        args, config={k: getattr(args, k) for k in ("sets", "graphs", "methods", "limit")}
    )
    results = {}
    for name in args.sets:
        with tempfile.TemporaryDirectory(prefix="georag-bench-index-") as tmp:
            results[name] = one_set(name, args, data_dir, Path(tmp))
    bench.finish(results)


if __name__ == "__main__":
    main()

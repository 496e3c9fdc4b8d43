"""Entity-graph multi-hop tables, trained section: HippoRAG 2 over a learned map against map+bm25.

Rows, training sets, tuning, metrics and tests: :mod:`georag.experiments.entity_trained`
(``map``, ``map+bm25``, ``hipporag2 + map``, ``hipporag2 + map, fusion weight tuned``).
Prints one Markdown table per set, with each row's training seconds and tuned knobs, and
writes them, with the per-query values, the knobs and the folds, under ``--out``; the maps
go under ``--work``. ``--max-train-queries`` and ``--epochs`` make a short run.

Usage: ``python scripts/quality/quality_entity_trained.py --data-dir ../shared/data``
"""

from __future__ import annotations

import time
from pathlib import Path

from georag.experiments.entity_multihop import EVAL_SETS, markdown
from georag.experiments.entity_trained import knob_lines, trained_table
from georag.experiments.training import FOLDS, Training
from georag.perf.bench import bench_parser, data_root, start
from georag.resources import default_cache_dir
from georag.retrieval.encoder import TextEncoder


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    base = Training()
    parser.add_argument("--sets", nargs="+", default=list(EVAL_SETS))
    parser.add_argument(
        "--max-train-queries",
        type=int,
        default=0,
        help="a seeded this many training queries per training set or fold (default 0: all)",
    )
    parser.add_argument("--epochs", type=int, default=base.epochs)
    parser.add_argument("--patience", type=int, default=base.patience)
    parser.add_argument("--folds", type=int, default=FOLDS, help="hotpotqa_dev500's CV folds")
    parser.add_argument("--seed", type=int, default=base.seed)
    parser.add_argument("--work", type=Path, default=Path("runs/entity_trained"))
    args = parser.parse_args()
    data_dir = data_root(args)
    training = Training(epochs=args.epochs, patience=args.patience, seed=args.seed)
    bench = start(args, config={"training": training, "folds": args.folds}, device="cpu")
    encoder = TextEncoder(show_progress=False, device=bench.device)
    results = {}
    for name in args.sets:
        started = time.perf_counter()
        result = trained_table(
            name,
            data_dir=data_dir,
            encoder=encoder,
            cache=default_cache_dir(),
            work=args.work,
            training=training,
            folds=args.folds,
            keep=args.max_train_queries,
        )
        counts = (
            f": {result['passages']} passages, {result['questions']} questions; "
            f"{result['protocol']}; {time.perf_counter() - started:.0f} s"
        )
        print("\n" + markdown(result["rows"], counts=counts) + "\n\n" + knob_lines(result["rows"]))
        results[name] = result
    bench.finish(results)


if __name__ == "__main__":
    main()

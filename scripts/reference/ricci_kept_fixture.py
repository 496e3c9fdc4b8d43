"""Store Ricci-Filtration's behaviour on real SciFact graphs as a regression fixture.

Builds the filter's graphs (query + dense top-20, 50th-percentile edges) of the first
``--graphs`` judged SciFact test queries, runs the filter's flow on each graph alone
(B=1, ``RicciFiltrationConfig`` defaults, one thread) and writes, per graph, the edges
(upper triangle as hex bits), the keep decisions and the final query-edge lengths to
``tests/rerank/fixtures/ricci_scifact.json`` (``tests/rerank/test_ricci_filtration.py``
compares the current code against it). No text or embedding is stored::

    PYTHONPATH=$PWD python scripts/reference/ricci_kept_fixture.py --data-dir ../shared/data
"""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import torch

from georag._io import atomic_write
from georag.perf.bench import bench_parser, start

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, out="--json", device=False)
    parser.set_defaults(threads=1)  # the fixture's bits are those of a one-thread run
    parser.add_argument("--graphs", type=int, default=32)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "tests" / "rerank" / "fixtures" / "ricci_scifact.json"
    )
    parser.add_argument("--code", default="", help="commit the run stands for (default: HEAD)")
    args = parser.parse_args()
    bench = start(args, config={"graphs": args.graphs, "out": str(args.out)}, device="cpu")
    from georag.experiments.ricci_bench import scifact_graphs
    from georag.geometry.ricci import ricci_flow
    from georag.rerank.geometric.ricci_filtration import RicciFiltrationConfig

    cfg = RicciFiltrationConfig()
    adjacency = scifact_graphs(args.data_dir, ["test"], args.graphs)
    n = adjacency.shape[1]
    upper = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
    graphs = []
    for g in adjacency:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            flow = ricci_flow(g[None].float(), g[None], **cfg.flow_options())
        lengths = flow.lengths[0, 0, 1:]
        bits = "".join("1" if x else "0" for x in g[upper].tolist())
        graphs.append(
            {
                "edges": f"{int(bits, 2):x}",
                "keep": "".join("1" if x else "0" for x in (lengths <= cfg.eta + cfg.eta_atol)),
                "query_lengths": [round(x, 6) for x in lengths.tolist()],
            }
        )
    commit = (
        args.code
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    )
    header = {
        "what": "Ricci-Filtration flow (RicciFiltrationConfig defaults) on SciFact test graphs, "
        "each alone (B=1); edges: upper triangle of the 21-node adjacency, row-major, hex",
        "made_by": "scripts/reference/ricci_kept_fixture.py",
        "code": commit,
        "nodes": n,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    lines = ",\n".join("  " + json.dumps(g) for g in graphs)  # one graph a line
    head = json.dumps(header, indent=1)[:-2]
    atomic_write(args.out, f'{head},\n "graphs": [\n{lines}\n ]\n}}\n')
    print(f"{len(graphs)} graphs -> {args.out}")
    bench.finish({"graphs": len(graphs), "out": str(args.out)})


if __name__ == "__main__":
    main()

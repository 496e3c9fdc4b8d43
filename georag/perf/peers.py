"""Peer implementations with pinned dependencies, run in the ``.venv-peers`` environment
(``make peers``: GraphRicciCurvature 0.6.1 and its pinned scipy).

* :data:`GRC_PEER_SCRIPT`: GraphRicciCurvature's curvature of the edges of a graph file;
* :func:`run_peer`: GraphRicciCurvature's curvature or Ricci flow of batched query graphs,
  through ``scripts/reference/ricci_reference.py``.

Nothing of georag is imported here beyond :func:`georag.perf.bench.peer_python`.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np

from georag.perf.bench import peer_python

#: The runner of GraphRicciCurvature on batched query graphs (it imports no georag).
RUNNER = Path(__file__).resolve().parents[2] / "scripts" / "reference" / "ricci_reference.py"

#: GraphRicciCurvature's Ollivier-Ricci curvature of a graph file, run by the peers' python:
#: ``python -c GRC_PEER_SCRIPT graph.npz kappa.npy PROC [all_pairs|pairwise]``, where the
#: file holds ``x``, ``y`` (edge ends), ``w`` (lengths), ``num_nodes`` and optionally
#: ``subset`` (the edges to compute); it saves the curvatures and prints its own seconds
#: and CPU seconds as JSON.
GRC_PEER_SCRIPT = """
import json, resource, sys, time, networkx as nx, numpy as np
from GraphRicciCurvature.OllivierRicci import OllivierRicci
data = np.load(sys.argv[1]); proc = int(sys.argv[3])
shortest_path = sys.argv[4] if len(sys.argv) > 4 else "all_pairs"
graph = nx.Graph()
graph.add_nodes_from(range(int(data["num_nodes"])))
graph.add_weighted_edges_from(zip(data["x"].tolist(), data["y"].tolist(), data["w"].tolist()))
pick = data["subset"] if "subset" in data else np.arange(len(data["x"]))
x, y = data["x"][pick], data["y"][pick]
children = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = time.process_time() + children.ru_utime + children.ru_stime
start = time.perf_counter()
options = {"proc": proc} if proc > 0 else {}
orc = OllivierRicci(graph, method="OTD", alpha=0.5, exp_power=2, verbose="ERROR",
                    shortest_path=shortest_path, **options)
out = orc.compute_ricci_curvature_edges([(int(a), int(b)) for a, b in zip(x, y)]
                                        if "subset" in data else None)
seconds = time.perf_counter() - start
children = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = time.process_time() + children.ru_utime + children.ru_stime - cpu
kappa = np.array([out[(int(a), int(b))] if (int(a), int(b)) in out else out[(int(b), int(a))]
                  for a, b in zip(x, y)])
np.save(sys.argv[2], kappa)
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu}))
"""


def run_peer(
    adjacency: np.ndarray,
    mode: str,
    proc: int,
    *options: str,
    lengths: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """GraphRicciCurvature through scripts/reference/ricci_reference.py in ``.venv-peers``.

    ``adjacency`` (B, N, N); ``lengths`` default to unit lengths on its edges; ``options``
    are more of the runner's options (default ``--iterations 20``).
    """
    peer = peer_python()
    if peer is None:
        raise ValueError(".venv-peers is absent: run `make peers` to run GraphRicciCurvature")
    lengths = adjacency.astype(np.float64) if lengths is None else lengths
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "g.npz", Path(tmp) / "r.npz"
        np.savez(inp, lengths=lengths, adjacency=adjacency)
        command = [str(peer), str(RUNNER), str(inp), str(out), "--mode", mode]
        command += ["--proc", str(proc), *(options or ("--iterations", "20"))]
        subprocess.run(command, check=True)
        return dict(np.load(out))

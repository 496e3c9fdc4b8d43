"""The corpus index as a product, measured: build cost, size per part, parity of
:class:`georag.Retriever` with ``georag eval``, add/delete against a rebuild, update time,
and ``kill -9`` in the middle of an update (``scripts/bench/bench_index.py``).

Each measurement that forks (the build, the killed updates) runs in a fresh ``python -c``
child; a build's peak memory is the child's own ``VmHWM``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from georag.retrieval.generations import FAULT_ENV, current_generation
from georag.retrievers.index import CorpusIndex, build_index, update_index
from georag.retrievers.retriever import Retriever

__all__ = [
    "KILL_STEPS",
    "add_delete_parity",
    "build_in_child",
    "compare",
    "eval_parity",
    "kill_during_update",
    "part_sizes",
    "subset_folder",
    "time_add",
]

#: the update steps a fault can stop at (:func:`georag.retrieval.generations.checkpoint`)
KILL_STEPS = ("locked", "encoded", "parts", "staged", "switched")

_CHILD = """
import json, sys
request = json.loads(sys.argv[1])
from georag.retrievers.index import build_index, read_documents, update_index
docs = read_documents(request["docs"])
if request["kind"] == "build":
    import time
    started = time.perf_counter()
    build_index(docs, request["out"], graphs=request["graphs"])
    hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
    print(json.dumps({"build_s": time.perf_counter() - started, "peak_mib": int(hwm) / 1024}))
else:
    update_index(request["out"], add=docs)
"""


def _child(
    request: dict, documents: list[dict], env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run ``_CHILD`` on ``request``, the documents handed over in a JSONL file."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, **(env or {}))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="georag-child-") as tmp:
        path = Path(tmp) / "docs.jsonl"
        path.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
        args = [sys.executable, "-c", _CHILD, json.dumps({**request, "docs": str(path)})]
        return subprocess.run(args, capture_output=True, text=True, env=env, check=False)


def build_in_child(documents: list[dict], out: str | os.PathLike, graphs: list[str]) -> dict:
    """Build an index in a fresh process: ``build_s`` (in the child, imports excluded) and
    ``peak_mib`` (its ``VmHWM``); ``{"error": ...}`` on failure."""
    request = {"kind": "build", "out": str(out), "graphs": list(graphs)}
    done = _child(request, documents)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def part_sizes(index_dir: str | os.PathLike) -> dict[str, int]:
    """Bytes on disk of each part of the live generation (``cache/`` by its subfolder)."""
    generation = current_generation(index_dir)
    sizes: dict[str, int] = {}
    for file in generation.rglob("*"):
        if file.is_file():
            rel = file.relative_to(generation).parts
            part = "/".join(rel[:3] if rel[0] == "cache" else rel[:1])
            sizes[part] = sizes.get(part, 0) + file.stat().st_size
    return dict(sorted(sizes.items()))


def compare(got: list[list], want: list[list], *, atol: float = 1e-5) -> dict:
    """Queries whose ids differ in order, and the largest score gap where they agree.

    ``got`` and ``want`` hold ``(id, score)`` pairs (or objects with ``id`` and ``score``)."""

    def pairs(row):
        return [(d.id, d.score) if hasattr(d, "id") else tuple(d) for d in row]

    mismatches, gap = 0, 0.0
    for a, b in zip(got, want, strict=True):
        a, b = pairs(a), pairs(b)
        if [d for d, _ in a] != [d for d, _ in b]:
            mismatches += 1
            continue
        gap = max([gap] + [abs(x - y) for (_, x), (_, y) in zip(a, b)])
    return {"queries": len(want), "mismatches": mismatches, "max_score_gap": gap, "atol": atol}


def eval_parity(
    dataset: str, index_dir: str | os.PathLike, methods: list[str], *, k: int = 10, **config
) -> dict[str, dict]:
    """``georag eval`` (its TREC runs) against ``Retriever.retrieve_batch`` for every query of
    ``dataset``, per method. ``config``: more :class:`~georag.eval.runner.EvalConfig` fields
    (``data_dir``, ``max_queries``)."""
    from georag.eval.runner import EvalConfig, eval_dataset, run_eval
    from georag.eval.trec import read_run

    with tempfile.TemporaryDirectory(prefix="georag-parity-") as out:
        cfg = EvalConfig(dataset=dataset, methods=methods, top_m=k, out=out, **config)
        cfg.latency_samples = 1
        run_eval(cfg)
        data = eval_dataset(cfg)
        ids = list(data.queries)
        runs = {m: read_run(Path(out) / f"{data.name}.{m}.trec") for m in methods}
    found = {}
    for method in methods:
        got = Retriever(index_dir, method).retrieve_batch([data.queries[q] for q in ids], k=k)
        # the runs hold score - rank * 1e-9 (scores_to_run's rule)
        want = [
            [(d, s + r * 1e-9) for r, (d, s) in enumerate(runs[method].get(q, {}).items())]
            for q in ids
        ]
        found[method] = compare(got, want)
    return found


def add_delete_parity(
    documents: list[dict],
    methods: list[str],
    graphs: list[str],
    queries: list[str],
    *,
    share: float = 0.1,
    k: int = 10,
) -> dict[str, dict]:
    """An index of the first ``1 - share`` of ``documents`` (plus one passage deleted
    again), updated with the rest, against an index of all of them, per method."""
    cut = int(len(documents) * (1 - share))
    extra = {"id": "__deleted__", "title": "", "text": "a passage that is deleted again"}
    with tempfile.TemporaryDirectory(prefix="georag-update-") as tmp:
        build_index([*documents[:cut], extra], Path(tmp) / "updated", graphs=graphs)
        update_index(Path(tmp) / "updated", delete=[extra["id"]])
        update_index(Path(tmp) / "updated", add=documents[cut:])
        build_index(documents, Path(tmp) / "full", graphs=graphs)
        return {
            m: compare(
                Retriever(Path(tmp) / "updated", m).retrieve_batch(queries, k),
                Retriever(Path(tmp) / "full", m).retrieve_batch(queries, k),
            )
            for m in methods
        }


def time_add(index_dir: str | os.PathLike, documents: list[dict]) -> float:
    """Seconds of one ``update_index`` adding ``documents`` (then deleted again)."""
    started = time.perf_counter()
    update_index(index_dir, add=documents)
    seconds = time.perf_counter() - started
    update_index(index_dir, delete=[d["id"] for d in documents])
    return seconds


def kill_during_update(
    index_dir: str | os.PathLike,
    documents: list[dict],
    queries: list[str],
    *,
    method: str = "dense",
    steps: tuple[str, ...] = KILL_STEPS,
    k: int = 10,
) -> dict[str, dict]:
    """For each step, a child adding ``documents`` kills itself there (``SIGKILL``); then
    the index must load and answer as before (before the switch) or as after (at
    ``switched``, the commit point passed). The answers ``before`` are taken first."""
    before = Retriever(index_dir, method).retrieve_batch(queries, k)
    found = {}
    for step in steps:
        done = _child({"kind": "add", "out": str(index_dir)}, documents, {FAULT_ENV: step})
        try:
            now = Retriever(index_dir, method)
        except ValueError as err:
            found[step] = {"killed": done.returncode == -9, "loads": False, "error": str(err)}
            continue
        added = all(d["id"] in CorpusIndex.open(index_dir).row_of for d in documents)
        result = {"killed": done.returncode == -9, "loads": True, "committed": added}
        if added:
            update_index(index_dir, delete=[d["id"] for d in documents])
            now.reload()
        found[step] = {**result, **compare(now.retrieve_batch(queries, k), before)}
    return found


def subset_folder(dataset, folder: str | os.PathLike, *, docs: int, queries: int) -> Path:
    """A BEIR folder of ``dataset``'s first ``queries`` judged queries and a corpus of their
    judged passages followed by the first passages, ``docs`` in all (a small run)."""
    folder = Path(folder)
    ids = [q for q in dataset.queries if dataset.qrels.get(q)][:queries]
    keep = list(dict.fromkeys([d for q in ids for d in dataset.qrels[q]] + list(dataset.corpus)))
    keep = [d for d in keep if d in dataset.corpus][: max(docs, 1)]
    ids = [q for q in ids if any(d in keep for d in dataset.qrels[q])]
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    corpus = (
        json.dumps({"_id": d, "title": dataset.corpus[d].title, "text": dataset.corpus[d].text})
        for d in keep
    )
    (folder / "corpus.jsonl").write_text("\n".join(corpus) + "\n")
    lines = (json.dumps({"_id": q, "text": dataset.queries[q]}) for q in ids)
    (folder / "queries.jsonl").write_text("\n".join(lines) + "\n")
    judged = [f"{q}\t{d}\t{g}" for q in ids for d, g in dataset.qrels[q].items() if d in keep]
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "\n".join(judged) + "\n"
    )
    return folder

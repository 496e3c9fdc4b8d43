"""Fault injection for every artifact georag writes: kill -9 mid-write, and flipped bytes.

For each artifact type (:data:`ARTIFACTS`):

* **kill -9**: a good version 0 is written; then, per trial, a forked writer rewrites the
  artifact in a loop (versions 1, 2, 3, ...) and is killed with SIGKILL after a random
  delay (uniform over about three writes, so kills land anywhere inside a write). The
  artifact must then load as one complete version (the previous good one or a newer
  one), and after the next write no temporary file or folder may be left.
* **byte flip**: a pristine version 0 is restored, one random byte of one random file of
  the artifact is replaced by another value, and the artifact is loaded: it must be a
  clean one-line ``ValueError`` naming a file, or (embedding cache) a recompute.

Outcomes per trial: ``ok`` (kill: a complete version loaded), ``corrupt`` (a load that
returned something that is not an intact version: wrong content after a kill, anything at
all after a flip), ``clean`` (one-line ValueError), ``recompute`` (cache entry dropped),
``traceback`` (any other exception, or a multi-line message), ``lost`` (kill: the previous
artifact did not load). ``litter`` counts temporary entries left after the next write.

Run ``PYTHONPATH=. python tests/faults/harness.py --trials 30`` for the table.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

_LITTER = re.compile(r"(^\..+\.\d+\.[0-9a-f]{8}\.(tmp|old)$)|(\.pending$)")


@dataclass
class Artifact:
    """How to write version ``v`` of one artifact under ``root`` and load it back."""

    name: str
    write: Callable[[Path, int], None]
    load: Callable[[Path], object]  # returns content, or None for "recompute"
    expected: Callable[[int], object]
    path: Callable[[Path], Path]  # the file or folder the artifact is


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and torch.equal(a, b)
        )
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


# ---------------------------------------------------------------------------- artifacts
def _vectors(v: int, n: int = 64, d: int = 16) -> torch.Tensor:
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(v))
    return x / x.norm(dim=1, keepdim=True)


_WORDS = (
    "graph curvature ricci flow diffusion manifold hyperbolic lorentz query passage "
    "retrieval ranking protein cell gene disease vaccine climate ocean energy"
).split()


def _texts(v: int, n: int = 40) -> list[str]:
    rng = random.Random(v)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 30))) for _ in range(n)]


def _cache() -> Artifact:
    from georag.retrieval.cache import EmbeddingCache

    return Artifact(
        "embedding cache",
        write=lambda root, v: EmbeddingCache(root).save("k", _vectors(v, 2000, 64)),
        load=lambda root: EmbeddingCache(root).load("k", rows=2000),
        expected=lambda v: _vectors(v, 2000, 64),
        path=lambda root: root / "k.npz",
    )


def _faiss() -> Artifact:
    from georag.retrieval.dense import DenseIndex

    def write(root: Path, v: int) -> None:
        index = DenseIndex(64, use_gpu=False)
        index.add(_vectors(v, 2000, 64))
        index.save(root / "dense.faiss")

    def load(root: Path) -> object:
        index = DenseIndex.load(root / "dense.faiss", use_gpu=False)
        return torch.from_numpy(index.index.reconstruct_n(0, index.size))

    return Artifact(
        "faiss index",
        write,
        load,
        lambda v: _vectors(v, 2000, 64),
        lambda root: root / "dense.faiss",
    )


_QUERIES = ["ricci flow graph", "protein disease", "hyperbolic lorentz passage"]


def _bm25_result(index) -> object:
    scores, indices = index.search(_QUERIES, 10)
    return {"scores": scores, "indices": indices, "n": index.num_docs, "k1": index.k1}


def _bm25() -> Artifact:
    from georag.retrieval.bm25 import BM25Index

    def expected(v: int) -> object:
        return _bm25_result(BM25Index.build(_texts(v, 400), k1=1.0 + v / 10))

    return Artifact(
        "BM25 folder",
        write=lambda root, v: BM25Index.build(_texts(v, 400), k1=1.0 + v / 10).save(root / "bm25"),
        load=lambda root: _bm25_result(BM25Index.load(root / "bm25")),
        expected=expected,
        path=lambda root: root / "bm25",
    )


def _store() -> Artifact:
    from georag.retrieval.bm25 import BM25Index
    from georag.retrieval.dense import DenseIndex
    from georag.retrieval.store import IndexStore

    def build(v: int) -> IndexStore:
        texts = _texts(v, 300)
        dense = DenseIndex(32, use_gpu=False)
        dense.add(_vectors(v, 300, 32))
        return IndexStore(
            dense,
            BM25Index.build(texts),
            [f"d{v}-{i}" for i in range(300)],
            texts,
            "all-MiniLM-L6-v2",
        )

    def content(store) -> object:
        return {
            "ids": store.doc_ids,
            "texts": store.texts,
            "vectors": torch.from_numpy(store.dense.index.reconstruct_n(0, store.size)),
            "bm25": _bm25_result(store.bm25),
        }

    return Artifact(
        "store",
        write=lambda root, v: build(v).save(root / "store"),
        load=lambda root: content(IndexStore.load(root / "store")),
        expected=lambda v: content(build(v)),
        path=lambda root: root / "store",
    )


_ENCODER = None


def _encoder():
    global _ENCODER
    if _ENCODER is None:
        from georag.models.hyte import HyTEEncoder

        _ENCODER = HyTEEncoder.from_pretrained(max_tokens=64)
    return _ENCODER


def _lorentz() -> Artifact:
    from georag.rerank.geometric.hyte import build_index
    from georag.retrieval.lorentz_index import LorentzIndex

    def write(root: Path, v: int) -> None:
        docs = {f"doc{v}-{i}": t for i, t in enumerate(_texts(v, 60))}
        build_index(docs, root / "lorentz", encoder=_encoder(), window=20, overlap=5)

    def content(index) -> object:
        return {
            "sources": index.sources,
            "texts": index.texts,
            "points": index.points.clone(),
            "bm25": index.bm25.search(_QUERIES, 5),
        }

    expected_cache: dict[int, object] = {}

    def expected(v: int) -> object:
        if v not in expected_cache:
            scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"georag-faults-{os.getpid()}-{v}"
            shutil.rmtree(scratch, ignore_errors=True)
            write(scratch, v)
            expected_cache[v] = content(LorentzIndex.load(scratch / "lorentz", encoder=_encoder()))
            shutil.rmtree(scratch, ignore_errors=True)
        return expected_cache[v]

    return Artifact(
        "Lorentz index",
        write=write,
        load=lambda root: content(LorentzIndex.load(root / "lorentz", encoder=_encoder())),
        expected=expected,
        path=lambda root: root / "lorentz",
    )


def _run(v: int) -> dict[str, dict[str, float]]:
    rng = random.Random(v)
    return {f"q{i}": {f"d{j}": round(rng.random(), 6) for j in range(100)} for i in range(50)}


def _trec() -> Artifact:
    from georag.eval.trec import read_run, write_run

    return Artifact(
        "TREC run",
        write=lambda root, v: write_run(_run(v), root / "run.trec"),
        load=lambda root: read_run(root / "run.trec"),
        expected=_run,
        path=lambda root: root,
    )


def _rows(v: int) -> list[dict]:
    rng = random.Random(v)
    return [
        {
            "dataset": "toy",
            "method": f"m{i}",
            "ndcg@10": round(rng.random(), 4),
            "ms_per_query": round(rng.random() * 10, 3),
        }
        for i in range(200)
    ]


def _results() -> Artifact:
    from georag._io import read_file_set
    from georag.eval.report import FORMAT, MANIFEST, read_results, write_reports

    def load(root: Path) -> object:
        rows = read_results(root / "results.json")
        files = read_file_set(root, manifest=MANIFEST, format=FORMAT)
        return {"rows": rows, "md": files["results.md"], "csv": files["results.csv"]}

    def expected(v: int) -> object:
        from georag.eval.report import LEGEND, markdown_table

        md = markdown_table(_rows(v)) + "\n" + LEGEND + "\n"
        return {"rows": _rows(v), "md": md.encode(), "csv": None}

    art = Artifact(
        "results set",
        lambda root, v: write_reports(_rows(v), root),
        load,
        expected,
        lambda root: root,
    )
    return art


def _state(v: int) -> dict:
    g = torch.Generator().manual_seed(v)
    return {"state_dict": {"w": torch.randn(256, 256, generator=g)}, "epoch": v}


def _checkpoint() -> Artifact:
    from train.checkpoint_io import SealedCheckpointIO

    io = SealedCheckpointIO()
    return Artifact(
        "Lightning checkpoint",
        write=lambda root, v: io.save_checkpoint(_state(v), root / "last.ckpt"),
        load=lambda root: io.load_checkpoint(root / "last.ckpt", weights_only=True),
        expected=_state,
        path=lambda root: root / "last.ckpt",
    )


def _projection() -> Artifact:
    from georag._io import load_torch
    from georag.models.hyte import _FORMAT

    def write(root: Path, v: int) -> None:
        encoder = _encoder()
        with torch.no_grad():
            encoder.projection.w1.weight.fill_(float(v))
        encoder.save(root / "projection.pt")

    def load(root: Path) -> object:
        return load_torch(root / "projection.pt", format=_FORMAT)["state_dict"]["w1.weight"]

    shape = None

    def expected(v: int) -> object:
        nonlocal shape
        shape = shape or tuple(_encoder().projection.w1.weight.shape)
        return torch.full(shape, float(v))

    return Artifact("HyTE-H projection", write, load, expected, lambda root: root / "projection.pt")


ARTIFACTS: dict[str, Callable[[], Artifact]] = {
    "cache": _cache,
    "faiss": _faiss,
    "bm25": _bm25,
    "store": _store,
    "lorentz": _lorentz,
    "trec": _trec,
    "results": _results,
    "checkpoint": _checkpoint,
    "projection": _projection,
}


# ---------------------------------------------------------------------------- trials
def _litter(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if _LITTER.search(p.name))


def _classify_error(err: BaseException) -> str:
    one_line = "\n" not in str(err) and str(err).strip() != ""
    return "clean" if isinstance(err, ValueError) and one_line else "traceback"


def _matches(art: Artifact, content: object, expected: dict[int, object]) -> bool:
    for want in expected.values():
        if art.name == "results set":  # the csv is checked by the manifest; compare the rest
            if _same(content["rows"], want["rows"]) and content["md"] == want["md"]:
                return True
        elif _same(content, want):
            return True
    return False


def kill_trials(art: Artifact, root: Path, trials: int, seed: int = 0) -> Counter:
    """SIGKILL a looping writer ``trials`` times; count outcomes (see the module doc)."""
    rng = random.Random(seed)
    expected = {v: art.expected(v) for v in range(4)}
    root.mkdir(parents=True, exist_ok=True)
    art.write(root, 0)
    start = time.perf_counter()
    art.write(root, 0)
    span = 3 * (time.perf_counter() - start) + 0.005
    outcome: Counter = Counter()
    for _ in range(trials):
        pid = os.fork()
        if pid == 0:  # the writer: rewrite versions 1..3 until killed
            try:
                v = 1
                while True:
                    art.write(root, v)
                    v = v % 3 + 1
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0.0, span))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        outcome["mid-write"] += _litter(root) > 0  # the kill left a write half done
        try:
            content = art.load(root)
        except BaseException as err:  # noqa: BLE001 - classified below
            outcome["lost" if _classify_error(err) == "clean" else "traceback"] += 1
        else:
            outcome[
                "ok" if content is not None and _matches(art, content, expected) else "corrupt"
            ] += 1
        art.write(root, 0)  # the next write cleans up after the dead one
        outcome["litter"] += _litter(root)
    return outcome


def flip_trials(art: Artifact, root: Path, trials: int, seed: int = 0) -> Counter:
    """Flip one random byte ``trials`` times; count outcomes (see the module doc)."""
    rng = random.Random(seed)
    pristine = root / "pristine"
    work = root / "work"
    pristine.mkdir(parents=True, exist_ok=True)
    art.write(pristine, 0)
    outcome: Counter = Counter()
    for _ in range(trials):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(pristine, work)
        target = art.path(work)
        files = sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [target]
        victim = rng.choice(files)
        data = bytearray(victim.read_bytes())
        at = rng.randrange(len(data))
        data[at] = (data[at] + rng.randrange(1, 256)) % 256
        victim.write_bytes(bytes(data))
        try:
            content = art.load(work)
        except BaseException as err:  # noqa: BLE001 - classified below
            outcome[_classify_error(err)] += 1
        else:
            outcome["recompute" if content is None else "corrupt"] += 1
    return outcome


COLUMNS = ("ok", "corrupt", "clean", "recompute", "traceback", "lost", "mid-write", "litter")


def run_isolated(names: list[str], trials: int, root: Path, *, timeout: float = 900.0) -> dict:
    """Both fault kinds for each artifact of ``names`` in one fresh process;
    ``{name: {fault: counts}}``.

    A fresh process keeps the caller's threads and libraries (faiss' OpenMP, bm25s, a test
    session's servers) out of the forks; a hang past ``timeout`` is reported as
    ``{"hang": 1}`` for every artifact rather than waited for.
    """
    import json
    import subprocess

    cmd = [sys.executable, __file__, "--one", ",".join(names), "--trials", str(trials)]
    try:
        done = subprocess.run(
            [*cmd, "--root", str(root)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
    except subprocess.TimeoutExpired:
        return {name: {"kill -9": {"hang": 1}, "byte flip": {"hang": 1}} for name in names}
    if done.returncode != 0:
        raise RuntimeError(f"{names}: the trial process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _one(names: str, trials: int, root: Path) -> dict:
    out: dict = {}
    for name in names.split(","):
        art = ARTIFACTS[name]()
        for fault, fn in (("kill -9", kill_trials), ("byte flip", flip_trials)):
            folder = root / f"{name}-{fault.replace(' ', '')}"
            shutil.rmtree(folder, ignore_errors=True)
            out.setdefault(name, {})[fault] = dict(fn(art, folder, trials))
            shutil.rmtree(folder, ignore_errors=True)
    return out


def table(trials: int, names: list[str], root: Path) -> str:
    """The Markdown table: artifact x {kill -9, byte flip} -> outcome counts."""
    lines = [
        "| artifact | fault | trials | intact version loaded | accepted corruptions | "
        "clean errors | recomputes | tracebacks | previous lost | killed mid-write | "
        "litter left after next write |",
        "|---|---|---:" + "|---:" * len(COLUMNS) + "|",
    ]
    for name in names:
        start = time.perf_counter()
        counts = run_isolated([name], trials, root)[name]
        label = ARTIFACTS[name]().name
        for fault, got in counts.items():
            cells = " | ".join(str(got.get(c, 0)) for c in COLUMNS)
            hang = " (HANG)" if got.get("hang") else ""
            lines.append(f"| {label}{hang} | {fault} | {trials} | {cells} |")
        print(f"  {label}: {counts} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return "\n".join(lines)


def main() -> None:
    import json
    import logging

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--artifacts", default=",".join(ARTIFACTS))
    parser.add_argument("--root", type=Path, default=Path("runs/faults"))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: artifacts, JSON out
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.disable(logging.WARNING)  # the cache's "recomputing" warnings, 30 times over
    # tqdm guards every bar (bm25s builds disabled ones) with a process-shared semaphore; a
    # writer killed while holding it would leave this process waiting for it forever
    from tqdm.std import TqdmDefaultWriteLock

    TqdmDefaultWriteLock.mp_lock = None
    if args.one:
        print(json.dumps(_one(args.one, args.trials, args.root)))
        return
    print(f"threads 1, load average {os.getloadavg()}", file=sys.stderr)
    print(table(args.trials, args.artifacts.split(","), args.root))
    shutil.rmtree(args.root, ignore_errors=True)


if __name__ == "__main__":
    if __package__ in (None, ""):
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()

"""Corpus graphs on disk: checksummed, loaded by memory map, checked before any allocation.

A graph folder holds ``edges.npy`` (int64, shape (2, E), each undirected edge once),
``lengths.npy`` (float64, shape (E,)) and ``graph.json`` (``num_nodes``), written as one
set by :func:`georag._io.write_file_set` (SHA-256 of every file in the manifest).
:func:`load_graph` checks the manifest against the files (streamed, so memory stays flat),
maps the arrays read-only (a rank touches only the pages its shard reads) and rejects,
with one line naming the file: a checksum mismatch, a truncated array, wrong dtypes or
shapes, node ids out of range and lengths that are NaN, infinite or negative.
:func:`check_memory` refuses work whose estimated footprint exceeds the memory available,
before anything is allocated.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from georag._io import ArtifactError, load_manifest, sha256_file, write_file_set

__all__ = [
    "EdgeGraph",
    "available_memory",
    "check_memory",
    "load_embeddings",
    "load_graph",
    "save_graph",
]

FORMAT = "georag-graph"
MANIFEST = "graph.manifest.json"


@dataclass(frozen=True)
class EdgeGraph:
    """``edges`` (2, E) int64 and ``lengths`` (E,) float64, memory-mapped read-only."""

    edges: np.ndarray
    lengths: np.ndarray
    num_nodes: int
    folder: Path


def available_memory() -> int:
    """Bytes of memory available to a new allocation (``MemAvailable`` on Linux, else
    the physical memory)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(estimate: int, what: str, *, limit: int | None = None) -> None:
    """Raise a one-line ValueError when ``estimate`` bytes exceed ``limit`` (default:
    :func:`available_memory`)."""
    limit = available_memory() if limit is None else limit
    if estimate > limit:
        raise ValueError(
            f"{what} needs about {estimate / 2**30:.1f} GiB, more than the "
            f"{limit / 2**30:.1f} GiB available; use more shards or a smaller graph"
        )


def save_graph(folder: str | os.PathLike, edges: np.ndarray, lengths: np.ndarray, num_nodes: int):
    """Write a graph folder (see the module docstring); returns its path."""
    edges = np.ascontiguousarray(edges, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.float64)
    _check_arrays(edges, lengths, int(num_nodes), where=Path(folder))

    def npy(array: np.ndarray) -> bytes:
        import io

        buffer = io.BytesIO()
        np.save(buffer, array)
        return buffer.getvalue()

    files = {
        "edges.npy": npy(edges),
        "lengths.npy": npy(lengths),
        "graph.json": json.dumps({"num_nodes": int(num_nodes)}),
    }
    write_file_set(folder, files, manifest=MANIFEST, format=FORMAT)
    return Path(folder)


def _check_arrays(edges: np.ndarray, lengths: np.ndarray, n: int, *, where: Path) -> None:
    if edges.ndim != 2 or edges.shape[0] != 2 or edges.dtype != np.int64:
        raise ValueError(
            f"{where / 'edges.npy'}: expected int64 (2, E), got {edges.dtype} {edges.shape}"
        )
    if lengths.shape != (edges.shape[1],) or lengths.dtype != np.float64:
        raise ValueError(
            f"{where / 'lengths.npy'}: expected float64 ({edges.shape[1]},) to match the edges, "
            f"got {lengths.dtype} {lengths.shape}"
        )
    if edges.size and (int(edges.min()) < 0 or int(edges.max()) >= n):
        raise ValueError(f"{where / 'edges.npy'}: node ids outside [0, {n})")
    bad = ~np.isfinite(lengths) | (lengths < 0)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{where / 'lengths.npy'}: {int(bad.sum())} lengths are NaN, infinite or negative "
            f"(first: edge {first}, {lengths[first]})"
        )


def _map(file: Path) -> np.ndarray:
    try:
        return np.load(file, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as err:
        raise ArtifactError(f"{file}: not a readable .npy array (truncated?): {err}") from None


def load_graph(folder: str | os.PathLike) -> EdgeGraph:
    """Check and memory-map a graph folder written by :func:`save_graph`.

    Raises
    ------
    ValueError
        One line naming the file: missing or foreign manifest, checksum or size mismatch
        (a truncated file), bad arrays, NaN / infinite / negative lengths.
    """
    folder = Path(folder)
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise ArtifactError(f"{manifest}: missing (not a graph written by georag)")
    meta = load_manifest(manifest.read_bytes(), where=manifest, format=FORMAT)
    for name in ("edges.npy", "lengths.npy", "graph.json"):
        entry, file = meta.get("files", {}).get(name), folder / name
        if not isinstance(entry, dict) or not file.is_file():
            raise ArtifactError(f"{file}: missing (listed in {manifest})")
        if file.stat().st_size != entry.get("size"):
            raise ArtifactError(
                f"{file}: {file.stat().st_size} bytes, the manifest says {entry.get('size')} "
                "(truncated or changed after georag wrote it)"
            )
        if sha256_file(file) != entry.get("sha256"):
            raise ArtifactError(f"{file}: checksum mismatch with {manifest}")
    num_nodes = int(json.loads((folder / "graph.json").read_text())["num_nodes"])
    edges, lengths = _map(folder / "edges.npy"), _map(folder / "lengths.npy")
    _check_arrays(edges, lengths, num_nodes, where=folder)
    return EdgeGraph(edges, lengths, num_nodes, folder)


def load_embeddings(path: str | os.PathLike, ids: list[str]) -> np.ndarray:
    """Memory-map a corpus embedding matrix (``.npy``, float32 (N, D), row ``k`` for
    ``ids[k]``), refusing one whose rows do not match the ids or that is truncated."""
    path = Path(path)
    embeddings = _map(path)
    if embeddings.ndim != 2 or embeddings.dtype != np.float32:
        raise ValueError(
            f"{path}: expected float32 (N, D), got {embeddings.dtype} {embeddings.shape}"
        )
    if embeddings.shape[0] != len(ids):
        raise ValueError(
            f"{path}: {embeddings.shape[0]} embedding rows for {len(ids)} document ids"
        )
    return embeddings

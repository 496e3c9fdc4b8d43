"""Corpus graphs: the top-k neighbours of every document, built once per corpus.

The graph of adaptive reranking (MacAvaney, Tonellotto and Macdonald, "Adaptive Re-Ranking
with a Corpus Graph"): row ``i`` holds the ``k`` documents most similar to document ``i``
(itself excluded), best first, and their similarities. Two kinds:

* ``dense``: exact inner product (a faiss flat index) of the unit-norm embeddings, i.e.
  the cosine k-NN graph;
* ``bm25``: the top-k BM25 hits of each document's text used as the query (bm25s, Lucene
  scoring); a document with fewer than ``k`` matching others is padded with itself
  (weight 0), as the reference implementation does, so every row has ``k`` entries.

A graph is a folder artifact (:func:`georag._io.atomic_folder`): ``neighbours.npy``
``(N, k) int32``, ``weights.npy`` ``(N, k) float32`` and a manifest holding the kind, k and
the corpus fingerprint (SHA-256 of the document ids, and of the content the graph was
built from: the embeddings or the texts). :meth:`CorpusGraph.load` checks every checksum
and the fingerprint against the corpus it is meant for, then maps both arrays into memory
(``numpy.load(mmap_mode="r")``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from georag._io import ArtifactError, atomic_folder, check_folder
from georag.retrieval.bm25 import BM25Index
from georag.retrieval.cache import content_hash
from georag.retrieval.dense import DenseIndex

__all__ = [
    "GRAPH_KINDS",
    "CorpusGraph",
    "bm25_neighbours",
    "build_corpus_graph",
    "corpus_graph_for",
    "dense_neighbours",
    "fingerprint",
]

FORMAT = "georag-corpus-graph"
VERSION = 1
GRAPH_KINDS = ("dense", "bm25")
_FILES = ("neighbours.npy", "weights.npy")


def fingerprint(doc_ids: Sequence[str], content: torch.Tensor | Sequence[str]) -> dict[str, str]:
    """What a graph was built from: ``{"doc_ids": sha256, "content": sha256}``.

    Parameters
    ----------
    doc_ids : sequence of str, length N
    content : torch.Tensor, shape (N, D), or sequence of str, length N
        The embeddings (a dense graph) or the texts (a BM25 graph).
    """
    if isinstance(content, torch.Tensor):
        array = np.ascontiguousarray(content.detach().cpu().numpy(), dtype=np.float32)
        digest = hashlib.sha256(str(array.shape).encode() + array.tobytes()).hexdigest()
    else:
        digest = content_hash(list(content))
    return {"doc_ids": content_hash(list(doc_ids)), "content": digest}


def _drop_self(
    indices: torch.Tensor, scores: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Row ``i`` of a self-search without ``i``, cut to ``k``; rows with fewer than ``k``
    real hits (index -1 or score 0 for BM25 misses) are padded with ``i``, weight 0.

    indices, scores : (N, K) search results, best first, K >= k + 1 where N > k.
    Returns (N, k) int64 and (N, k) float32.
    """
    n = indices.shape[0]
    rows = torch.arange(n).unsqueeze(1)
    real = (indices != rows) & (indices >= 0)
    # the real hits first, each row's order kept (a stable sort of the misses to the end)
    order = torch.sort((~real).to(torch.int8), dim=1, stable=True).indices[:, :k]
    real = real.gather(1, order)
    neighbours = torch.where(real, indices.gather(1, order), rows)
    weights = torch.where(real, scores.gather(1, order), 0.0)
    return neighbours, weights.float()


def dense_neighbours(embeddings: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The cosine k-NN graph of unit-norm embeddings (exact inner product, faiss).

    Parameters
    ----------
    embeddings : torch.Tensor, shape (N, D)
    k : int
        Neighbours per document, ``1 <= k < N``.

    Returns
    -------
    neighbours : torch.Tensor, shape (N, k), int64
        Best first; ties in faiss' order.
    weights : torch.Tensor, shape (N, k), float32
        Inner products.
    """
    _check_k(k, embeddings.shape[0])
    index = DenseIndex(embeddings.shape[1], kind="flat", use_gpu=False)
    index.add(embeddings)
    scores, indices = index.search(embeddings, k + 1)
    return _drop_self(indices, scores, k)


def bm25_neighbours(
    texts: Sequence[str], k: int, *, tokenizer: str = "default"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The top-``k`` BM25 neighbours of each text, the text itself used as the query.

    Parameters
    ----------
    texts : sequence of str, length N
    k : int
        Neighbours per document, ``1 <= k < N``.
    tokenizer : str
        See :func:`georag.retrieval.bm25.tokenize`.

    Returns
    -------
    neighbours : torch.Tensor, shape (N, k), int64
        Best first; a row with fewer than ``k`` matching documents is padded with itself.
    weights : torch.Tensor, shape (N, k), float32
        BM25 scores (0 for the padding).
    """
    _check_k(k, len(texts))
    index = BM25Index.build(list(texts), tokenizer=tokenizer)
    scores, indices = index.search(list(texts), k + 1)
    indices = torch.where(scores > 0, indices, -1)  # a zero BM25 score is no match
    return _drop_self(indices, scores, k)


def _check_k(k: int, n: int) -> None:
    if not 1 <= k < n:
        raise ValueError(f"k: a corpus graph of {n} documents takes 1 <= k < {n}, got {k}")


@dataclass(frozen=True)
class CorpusGraph:
    """The top-k neighbours of every corpus row.

    Parameters
    ----------
    neighbours : numpy.ndarray, shape (N, k), int32
        Row indices, best first (a row may be padded with its own index).
    weights : numpy.ndarray, shape (N, k), float32
        Edge similarities (cosine or BM25).
    kind : {"dense", "bm25"}
    fingerprint : dict
        :func:`fingerprint` of the corpus the graph was built from.
    """

    neighbours: np.ndarray
    weights: np.ndarray
    kind: str
    fingerprint: dict[str, str]

    def __post_init__(self) -> None:
        if self.kind not in GRAPH_KINDS:
            raise ValueError(f"kind must be one of {GRAPH_KINDS}, got {self.kind!r}")
        if self.neighbours.ndim != 2 or self.neighbours.dtype != np.int32:
            raise ValueError(
                f"neighbours must be an (N, k) int32 array, got {self.neighbours.dtype} "
                f"{self.neighbours.shape}"
            )
        if self.weights.shape != self.neighbours.shape or self.weights.dtype != np.float32:
            raise ValueError(
                f"weights must be a float32 array of shape {self.neighbours.shape}, got "
                f"{self.weights.dtype} {self.weights.shape}"
            )
        n = self.neighbours.shape[0]
        if self.neighbours.size and not (
            0 <= int(self.neighbours.min()) and int(self.neighbours.max()) < n
        ):
            raise ValueError(f"neighbours: row indices must lie in [0, {n})")

    @property
    def num_docs(self) -> int:
        """N, the corpus rows."""
        return self.neighbours.shape[0]

    @property
    def k(self) -> int:
        """Neighbours per row."""
        return self.neighbours.shape[1]

    @property
    def nbytes(self) -> int:
        """Size of the two arrays in bytes."""
        return self.neighbours.nbytes + self.weights.nbytes

    def check_corpus(self, doc_ids: Sequence[str], content: torch.Tensor | Sequence[str]) -> None:
        """Raise ValueError unless this graph was built from this corpus and content."""
        expected = fingerprint(doc_ids, content)
        if self.fingerprint.get("doc_ids") != expected["doc_ids"]:
            raise ValueError(
                f"graph: a corpus graph of another corpus ({self.num_docs} rows, doc ids "
                f"sha256 {str(self.fingerprint.get('doc_ids'))[:12]}; this corpus has "
                f"{len(doc_ids)} rows, {expected['doc_ids'][:12]})"
            )
        if self.fingerprint.get("content") != expected["content"]:
            raise ValueError(
                f"graph: a stale {self.kind} corpus graph: the corpus' "
                f"{'embeddings' if self.kind == 'dense' else 'texts'} changed since it was built"
            )

    def save(self, path: str | os.PathLike) -> None:
        """Write the graph into folder ``path`` atomically, with checksums."""
        settings = {"kind": self.kind, "k": self.k, "num_docs": self.num_docs}
        with atomic_folder(
            path, format=FORMAT, version=VERSION, settings=settings, fingerprint=self.fingerprint
        ) as tmp:
            np.save(tmp / _FILES[0], np.ascontiguousarray(self.neighbours))
            np.save(tmp / _FILES[1], np.ascontiguousarray(self.weights))

    @classmethod
    def load(cls, path: str | os.PathLike) -> CorpusGraph:
        """Map a graph written by :meth:`save` into memory (every checksum checked first).

        Raises
        ------
        ValueError
            One line naming ``path``: a missing, foreign, truncated or corrupt graph.
        """
        try:
            manifest = check_folder(path, format=FORMAT, version=VERSION)
        except ArtifactError as err:
            raise ValueError(f"path: {err}") from None
        settings, prints = manifest.get("settings"), manifest.get("fingerprint")
        if (
            not isinstance(settings, dict)
            or not isinstance(prints, dict)
            or sorted(manifest.get("files", {})) != sorted(_FILES)
        ):
            raise ValueError(f"path: {path}/manifest.json is not a corpus graph manifest")
        folder = Path(path)
        neighbours = np.load(folder / _FILES[0], mmap_mode="r")
        weights = np.load(folder / _FILES[1], mmap_mode="r")
        expected = (settings.get("num_docs"), settings.get("k"))
        if neighbours.shape != expected:
            raise ValueError(
                f"path: {path} holds a {neighbours.shape} graph, its manifest {expected}"
            )
        return cls(neighbours, weights, str(settings.get("kind")), dict(prints))


def _content(kind: str, embeddings, texts):
    """What a ``kind`` graph is built from and checked against (the embeddings or texts)."""
    if kind not in GRAPH_KINDS:
        raise ValueError(f"kind must be one of {GRAPH_KINDS}, got {kind!r}")
    content = embeddings if kind == "dense" else texts
    if content is None:
        need = "embeddings" if kind == "dense" else "texts"
        raise ValueError(f"{need}: a {kind} corpus graph is built from the corpus' {need}")
    return content


def build_corpus_graph(
    doc_ids: Sequence[str],
    *,
    kind: str,
    k: int,
    embeddings: torch.Tensor | None = None,
    texts: Sequence[str] | None = None,
) -> CorpusGraph:
    """Build the ``kind`` graph of a corpus.

    Parameters
    ----------
    doc_ids : sequence of str, length N
    kind : {"dense", "bm25"}
    k : int
        Neighbours per document.
    embeddings : torch.Tensor, shape (N, D), optional
        Unit-norm; needed for ``dense``.
    texts : sequence of str, length N, optional
        Needed for ``bm25``.
    """
    content = _content(kind, embeddings, texts)
    if len(content) != len(doc_ids):
        raise ValueError(f"doc_ids: {len(doc_ids)} ids for {len(content)} rows of content")
    if kind == "dense":
        neighbours, weights = dense_neighbours(embeddings, k)
    else:
        neighbours, weights = bm25_neighbours(texts, k)
    return CorpusGraph(
        neighbours.numpy().astype(np.int32),
        weights.numpy().astype(np.float32),
        kind,
        fingerprint(doc_ids, content),
    )


def corpus_graph_for(
    doc_ids: Sequence[str],
    *,
    kind: str,
    k: int,
    embeddings: torch.Tensor | None = None,
    texts: Sequence[str] | None = None,
    path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> CorpusGraph:
    """The ``kind`` graph of a corpus: loaded from ``path`` (checked against the corpus),
    else from ``cache_dir/graphs`` (built and saved there the first time), else built.

    Parameters are those of :func:`build_corpus_graph`; ``path`` names a saved graph that
    must match the corpus (another corpus' or a stale graph raises ValueError), while a
    cached graph that does not match is rebuilt.
    """
    content = _content(kind, embeddings, texts)
    if path is not None:
        graph = CorpusGraph.load(path)
        if graph.kind != kind or graph.k != k:
            raise ValueError(
                f"graph: {path} is a {graph.kind} graph with k={graph.k}, not {kind} with k={k}"
            )
        graph.check_corpus(doc_ids, content)
        return graph
    if cache_dir is None:
        return build_corpus_graph(doc_ids, kind=kind, k=k, embeddings=embeddings, texts=texts)
    key = fingerprint(doc_ids, content)
    folder = Path(cache_dir) / "graphs" / f"{kind}-k{k}-{key['content'][:24]}"
    if (folder / "manifest.json").is_file():
        try:
            graph = CorpusGraph.load(folder)
            graph.check_corpus(doc_ids, content)
            return graph
        except ValueError:
            pass  # a corrupt or foreign cache entry is rebuilt
    graph = build_corpus_graph(doc_ids, kind=kind, k=k, embeddings=embeddings, texts=texts)
    graph.save(folder)
    return CorpusGraph.load(folder)

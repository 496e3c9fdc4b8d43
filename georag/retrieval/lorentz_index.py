"""A persistent HyTE-H index: Lorentz points, chunk metadata, BM25 state, texts, sources.

On disk an index is a folder artifact of :mod:`georag._io` (the paper's three-file format,
split a little further):

``manifest.json``
    Format tag, version, sizes, settings, and the size and SHA-256 of every file
    (:func:`georag._io.atomic_folder`).
``points.bin``
    A 32-byte header (magic ``GEORAGLZ``, version, N, D) and one contiguous float32
    N x D matrix (D = d + 1, time coordinate first), read back by ``np.memmap``.
``chunks.json``
    For each chunk: its source (index into the source list), its number within the
    source, and the byte offset of its text.
``texts.z``
    All chunk texts, UTF-8, concatenated and zlib-compressed (default level).
``sources.txt``
    The source document paths or ids, one per line.
``bm25/``
    The BM25 index of the chunks (:class:`~georag.retrieval.bm25.BM25Index`, bm25s).
``projection.pt``
    The HyTE-H projection the points were made with (queries must use the same).

A write builds the whole folder beside the old one and swaps it into place; a crash at any
point leaves the previous index. A load checks the manifest and the SHA-256 of every file
(always) and the matrix header, and raises :class:`IndexFormatError` naming the bad file.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from georag._io import ArtifactError, atomic_folder, check_folder
from georag.data.chunking import chunk_documents
from georag.geometry.hyperbolic import hybrid_scores
from georag.models.hyte import HyTEEncoder
from georag.retrieval.bm25 import BM25Index

__all__ = ["IndexFormatError", "LorentzIndex", "build_lorentz_index", "check_search"]

FORMAT = "georag-lorentz-index"
VERSION = 2
MAGIC = b"GEORAGLZ"
_HEADER = struct.Struct("<8sIIQQ")  # magic, version, reserved, N, D  (32 bytes)


class IndexFormatError(ValueError):
    """The folder is not a georag Lorentz index, or one of its files is damaged."""


def _as_docs(texts_or_docs: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    if isinstance(texts_or_docs, str):
        raise ValueError("texts_or_docs must be a list of texts or a {source: text} dict")
    if isinstance(texts_or_docs, Mapping):
        docs = {str(key): value for key, value in texts_or_docs.items()}
    else:
        docs = {str(i): text for i, text in enumerate(texts_or_docs)}
    if not docs:
        raise ValueError("texts_or_docs: nothing to index (empty)")
    bad = [key for key in docs if not key or "\n" in key or "\r" in key]
    if bad:
        raise ValueError(f"texts_or_docs: source names must be non-empty single lines: {bad[:3]}")
    empty = [key for key, text in docs.items() if not isinstance(text, str) or not text.strip()]
    if empty:
        raise ValueError(
            f"texts_or_docs: {len(empty)} empty document(s), e.g. {empty[:5]}; "
            "remove them before indexing (nothing was written)"
        )
    return docs


class LorentzIndex:
    """A loaded index. Build one with :func:`build_lorentz_index`, open one with :meth:`load`.

    Attributes
    ----------
    path : Path
    points : torch.Tensor, shape (N, d+1), float32
        Chunk points, a view of the memory-mapped matrix.
    sources : list of str
        Source document paths or ids.
    chunk_source : numpy.ndarray, shape (N,), int64
        Index into ``sources`` of each chunk.
    chunk_part : numpy.ndarray, shape (N,), int64
        Number of each chunk within its source.
    bm25 : BM25Index
    alpha, top_m, offset
        The search defaults stored with the index (BM25 weight, BM25 candidates per query,
        sigmoid shift; see :class:`~georag.rerank.geometric.hyte.HyTEConfig`).
    """

    def __init__(
        self,
        path: Path,
        manifest: dict,
        points: np.ndarray,
        meta: dict,
        sources: list[str],
        texts_z: bytes,
        bm25: BM25Index,
        encoder: HyTEEncoder | None,
    ) -> None:
        self.path = path
        self.manifest = manifest
        self._matrix = points
        self.points = torch.from_numpy(points)
        self.chunk_source = np.asarray(meta["source"], dtype=np.int64)
        self.chunk_part = np.asarray(meta["part"], dtype=np.int64)
        self._offsets = np.asarray(meta["text_offsets"], dtype=np.int64)
        self.sources = sources
        self._texts_z = texts_z
        self._texts: list[str] | None = None
        self.bm25 = bm25
        search = manifest["search"]
        self.alpha, self.top_m, self.offset = search["alpha"], search["top_m"], search["offset"]
        self._encoder = encoder

    def __len__(self) -> int:
        return self.points.shape[0]

    @property
    def dim(self) -> int:
        """Coordinates per point (d + 1)."""
        return self.points.shape[1]

    @property
    def chunk_ids(self) -> list[str]:
        """``"<source>#<part>"`` for each chunk."""
        return [
            f"{self.sources[s]}#{p}"
            for s, p in zip(self.chunk_source, self.chunk_part, strict=True)
        ]

    @property
    def doc_ids(self) -> list[str]:
        """The source of each chunk."""
        return [self.sources[s] for s in self.chunk_source]

    @property
    def texts(self) -> list[str]:
        """Chunk texts (decompressed on first use)."""
        if self._texts is None:
            blob = zlib.decompress(self._texts_z)
            offsets = np.append(self._offsets, len(blob)).tolist()
            self._texts = [
                blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:], strict=True)
            ]
        return self._texts

    @property
    def encoder(self) -> HyTEEncoder:
        """The HyTE-H encoder for queries (built from the stored projection on first use)."""
        if self._encoder is None:
            self._encoder = HyTEEncoder.from_pretrained(
                self.manifest["model"]["model_path"], weights=self.path / "projection.pt"
            )
            _check_encoder(self._encoder, self.manifest, self.path)
        return self._encoder

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str | os.PathLike, *, encoder: HyTEEncoder | None = None) -> LorentzIndex:
        """Open an index folder (the size and SHA-256 of every file checked).

        Parameters
        ----------
        path : str or path
        encoder : HyTEEncoder, optional
            The encoder for queries; it must be the projection the index was built with
            (checked by dimension and fingerprint). By default the stored one is loaded on
            the first search.

        Raises
        ------
        IndexFormatError
            Missing, foreign, truncated or corrupt files.
        ValueError
            An ``encoder`` that does not match the index.
        """
        path = Path(path)
        if not (path / "manifest.json").is_file():
            raise IndexFormatError(f"path: {path} is not a georag Lorentz index (no manifest.json)")
        try:
            manifest = check_folder(path, format=FORMAT, version=VERSION)
        except ArtifactError as err:
            raise IndexFormatError(str(err)) from None
        try:
            return cls._load_checked(path, manifest, encoder)
        except (
            KeyError,
            TypeError,
            IndexError,
            AttributeError,
            OverflowError,
            struct.error,
            UnicodeDecodeError,
            json.JSONDecodeError,
            RecursionError,
            zlib.error,
        ) as err:
            raise IndexFormatError(
                f"{path / 'manifest.json'}: inconsistent index ({type(err).__name__}: "
                f"{str(err)[:100]})"
            ) from None

    @classmethod
    def _load_checked(cls, path: Path, manifest: dict, encoder: HyTEEncoder | None) -> LorentzIndex:
        if encoder is not None:
            _check_encoder(encoder, manifest, path)
        n, d = manifest["num_chunks"], manifest["dim"]
        points_file = path / "points.bin"
        with open(points_file, "rb") as handle:
            header = handle.read(_HEADER.size)
        magic, version, _, n_file, d_file = _HEADER.unpack(header)
        if magic != MAGIC or version != VERSION or (n_file, d_file) != (n, d):
            raise IndexFormatError(
                f"{points_file}: bad header (magic {magic!r}, version {version}, shape "
                f"{n_file} x {d_file}; expected {MAGIC!r}, {VERSION}, {n} x {d})"
            )
        matrix = np.memmap(
            points_file, dtype=np.float32, mode="c", offset=_HEADER.size, shape=(n, d)
        )
        meta = json.loads((path / "chunks.json").read_bytes())
        sources = (path / "sources.txt").read_text(encoding="utf-8").split("\n")[:-1]
        if len(meta["source"]) != n or len(sources) != manifest["num_sources"]:
            raise IndexFormatError(f"{path}: chunk metadata and sources disagree with the manifest")
        try:
            bm25 = BM25Index.load(path / "bm25")
        except ValueError as err:
            raise IndexFormatError(str(err)) from None
        if bm25.num_docs != n:
            raise IndexFormatError(f"{path}: the BM25 index holds {bm25.num_docs} chunks, not {n}")
        texts_z = (path / "texts.z").read_bytes()
        return cls(path, manifest, matrix, meta, sources, texts_z, bm25, encoder)

    # ------------------------------------------------------------------ search
    @torch.no_grad()
    def search(
        self,
        queries: list[str],
        k: int = 10,
        *,
        alpha: float | None = None,
        top_m: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Two-stage hybrid search: BM25 top-M, then the HyTE-H hybrid score.

        Parameters
        ----------
        queries : list of str, length B
        k : int
            Results per query (at most ``top_m`` and the number of chunks).
        alpha : float, optional
            BM25 weight (default: the index's, :attr:`alpha`). 1 is pure BM25, 0 pure Lorentz.
        top_m : int, optional
            BM25 candidates per query (default: the index's, :attr:`top_m`).

        Returns
        -------
        scores : torch.Tensor, shape (B, k'), float32
            Hybrid scores, best first.
        indices : torch.Tensor, shape (B, k'), int64
            Chunk indices (see :attr:`chunk_ids`, :attr:`doc_ids`, :attr:`texts`).
        """
        alpha = self.alpha if alpha is None else alpha
        top_m = self.top_m if top_m is None else top_m
        check_search(alpha, top_m)
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if isinstance(queries, str):
            raise ValueError("queries must be a list of str, got a single str")
        query = self.encoder.encode(queries).to(self.points)  # the encoder may sit on a GPU
        bm25, cand = self.bm25.search(queries, top_m)
        points = self.points.index_select(0, cand.flatten()).view(*cand.shape, self.dim)
        mask = torch.ones_like(bm25, dtype=torch.bool)
        scores = hybrid_scores(bm25, query, points, mask, alpha=alpha, offset=self.offset)
        top, order = scores.topk(min(k, scores.shape[1]), dim=1)
        return top, cand.gather(1, order)

    # ------------------------------------------------------------------ writing
    def add(self, texts_or_docs: Mapping[str, str] | Sequence[str]) -> LorentzIndex:
        """Add documents, rewriting the index atomically; returns the reloaded index.

        Raises ``ValueError`` for sources already in the index or empty documents; the
        index on disk is unchanged then.
        """
        docs = _as_docs(texts_or_docs)
        taken = set(self.sources)
        clash = [key for key in docs if key in taken]
        if clash:
            raise ValueError(f"texts_or_docs: already indexed: {clash[:5]} (nothing changed)")
        chunking = self.manifest["chunking"]
        chunks = chunk_documents(docs, **chunking)
        points = self.encoder.encode(chunks.texts).numpy()
        base = len(self.sources)
        new_sources = list(docs)
        position = {key: base + i for i, key in enumerate(new_sources)}
        source = np.concatenate([self.chunk_source, [position[d] for d in chunks.doc_ids]]).astype(
            np.int64
        )
        part = np.concatenate(
            [self.chunk_part, [int(c.rsplit("#", 1)[1]) for c in chunks.chunk_ids]]
        )
        _write(
            self.path,
            matrix=np.concatenate([np.asarray(self._matrix), points]),
            source=source,
            part=part.astype(np.int64),
            texts=self.texts + chunks.texts,
            sources=self.sources + new_sources,
            encoder=self.encoder,
            chunking=chunking,
            bm25=self.manifest["bm25"],
            search=self.manifest["search"],
        )
        return LorentzIndex.load(self.path, encoder=self.encoder)


def check_search(alpha: float, top_m: int) -> None:
    """Refuse a BM25 weight ``alpha`` outside [0, 1] or fewer than one BM25 candidate."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if top_m < 1:
        raise ValueError(f"top_m must be >= 1, got {top_m}")


def _check_encoder(encoder: HyTEEncoder, manifest: dict, path: Path) -> None:
    if encoder.dim + 1 != manifest["dim"]:
        raise ValueError(
            f"encoder: gives {encoder.dim + 1}-dim points but the index at {path} holds "
            f"{manifest['dim']}-dim points (mismatched dims between index and model)"
        )
    want = manifest["model"]["fingerprint"]
    if encoder.projection.fingerprint() != want:
        raise ValueError(
            f"encoder: projection {encoder.projection.fingerprint()} is not the one the index "
            f"at {path} was built with ({want})"
        )


def _write(
    path: Path,
    *,
    matrix: np.ndarray,
    source: np.ndarray,
    part: np.ndarray,
    texts: list[str],
    sources: list[str],
    encoder: HyTEEncoder,
    chunking: dict,
    bm25: dict,
    search: dict,
) -> None:
    """Write the index folder at ``path``, replacing any index there as a whole."""
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    header = _HEADER.pack(MAGIC, VERSION, 0, matrix.shape[0], matrix.shape[1])
    encoded = [text.encode("utf-8") for text in texts]
    offsets = np.cumsum([0] + [len(b) for b in encoded[:-1]]).tolist()
    meta = {"source": source.tolist(), "part": part.tolist(), "text_offsets": offsets}
    model = {
        "model_path": encoder.model_path,
        "fingerprint": encoder.projection.fingerprint(),
        "k": float(encoder.projection.k),
        "power": encoder.projection.power,
    }
    bm25_index = BM25Index.build(texts, **bm25)
    with atomic_folder(
        path,
        format=FORMAT,
        version=VERSION,
        num_chunks=int(matrix.shape[0]),
        dim=int(matrix.shape[1]),
        num_sources=len(sources),
        model=model,
        chunking=chunking,
        bm25=bm25,
        search=search,
    ) as tmp:
        (tmp / "points.bin").write_bytes(header + matrix.tobytes())
        (tmp / "texts.z").write_bytes(zlib.compress(b"".join(encoded)))
        (tmp / "chunks.json").write_text(json.dumps(meta, separators=(",", ":")))
        (tmp / "sources.txt").write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
        encoder.save(tmp / "projection.pt")
        bm25_index.save(tmp / "bm25")


def build_lorentz_index(
    texts_or_docs: Mapping[str, str] | Sequence[str],
    out_path: str | os.PathLike,
    *,
    encoder: HyTEEncoder,
    alpha: float,
    top_m: int,
    offset: float,
    window: int = 300,
    overlap: int = 60,
    bm25_tokenizer: str = "whitespace",
    k1: float = 1.2,
    b: float = 0.75,
) -> LorentzIndex:
    """Chunk, encode and index documents into a new index folder (replacing any there).

    Parameters
    ----------
    texts_or_docs : dict of str to str, or list of str
        ``{source path or id: text}``, or texts (sources are then ``"0"``, ``"1"``, ...).
        Empty documents are rejected (nothing is written).
    out_path : str or path
        The index folder.
    encoder : HyTEEncoder
        The encoder of the points (its projection is stored with them).
    alpha, top_m, offset
        Search defaults stored with the index (BM25 weight, BM25 candidates per query,
        sigmoid shift); :func:`georag.rerank.geometric.hyte.build_index` takes them, and
        the encoder, from a :class:`~georag.rerank.geometric.hyte.HyTEConfig`.
    window, overlap : int
        Sliding-window chunking in words (paper: 300 and 60).
    bm25_tokenizer : str
        ``whitespace`` (the paper's lowercase split), ``default`` or ``stem``.
    k1, b : float
        BM25 parameters (paper: 1.2, 0.75).
    """
    check_search(alpha, top_m)
    docs = _as_docs(texts_or_docs)
    chunks = chunk_documents(docs, window=window, overlap=overlap)
    points = encoder.encode(chunks.texts).cpu().numpy()
    position = {key: i for i, key in enumerate(docs)}
    source = np.asarray([position[d] for d in chunks.doc_ids], dtype=np.int64)
    part = np.asarray([int(c.rsplit("#", 1)[1]) for c in chunks.chunk_ids], dtype=np.int64)
    out = Path(out_path)
    search = {
        "alpha": alpha,
        "top_m": top_m,
        "offset": offset,
        "model": encoder.model_path,
        "k": float(encoder.projection.k),
        "power": encoder.projection.power,
    }
    _write(
        out,
        matrix=points,
        source=source,
        part=part,
        texts=chunks.texts,
        sources=list(docs),
        encoder=encoder,
        chunking={"window": window, "overlap": overlap},
        bm25={"k1": k1, "b": b, "tokenizer": bm25_tokenizer},
        search=search,
    )
    return LorentzIndex.load(out, encoder=encoder)

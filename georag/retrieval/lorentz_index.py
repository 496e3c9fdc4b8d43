"""A persistent HyTE-H index: Lorentz points, chunk metadata, BM25 state, texts, sources.

On disk an index is a folder (the paper's three-file format, split a little further):

``manifest.json``
    Format tag, generation, sizes, settings, and the name, size and CRC-32 of every file.
``idx.<g>.bin``
    A 32-byte header (magic ``GEORAGLZ``, version, N, D) and one contiguous float32
    N x D matrix (D = d + 1, time coordinate first), read back by ``np.memmap``.
``chunks.<g>.json``
    For each chunk: its source (index into the source list), its number within the
    source, and the byte offset of its text.
``texts.<g>.z``
    All chunk texts, UTF-8, concatenated and zlib-compressed (default level).
``paths.<g>.txt``
    The source document paths or ids, one per line.
``bm25.<g>.bin``
    The BM25 state (:class:`BM25State`): bm25s' term-document score matrix as raw
    float32 / int32 / int64 arrays and the vocabulary, one term per line.
``projection.<g>.pt``
    The HyTE-H projection the points were made with (queries must use the same).

A write creates the files of generation ``g + 1`` next to the old ones (each through a
temporary name, :func:`georag._io.atomic_write`), then swaps ``manifest.json`` atomically,
then removes generation ``g`` and any dead writer's temporary files: a crash at any point
leaves a loadable index. A load checks the magic,
the sizes and the checksums and raises :class:`IndexFormatError` naming the bad file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from georag._io import ArtifactError, atomic_write, dump_manifest, load_manifest
from georag.data.chunking import chunk_documents
from georag.geometry.hyperbolic import hybrid_scores
from georag.models.hyte import HyTEConfig, HyTEEncoder
from georag.retrieval.bm25 import BM25Index, tokenize

__all__ = ["BM25State", "IndexFormatError", "LorentzIndex", "build_lorentz_index"]

FORMAT = "georag-lorentz-index"
VERSION = 1
MAGIC = b"GEORAGLZ"
_HEADER = struct.Struct("<8sIIQQ")  # magic, version, reserved, N, D  (32 bytes)
_BM25_HEADER = struct.Struct("<8sIIQQQQ")  # magic, version, reserved, nnz, V, N, vocab bytes
_BM25_MAGIC = b"GEORAGBM"
_OWNED = re.compile(r"^\.?(idx|texts|chunks|paths|projection|bm25)\.")  # files of any generation


class IndexFormatError(ValueError):
    """The folder is not a georag Lorentz index, or one of its files is damaged."""


def _term_hash(term: str) -> int:
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")


class BM25State:
    """The BM25 part of an index: bm25s' precomputed (Lucene) term-document scores.

    Built by georag's :class:`~georag.retrieval.bm25.BM25Index` (bm25s) and stored as raw
    arrays: the sparse scores, the terms, and a sorted table of 64-bit term hashes. A load
    maps the arrays without parsing anything (no vocabulary dict is built); a search looks
    terms up by hash (checked against the stored term) and scores a whole batch of queries
    with one sparse matrix product, where bm25s scores queries one by one. Scores
    equal ``BM25Index.search``'s (up to float32 summation order).

    Parameters
    ----------
    arrays : dict of str to numpy.ndarray
        ``data`` (nnz,) float32 scores; ``indices`` (nnz,) int32 documents; ``indptr``
        (V + 1,) int32, the scores of term j being ``data[indptr[j]:indptr[j + 1]]``;
        ``hashes`` (V,) uint64 sorted; ``order`` (V,) int32, the term of each hash;
        ``offsets`` (V + 1,) int64 into ``words``.
    words : bytes
        The terms, UTF-8, concatenated in id order.
    num_docs : int
    tokenizer : str
        As in :func:`georag.retrieval.bm25.tokenize`.
    """

    _LAYOUT = (
        ("data", np.float32, "nnz"),
        ("indices", np.int32, "nnz"),
        ("indptr", np.int32, "v1"),
        ("hashes", np.uint64, "v"),
        ("order", np.int32, "v"),
        ("offsets", np.int64, "v1"),
    )

    def __init__(
        self, arrays: dict[str, np.ndarray], words: bytes, *, num_docs: int, tokenizer: str
    ) -> None:
        nnz, vocab = len(arrays["data"]), len(arrays["hashes"])
        if (
            len(arrays["indices"]) != nnz
            or len(arrays["indptr"]) != vocab + 1
            or int(arrays["indptr"][-1]) != nnz
            or len(arrays["order"]) != vocab
            or len(arrays["offsets"]) != vocab + 1
            or int(arrays["offsets"][-1]) != len(words)
        ):
            raise IndexFormatError(
                f"BM25 state: array sizes disagree ({nnz} scores, {vocab} terms)"
            )
        from scipy.sparse import csr_matrix

        self.arrays = arrays
        self.words = words
        self.num_docs = num_docs
        self.tokenizer = tokenizer
        # term x document scores; shares memory with the arrays (no copy at load)
        self.matrix = csr_matrix(
            (arrays["data"], arrays["indices"], arrays["indptr"]), shape=(vocab, num_docs)
        )

    @classmethod
    def from_bm25(cls, index: BM25Index) -> BM25State:
        """Take the state of a built :class:`BM25Index`."""
        scores = index.retriever.scores
        if len(scores["data"]) >= 2**31:
            raise ValueError(f"index: {len(scores['data'])} BM25 postings exceed int32 offsets")
        terms = len(scores["indptr"]) - 1  # bm25s adds a column-less "" term after these
        vocab = sorted(index.retriever.vocab_dict, key=index.retriever.vocab_dict.get)[:terms]
        encoded = [term.encode("utf-8") for term in vocab]
        hashes = np.asarray([_term_hash(term) for term in vocab], dtype=np.uint64)
        order = np.argsort(hashes, kind="stable").astype(np.int32)
        arrays = {
            "data": np.asarray(scores["data"], dtype=np.float32),
            "indices": np.asarray(scores["indices"], dtype=np.int32),
            "indptr": np.asarray(scores["indptr"], dtype=np.int32),
            "hashes": hashes[order],
            "order": order,
            "offsets": np.cumsum([0] + [len(e) for e in encoded], dtype=np.int64),
        }
        return cls(arrays, b"".join(encoded), num_docs=index.num_docs, tokenizer=index.tokenizer)

    def to_bytes(self) -> bytes:
        """Header, then the arrays of ``_LAYOUT`` and the terms."""
        head = _BM25_HEADER.pack(
            _BM25_MAGIC,
            VERSION,
            0,
            len(self.arrays["data"]),
            len(self.arrays["hashes"]),
            self.num_docs,
            len(self.words),
        )
        return b"".join(
            [head]
            + [self.arrays[name].astype(dtype).tobytes() for name, dtype, _ in self._LAYOUT]
            + [self.words]
        )

    @classmethod
    def from_bytes(cls, blob: bytes, *, tokenizer: str, where: str) -> BM25State:
        """Inverse of :meth:`to_bytes`; the arrays are views of ``blob``."""
        if len(blob) < _BM25_HEADER.size:
            raise IndexFormatError(f"{where}: too short for a BM25 state")
        magic, version, _, nnz, vocab, num_docs, words = _BM25_HEADER.unpack_from(blob)
        counts = {"nnz": nnz, "v": vocab, "v1": vocab + 1}
        sizes = [np.dtype(dtype).itemsize * counts[n] for _, dtype, n in cls._LAYOUT]
        if (
            magic != _BM25_MAGIC
            or version != VERSION
            or len(blob) != _BM25_HEADER.size + sum(sizes) + words
        ):
            raise IndexFormatError(f"{where}: not a georag BM25 state (bad header or size)")
        arrays, at = {}, _BM25_HEADER.size
        for (name, dtype, n), size in zip(cls._LAYOUT, sizes, strict=True):
            arrays[name] = np.frombuffer(blob, dtype, counts[n], at)
            at += size
        return cls(arrays, blob[at:], num_docs=num_docs, tokenizer=tokenizer)

    def term_ids(self, terms: list[str]) -> np.ndarray:
        """Ids of ``terms`` (-1 for terms not in the vocabulary), shape (len(terms),)."""
        hashes, order, offsets = self.arrays["hashes"], self.arrays["order"], self.arrays["offsets"]
        wanted = np.asarray([_term_hash(term) for term in terms], dtype=np.uint64)
        pos = np.searchsorted(hashes, wanted)
        out = np.full(len(terms), -1, dtype=np.int64)
        for i, (term, p) in enumerate(zip(terms, pos.tolist(), strict=True)):
            key = term.encode("utf-8")
            while p < len(hashes) and hashes[p] == wanted[i]:  # equal hashes: check the term
                j = int(order[p])
                if self.words[offsets[j] : offsets[j + 1]] == key:
                    out[i] = j
                    break
                p += 1
        return out

    def search(self, queries: list[str], k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-``k`` documents per query, scored in batches.

        Returns
        -------
        scores : torch.Tensor, shape (B, k'), float32
        indices : torch.Tensor, shape (B, k'), int64
            ``k' = min(k, num_docs)``; a query with no known term scores 0 everywhere.
        """
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        from scipy.sparse import csr_matrix

        k = min(k, self.num_docs)
        tokens = tokenize(list(queries), self.tokenizer)
        lengths = np.asarray([len(words) for words in tokens], dtype=np.int64)
        ids = self.term_ids([word for words in tokens for word in words])
        rows = np.repeat(np.arange(len(tokens)), lengths)
        known = ids >= 0
        counts = csr_matrix(  # query-term counts; repeated terms add up, as in bm25s
            (np.ones(int(known.sum()), np.float32), (rows[known], ids[known])),
            shape=(len(tokens), self.matrix.shape[0]),
        )
        out_s, out_i = [], []
        for start in range(0, len(tokens), 1024):
            dense = (counts[start : start + 1024] @ self.matrix).toarray()
            top = torch.from_numpy(dense).topk(k, dim=1)
            out_s.append(top.values)
            out_i.append(top.indices)
        if not out_s:
            return torch.empty(0, k), torch.empty(0, k, dtype=torch.long)
        return torch.cat(out_s), torch.cat(out_i)


def _crc32(data) -> int:
    return zlib.crc32(memoryview(data).cast("B")) & 0xFFFFFFFF


def _file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            crc = zlib.crc32(block, crc)
    return crc & 0xFFFFFFFF


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
    bm25 : BM25State
    config : HyTEConfig
        Search defaults (alpha, top_m, offset) and the model the points were made with.
    """

    def __init__(
        self,
        path: Path,
        manifest: dict,
        points: np.ndarray,
        meta: dict,
        sources: list[str],
        texts_z: bytes,
        bm25: BM25State,
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
        self.config = HyTEConfig(**manifest["search"])
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
            gen = self.manifest["generation"]
            self._encoder = HyTEEncoder.from_pretrained(
                self.manifest["model"]["model_path"], weights=self.path / f"projection.{gen}.pt"
            )
            _check_encoder(self._encoder, self.manifest, self.path)
        return self._encoder

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(
        cls, path: str | os.PathLike, *, encoder: HyTEEncoder | None = None, verify: bool = True
    ) -> LorentzIndex:
        """Open an index folder.

        Parameters
        ----------
        path : str or path
        encoder : HyTEEncoder, optional
            The encoder for queries; it must be the projection the index was built with
            (checked by dimension and fingerprint). By default the stored one is loaded on
            the first search.
        verify : bool
            Check the CRC-32 of every file (sizes and the header are always checked).

        Raises
        ------
        IndexFormatError
            Missing, foreign, truncated or corrupt files.
        ValueError
            An ``encoder`` that does not match the index.
        """
        path = Path(path)
        manifest_path = path / "manifest.json"
        if not manifest_path.is_file():
            raise IndexFormatError(f"path: {path} is not a georag Lorentz index (no manifest.json)")
        try:
            manifest = load_manifest(
                manifest_path.read_bytes(), where=manifest_path, format=FORMAT, version=VERSION
            )
        except ArtifactError as err:
            raise IndexFormatError(str(err)) from None
        try:
            return cls._load_checked(path, manifest, encoder, verify)
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
                f"{manifest_path}: inconsistent index ({type(err).__name__}: {str(err)[:100]})"
            ) from None

    @classmethod
    def _load_checked(
        cls, path: Path, manifest: dict, encoder: HyTEEncoder | None, verify: bool
    ) -> LorentzIndex:
        if encoder is not None:
            _check_encoder(encoder, manifest, path)
        files = manifest["files"]
        for name, entry in files.items():
            file = path / entry["name"]
            if not file.is_file():
                raise IndexFormatError(f"{path}: missing file {entry['name']} ({name})")
            size = file.stat().st_size
            if size != entry["size"]:
                raise IndexFormatError(
                    f"{file}: {size} bytes, the manifest says {entry['size']} (truncated or "
                    "overwritten)"
                )
        n, d = manifest["num_chunks"], manifest["dim"]
        idx_file = path / files["idx"]["name"]
        with open(idx_file, "rb") as handle:
            header = handle.read(_HEADER.size)
        magic, version, _, n_file, d_file = _HEADER.unpack(header)
        if magic != MAGIC or version != VERSION or (n_file, d_file) != (n, d):
            raise IndexFormatError(
                f"{idx_file}: bad header (magic {magic!r}, version {version}, shape "
                f"{n_file} x {d_file}; expected {MAGIC!r}, {VERSION}, {n} x {d})"
            )
        matrix = np.memmap(idx_file, dtype=np.float32, mode="c", offset=_HEADER.size, shape=(n, d))
        blobs = {
            name: (path / files[name]["name"]).read_bytes()
            for name in ("chunks", "texts", "paths", "bm25")
        }
        if verify:
            crcs = {name: _crc32(blob) for name, blob in blobs.items()}
            crcs["idx"] = zlib.crc32(memoryview(matrix).cast("B"), zlib.crc32(header)) & 0xFFFFFFFF
            crcs["projection"] = _file_crc(path / files["projection"]["name"])
            for name, crc in crcs.items():
                if crc != files[name]["crc32"]:
                    raise IndexFormatError(
                        f"{path / files[name]['name']}: checksum mismatch (corrupt file)"
                    )
        meta = json.loads(blobs["chunks"])
        sources = blobs["paths"].decode("utf-8").split("\n")[:-1]
        if len(meta["source"]) != n or len(sources) != manifest["num_sources"]:
            raise IndexFormatError(f"{path}: chunk metadata and sources disagree with the manifest")
        bm25 = BM25State.from_bytes(
            blobs["bm25"],
            tokenizer=manifest["bm25"]["tokenizer"],
            where=str(path / files["bm25"]["name"]),
        )
        if bm25.num_docs != n:
            raise IndexFormatError(f"{path}: BM25 state holds {bm25.num_docs} chunks, not {n}")
        return cls(path, manifest, matrix, meta, sources, blobs["texts"], bm25, encoder)

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
            BM25 weight (default: the index's config, 0.5). 1 is pure BM25, 0 pure Lorentz.
        top_m : int, optional
            BM25 candidates per query (default 50).

        Returns
        -------
        scores : torch.Tensor, shape (B, k'), float32
            Hybrid scores, best first.
        indices : torch.Tensor, shape (B, k'), int64
            Chunk indices (see :attr:`chunk_ids`, :attr:`doc_ids`, :attr:`texts`).
        """
        alpha = self.config.alpha if alpha is None else alpha
        top_m = self.config.top_m if top_m is None else top_m
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        if k < 1 or top_m < 1:
            raise ValueError(f"k and top_m must be >= 1, got k={k}, top_m={top_m}")
        if isinstance(queries, str):
            raise ValueError("queries must be a list of str, got a single str")
        query = self.encoder.encode(queries).to(self.points)  # the encoder may sit on a GPU
        bm25, cand = self.bm25.search(queries, top_m)
        points = self.points.index_select(0, cand.flatten()).view(*cand.shape, self.dim)
        mask = torch.ones_like(bm25, dtype=torch.bool)
        scores = hybrid_scores(bm25, query, points, mask, alpha=alpha, offset=self.config.offset)
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
            generation=self.manifest["generation"] + 1,
        )
        return LorentzIndex.load(self.path, encoder=self.encoder)


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
    generation: int,
) -> None:
    """Write generation ``generation`` of the index at ``path`` and make it current."""
    path.mkdir(parents=True, exist_ok=True)
    g = generation
    files: dict[str, dict] = {}

    def put(key: str, name: str, data: bytes) -> None:
        atomic_write(path / name, data)
        files[key] = {"name": name, "size": len(data), "crc32": _crc32(data)}

    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    header = _HEADER.pack(MAGIC, VERSION, 0, matrix.shape[0], matrix.shape[1])
    put("idx", f"idx.{g}.bin", header + matrix.tobytes())
    encoded = [text.encode("utf-8") for text in texts]
    offsets = np.cumsum([0] + [len(b) for b in encoded[:-1]]).tolist()
    put("texts", f"texts.{g}.z", zlib.compress(b"".join(encoded)))
    meta = {"source": source.tolist(), "part": part.tolist(), "text_offsets": offsets}
    put("chunks", f"chunks.{g}.json", json.dumps(meta, separators=(",", ":")).encode())
    put("paths", f"paths.{g}.txt", "".join(f"{s}\n" for s in sources).encode("utf-8"))
    encoder.save(path / f"projection.{g}.pt")
    proj = path / f"projection.{g}.pt"
    files["projection"] = {"name": proj.name, "size": proj.stat().st_size, "crc32": _file_crc(proj)}
    put("bm25", f"bm25.{g}.bin", BM25State.from_bm25(BM25Index.build(texts, **bm25)).to_bytes())
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "generation": g,
        "num_chunks": int(matrix.shape[0]),
        "dim": int(matrix.shape[1]),
        "num_sources": len(sources),
        "model": {
            "model_path": encoder.model_path,
            "fingerprint": encoder.projection.fingerprint(),
            "k": float(encoder.projection.k),
            "power": encoder.projection.power,
        },
        "chunking": chunking,
        "bm25": bm25,
        "search": search,
        "files": files,
    }
    atomic_write(path / "manifest.json", dump_manifest(manifest))
    keep = {entry["name"].split("/")[0] for entry in files.values()}
    for stale in path.iterdir():
        if stale.name not in keep and _OWNED.match(stale.name):
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)


def build_lorentz_index(
    texts_or_docs: Mapping[str, str] | Sequence[str],
    out_path: str | os.PathLike,
    *,
    model_path: str | None = None,
    weights: str | os.PathLike | None = None,
    encoder: HyTEEncoder | None = None,
    window: int = 300,
    overlap: int = 60,
    bm25_tokenizer: str = "whitespace",
    k1: float = 1.2,
    b: float = 0.75,
    config: HyTEConfig | None = None,
) -> LorentzIndex:
    """Chunk, encode and index documents into a new index folder (replacing any there).

    Parameters
    ----------
    texts_or_docs : dict of str to str, or list of str
        ``{source path or id: text}``, or texts (sources are then ``"0"``, ``"1"``, ...).
        Empty documents are rejected (nothing is written).
    out_path : str or path
        The index folder.
    model_path : str, optional
        Checkpoint of the word embeddings and tokenizer (default ``config.model``).
    weights : str or path, optional
        A trained projection (default ``config.weights``; none = untrained, seeded).
    encoder : HyTEEncoder, optional
        An already loaded encoder (overrides ``model_path`` and ``weights``).
    window, overlap : int
        Sliding-window chunking in words (paper: 300 and 60).
    bm25_tokenizer : str
        ``whitespace`` (the paper's lowercase split), ``default`` or ``stem``.
    k1, b : float
        BM25 parameters (paper: 1.2, 0.75).
    config : HyTEConfig, optional
        Search defaults stored with the index (alpha, top_m, offset).
    """
    config = config or HyTEConfig()
    docs = _as_docs(texts_or_docs)
    chunks = chunk_documents(docs, window=window, overlap=overlap)
    if encoder is None:
        encoder = HyTEEncoder.from_pretrained(
            model_path or config.model,
            weights=weights or config.weights,
            k=config.k,
            power=config.power,
        )
    points = encoder.encode(chunks.texts).cpu().numpy()
    position = {key: i for i, key in enumerate(docs)}
    source = np.asarray([position[d] for d in chunks.doc_ids], dtype=np.int64)
    part = np.asarray([int(c.rsplit("#", 1)[1]) for c in chunks.chunk_ids], dtype=np.int64)
    out = Path(out_path)
    try:
        previous = int(json.loads((out / "manifest.json").read_text())["generation"])
    except (OSError, ValueError, KeyError, TypeError):
        previous = 0
    search = {
        "alpha": config.alpha,
        "top_m": config.top_m,
        "offset": config.offset,
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
        generation=previous + 1,
    )
    return LorentzIndex.load(out, encoder=encoder)

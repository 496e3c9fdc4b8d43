"""The entity-passage graph of a corpus, built without a language model, as a sealed artifact.

HippoRAG 2's graph ("From RAG to Memory: Non-Parametric Continual Learning for Large Language
Models") with phrases from :mod:`georag.retrieval.extractors` instead of LLM triples: N
passage nodes (rows ``0..N-1``), P phrase nodes (rows ``N..N+P-1``, phrases sorted), one
passage-phrase edge of weight ``edge_weight`` per (passage, phrase) pair, and synonym
edges between phrases whose embeddings (a caller's ``encode``) have cosine at least
``synonym_threshold`` (at most ``synonym_max`` per phrase, phrases of ``min_alnum``
alphanumerics or more), weighted by the cosine. A phrase's node specificity is ``1 / df``
(HippoRAG, "HippoRAG: Neurobiologically Inspired Long-Term Memory for Large Language Models").

:meth:`EntityGraph.save` writes a folder (``.npy`` arrays, ``graph.json``, a SHA-256 manifest)
through :func:`georag._io.atomic_folder`; :func:`load_entity_graph` checks it and maps the
arrays. The folder keeps the passages' strings and spaCy's phrases, so that
:meth:`EntityGraph.add` runs spaCy and ``encode`` only on what is new.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from georag._io import MANIFEST, ArtifactError, atomic_folder, check_folder
from georag.geometry.diffusion import edge_index_to_csr
from georag.retrieval.extractors import (
    EXTRACTORS,
    TITLE_FORMS,
    MentionIndex,
    alnum_count,
    looked_up,
    mention_key,
    ngram_phrases,
    spacy_phrases,
    title_phrases,
)
from georag.retrieval.phrase_embeddings import Encoder, embed_phrases
from georag.retrieval.phrase_graph import corpus_fingerprint

__all__ = [
    "EntityGraph",
    "EntityGraphConfig",
    "build_entity_graph",
    "load_entity_graph",
    "synonym_edges",
]

FORMAT = "georag-entity-graph"
VERSION = 2  # 2: the passage-phrase edge weight is ``edge_weight``
_BLOCK_ELEMENTS = 1 << 24  # cosines held at once by the synonym search (64 MiB of float32)


@dataclass(frozen=True)
class EntityGraphConfig:
    """How the entity-passage graph is built.

    Attributes
    ----------
    extractors : tuple of str
        Any of ``"title"``, ``"ngram"``, ``"spacy"`` (:mod:`georag.retrieval.extractors`);
        a passage's phrases are the union of theirs.
    max_words, max_df : int, float
        ``"ngram"`` only: :class:`georag.retrieval.phrase_graph.PhraseGraphConfig`'s.
    synonym_threshold, synonym_max : float or None, int
        Least cosine of a synonym edge (None: no synonym edges); most kept per phrase.
    min_alnum : int
        Least alphanumeric characters of a spaCy phrase and of a phrase with synonyms.
    edge_weight : float
        Weight of a passage-phrase edge (the retrievers' seed weights have other names).
    title_form : {"as_is", "strip", "strip_apart"}
        How the ``"title"`` extractor names and finds a title
        (:func:`~georag.retrieval.extractors.title_phrases`).
    min_mention : int
        Least alphanumeric characters of a title looked up in texts (and in queries).
    hub_df : int or None
        A phrase held by more passages is left out of the graph (None: none is).
    """

    extractors: tuple[str, ...] = ("title",)  # the training files' choice (needs no extra)
    max_words: int = 3  # PhraseGraphConfig
    max_df: float = 0.01  # PhraseGraphConfig
    synonym_threshold: float | None = 0.8  # HippoRAG 2: synonymy_edge_sim_threshold
    synonym_max: int = 100  # HippoRAG 2: at most 100 synonym neighbours per phrase
    min_alnum: int = 3  # HippoRAG 2: synonyms only for phrases of more than 2 alphanumerics
    edge_weight: float = 1.0  # HippoRAG 2: weight of a passage-phrase edge (H:953)
    title_form: str = "as_is"
    min_mention: int = 0
    hub_df: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "extractors", tuple(self.extractors))
        unknown = [e for e in self.extractors if e not in EXTRACTORS]
        if not self.extractors or unknown or len(set(self.extractors)) != len(self.extractors):
            raise ValueError(
                f"extractors: need distinct names among {EXTRACTORS}, got {self.extractors!r}"
            )
        threshold = self.synonym_threshold
        for name, ok, need in (
            ("max_words", self.max_words >= 1, ">= 1"),
            ("max_df", 0.0 < self.max_df <= 1.0, "a share in (0, 1]"),
            ("synonym_threshold", threshold is None or -1.0 <= threshold <= 1.0, "[-1, 1]"),
            ("synonym_max", self.synonym_max >= 1, ">= 1"),
            ("min_alnum", self.min_alnum >= 0, ">= 0"),
            ("edge_weight", self.edge_weight > 0.0, "> 0"),
            ("title_form", self.title_form in TITLE_FORMS, f"one of {TITLE_FORMS}"),
            ("min_mention", self.min_mention >= 0, ">= 0"),
            ("hub_df", self.hub_df is None or self.hub_df >= 1, "None or >= 1"),
        ):
            if not ok:
                raise ValueError(f"{name}: need {need}, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class _Strings:
    """Strings packed as UTF-8 bytes (``blob``, uint8) and byte ``offsets`` (K + 1,), int64."""

    blob: np.ndarray
    offsets: np.ndarray

    @classmethod
    def pack(cls, strings: Sequence[str]) -> _Strings:
        data = [s.encode("utf-8") for s in strings]
        offsets = np.zeros(len(data) + 1, dtype=np.int64)
        np.cumsum([len(d) for d in data], out=offsets[1:])
        return cls(np.frombuffer(b"".join(data), dtype=np.uint8), offsets)

    def tolist(self) -> list[str]:
        raw, at = self.blob.tobytes(), self.offsets.tolist()
        return [raw[a:b].decode("utf-8") for a, b in zip(at[:-1], at[1:])]


@dataclass(frozen=True, eq=False)
class EntityGraph:
    """An entity-passage graph (see the module docstring).

    Attributes
    ----------
    num_passages : int
        N.
    phrases : tuple of str
        The P phrase nodes, sorted; node ``N + j`` is ``phrases[j]``.
    contains : torch.Tensor, shape (2, E), long
        ``(passage row, phrase index)`` of each passage-phrase edge, sorted, no duplicates.
    synonym_index, synonym_weight : torch.Tensor, shapes (2, S) long and (S,) float32
        Phrase pairs ``(i, j)``, ``i < j``, sorted, and their cosines.
    phrase_embeddings : torch.Tensor, shape (P, D), float32, or None
        Unit rows from the build's ``encode`` (None without one).
    fingerprint : str
        :func:`georag.retrieval.phrase_graph.corpus_fingerprint` of the corpus.
    config : EntityGraphConfig
    extractor_phrases : dict of str to int
        Distinct phrases each extractor found (after its own cuts).
    corpus, spacy_found : packed strings
        For :meth:`add`: the passages' ids, titles and texts (3N strings); each passage's
        spaCy phrases, sorted, joined by newlines (N strings, none without ``"spacy"``).
    """

    num_passages: int
    phrases: tuple[str, ...]
    contains: torch.Tensor
    synonym_index: torch.Tensor
    synonym_weight: torch.Tensor
    phrase_embeddings: torch.Tensor | None
    fingerprint: str
    config: EntityGraphConfig
    extractor_phrases: dict[str, int]
    corpus: _Strings
    spacy_found: _Strings

    @property
    def num_nodes(self) -> int:
        """N + P."""
        return self.num_passages + len(self.phrases)

    @cached_property
    def _mention_index(self) -> MentionIndex:
        keys = [mention_key(p) for p in self.phrases]
        minimum = self.config.min_mention
        return MentionIndex([k if looked_up(k, minimum) else "" for k in keys])

    @cached_property
    def _vocabulary(self) -> dict[str, int]:
        return {p: j for j, p in enumerate(self.phrases)}

    def vocabulary(self) -> dict[str, int]:
        """``{phrase: index}`` (built once per graph; do not modify it)."""
        return self._vocabulary

    def document_frequency(self) -> torch.Tensor:
        """Passages holding each phrase, shape (P,), long."""
        return torch.bincount(self.contains[1], minlength=len(self.phrases))

    def specificity(self) -> torch.Tensor:
        """Node specificity ``1 / df`` of each phrase, shape (P,), float32."""
        return 1.0 / self.document_frequency().clamp_min(1).float()

    def to_csr(
        self, dtype: torch.dtype = torch.float32, *, synonym_scale: float = 1.0
    ) -> torch.Tensor:
        """The symmetric weight matrix, sparse CSR (N + P, N + P): passage-phrase edges weigh
        ``config.edge_weight``, synonym edges ``synonym_scale * cosine`` (0: none)."""
        if not synonym_scale >= 0.0:
            raise ValueError(f"synonym_scale: need >= 0, got {synonym_scale}")
        n = self.num_passages
        edges = [torch.stack([self.contains[0], self.contains[1] + n])]
        weights = [torch.full((self.contains.shape[1],), self.config.edge_weight, dtype=dtype)]
        if synonym_scale > 0 and self.synonym_index.shape[1]:
            edges.append(self.synonym_index + n)
            weights.append(synonym_scale * self.synonym_weight.to(dtype))
        return edge_index_to_csr(torch.cat(edges, 1), self.num_nodes, torch.cat(weights))

    def counts(self) -> dict[str, int]:
        """Passages, phrases (all; ``phrases_<extractor>``), edges, passages without one."""
        linked = len(torch.unique(self.contains[0]))
        return {
            "passages": self.num_passages,
            "phrases": len(self.phrases),
            **{f"phrases_{name}": count for name, count in self.extractor_phrases.items()},
            "passage_phrase_edges": int(self.contains.shape[1]),
            "synonym_edges": int(self.synonym_index.shape[1]),
            "isolated_passages": self.num_passages - linked,
        }

    def passages(self) -> tuple[list[str], list[str], list[str]]:
        """The ids, titles and texts (N each) of the corpus the graph was built from."""
        strings, n = self.corpus.tolist(), self.num_passages
        return strings[:n], strings[n : 2 * n], strings[2 * n :]

    def mentions(self, texts: Sequence[str]) -> torch.Tensor:
        """(B, P) float32: 1 where text b's normalised words hold phrase j's mention key
        (:func:`~georag.retrieval.extractors.mention_key`) in a row; phrases that
        :func:`~georag.retrieval.extractors.looked_up` refuses are never mentioned, as in
        the title extractor."""
        out = torch.zeros(len(texts), len(self.phrases))
        for b, found in enumerate(self._mention_index.find(texts)):
            out[b, list(found)] = 1.0
        return out

    def add(
        self,
        doc_ids: Sequence[str],
        titles: Sequence[str],
        texts: Sequence[str],
        encode: Encoder | None = None,
        *,
        progress: bool = False,
    ) -> EntityGraph:
        """This corpus followed by new passages (rows ``N..``): the graph that
        :func:`build_entity_graph` gives for the whole corpus, this config and ``encode``
        (embeddings bit for bit when ``encode`` embeds each phrase on its own). spaCy runs on
        the new passages, ``encode`` on phrases without an embedding; the title and n-gram
        extractors, whose output depends on the whole corpus, run over all of it.

        Parameters
        ----------
        doc_ids, titles, texts : sequence of str, length M
        encode : callable, optional
            Needed when the graph holds embeddings and new phrases appear.
        progress : bool
        """
        _check_corpus(doc_ids, titles, texts)
        rows = range(self.num_passages)
        return self._rebuild(rows, (doc_ids, titles, texts), encode, progress)

    def remove(
        self, rows: Sequence[int], encode: Encoder | None = None, *, progress: bool = False
    ) -> EntityGraph:
        """This corpus without the passages at ``rows`` (the others keep their order): the
        graph :func:`build_entity_graph` gives for them. spaCy does not run; ``encode`` is
        needed only when a phrase without an embedding appears (an n-gram under ``max_df``)."""
        drop = set(rows)
        keep = [i for i in range(self.num_passages) if i not in drop]
        if not keep or not drop <= set(range(self.num_passages)):
            raise ValueError(f"rows: need some of the {self.num_passages} rows, not all")
        return self._rebuild(keep, ([], [], []), encode, progress)

    def _rebuild(self, keep, new, encode, progress) -> EntityGraph:
        """The graph of this corpus' rows ``keep`` followed by ``new`` (ids, titles, texts)."""
        n, old = self.num_passages, self.corpus.tolist()
        columns = old[:n], old[n : 2 * n], old[2 * n :]
        corpus = tuple([c[i] for i in keep] + [*extra] for c, extra in zip(columns, new))
        found = self.spacy_found.tolist()
        spacy_found = [set(found[i].split("\n")) - {""} for i in keep] if found else []
        known = None if self.phrase_embeddings is None else (self.phrases, self.phrase_embeddings)
        return _assemble(corpus, spacy_found, self.config, encode, known, progress)

    def save(self, folder: str | os.PathLike) -> Path:
        """Write the graph folder atomically; an existing ``folder`` that is neither empty
        nor an entity graph is a ValueError (nothing is replaced)."""
        folder = Path(folder)
        if folder.exists() and not _replaceable(folder):
            raise ValueError(f"graph: {folder} exists and is not an entity graph (not replaced)")
        emb = self.phrase_embeddings
        meta = {
            "num_passages": self.num_passages,
            "fingerprint": self.fingerprint,
            "config": asdict(self.config),
            "extractor_phrases": self.extractor_phrases,
            "embedding_dim": None if emb is None else int(emb.shape[1]),
        }
        names = ["contains", "synonym_index", "synonym_weight"]
        names += [] if emb is None else ["phrase_embeddings"]
        arrays = {name: getattr(self, name).numpy() for name in names}
        strings = {"phrases": _Strings.pack(self.phrases), "corpus": self.corpus}
        strings["spacy_found"] = self.spacy_found
        for stem, table in strings.items():
            arrays[stem], arrays[f"{stem}_offsets"] = table.blob, table.offsets
        with atomic_folder(folder, format=FORMAT, version=VERSION) as tmp:
            for stem, array in arrays.items():
                np.save(tmp / f"{stem}.npy", np.ascontiguousarray(array), allow_pickle=False)
            (tmp / "graph.json").write_text(json.dumps(meta, sort_keys=True))
        return folder


def _replaceable(folder: Path) -> bool:
    """An empty folder, or one holding an entity graph."""
    try:
        empty = folder.is_dir() and not any(folder.iterdir())
        return empty or json.loads((folder / MANIFEST).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


# ---------------------------------------------------------------------------- build
def _check_corpus(doc_ids: Sequence[str], titles: Sequence[str], texts: Sequence[str]) -> None:
    if len(doc_ids) == 0:
        raise ValueError("doc_ids: the corpus is empty")
    if not len(doc_ids) == len(titles) == len(texts):
        n, m, k = len(doc_ids), len(titles), len(texts)
        raise ValueError(f"doc_ids ({n}), titles ({m}) and texts ({k}) must agree on N")
    for name, column in (("doc_ids", doc_ids), ("titles", titles), ("texts", texts)):
        bad = next((i for i, s in enumerate(column) if not isinstance(s, str)), None)
        if bad is not None:
            raise ValueError(f"{name}: row {bad} is {type(column[bad]).__name__}, not str")


def build_entity_graph(
    doc_ids: Sequence[str],
    titles: Sequence[str],
    texts: Sequence[str],
    *,
    config: EntityGraphConfig | None = None,
    encode: Encoder | None = None,
    progress: bool = False,
) -> EntityGraph:
    """Build the entity-passage graph of a corpus.

    Parameters
    ----------
    doc_ids, titles, texts : sequence of str, length N
    config : EntityGraphConfig, optional
    encode : callable, optional
        ``encode(phrases: list[str]) -> torch.Tensor`` of unit-norm float rows, shape
        (len(phrases), D) (the corpus encoder); called on chunks of phrases. Without it the
        graph holds no embeddings and no synonym edges.
    progress : bool
        Progress bars over extraction, encoding and the synonym search.

    Raises
    ------
    ValueError
        An empty corpus, columns of different lengths, or ``encode`` answering a wrong
        shape, non-finite or non-unit rows (naming ``encode``).
    ImportError
        The ``"spacy"`` extractor without spaCy or its model (naming the extra).
    """
    _check_corpus(doc_ids, titles, texts)
    corpus = [*doc_ids], [*titles], [*texts]
    return _assemble(corpus, [], config or EntityGraphConfig(), encode, None, progress)


def _assemble(
    corpus: tuple[list[str], list[str], list[str]],
    spacy_found: list[set[str]],
    config: EntityGraphConfig,
    encode: Encoder | None,
    known: tuple[tuple[str, ...], torch.Tensor] | None,
    progress: bool,
) -> EntityGraph:
    """The graph of ``corpus`` (ids, titles, texts) given spaCy's phrases of its first
    passages and the embeddings ``known`` of some phrases (see :func:`build_entity_graph`)."""
    doc_ids, titles, texts = corpus
    found = {}
    for name in config.extractors:
        if name == "title":
            found[name] = title_phrases(
                titles, texts, form=config.title_form, min_mention=config.min_mention
            )
        elif name == "ngram":
            found[name] = ngram_phrases(
                titles, texts, max_words=config.max_words, max_df=config.max_df
            )
        else:
            new = slice(len(spacy_found), None)
            spacy_found = spacy_found + spacy_phrases(
                titles[new], texts[new], min_alnum=config.min_alnum, progress=progress
            )
            found[name] = spacy_found
    per_passage = [set().union(*row) for row in zip(*found.values())]
    if config.hub_df is not None:
        per_passage = _without_hubs(per_passage, config.hub_df)
    phrases = tuple(sorted(set().union(*per_passage)))
    index = {p: j for j, p in enumerate(phrases)}
    rows = np.repeat(np.arange(len(doc_ids), dtype=np.int64), [len(f) for f in per_passage])
    cols = np.fromiter((index[p] for f in per_passage for p in f), dtype=np.int64, count=len(rows))
    keys = np.sort(rows * max(len(phrases), 1) + cols)
    embeddings = embed_phrases(phrases, encode, known, progress=progress)
    synonyms = torch.empty(2, 0, dtype=torch.long), torch.empty(0)
    if embeddings is not None and config.synonym_threshold is not None:
        eligible = torch.tensor([alnum_count(p) >= config.min_alnum for p in phrases], dtype=bool)
        cut = {"threshold": config.synonym_threshold, "cap": config.synonym_max}
        synonyms = synonym_edges(embeddings, eligible, **cut, progress=progress)
    return EntityGraph(
        num_passages=len(doc_ids),
        phrases=phrases,
        contains=torch.from_numpy(np.stack(np.divmod(keys, max(len(phrases), 1)))),
        synonym_index=synonyms[0],
        synonym_weight=synonyms[1],
        phrase_embeddings=embeddings,
        fingerprint=corpus_fingerprint(doc_ids, titles, texts),
        config=config,
        extractor_phrases={name: len(set().union(*sets)) for name, sets in found.items()},
        corpus=_Strings.pack([*doc_ids, *titles, *texts]),
        spacy_found=_Strings.pack(["\n".join(sorted(f)) for f in spacy_found]),
    )


def _without_hubs(per_passage: list[set[str]], hub_df: int) -> list[set[str]]:
    """Each passage's phrases without those that more than ``hub_df`` passages hold."""
    df: dict[str, int] = {}
    for found in per_passage:
        for phrase in found:
            df[phrase] = df.get(phrase, 0) + 1
    return [{p for p in found if df[p] <= hub_df} for found in per_passage]


def synonym_edges(
    embeddings: torch.Tensor,
    eligible: torch.Tensor,
    *,
    threshold: float,
    cap: int,
    progress: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Synonym edges: each eligible phrase keeps its ``cap`` most similar eligible phrases
    of cosine at least ``threshold``; a pair is an edge when either side keeps the other.
    Cosines are computed by blocks of rows (2**24 at most at once): memory stays bounded.

    Parameters
    ----------
    embeddings : torch.Tensor, shape (P, D)
        Unit rows.
    eligible : torch.Tensor, shape (P,), bool
    threshold, cap, progress : float, int, bool

    Returns
    -------
    index : torch.Tensor, shape (2, S), long
        Pairs ``(i, j)``, ``i < j``, sorted.
    weight : torch.Tensor, shape (S,), float32
        Their cosine (the larger of the two directions' float32 values).
    """
    candidates = torch.nonzero(eligible).flatten()
    m = len(candidates)
    if m < 2:
        return torch.empty(2, 0, dtype=torch.long), torch.empty(0)
    keys = embeddings[candidates].to(torch.float32).contiguous()
    rows_per_block = max(1, min(m, _BLOCK_ELEMENTS // m))
    k = min(cap, m - 1)
    src, dst, val = [], [], []
    for start in tqdm(range(0, m, rows_per_block), "synonyms", disable=not progress):
        cos = keys[start : start + rows_per_block] @ keys.T
        rows = torch.arange(cos.shape[0])
        cos[rows, start + rows] = -torch.inf
        top, col = cos.topk(k, dim=1)
        keep = top >= threshold
        src.append((start + rows)[:, None].expand_as(col)[keep])
        dst.append(col[keep])
        val.append(top[keep])
    src, dst, val = torch.cat(src), torch.cat(dst), torch.cat(val)
    p = len(embeddings)
    pair = candidates[torch.minimum(src, dst)] * p + candidates[torch.maximum(src, dst)]
    unique, inverse = torch.unique(pair, return_inverse=True)
    weight = torch.full((len(unique),), -torch.inf).scatter_reduce(0, inverse, val, "amax")
    return torch.stack([unique // p, unique % p]), weight


# ---------------------------------------------------------------------------- load
def _fail(file: Path, reason: str) -> ValueError:
    return ValueError(f"graph: {file}: {reason}")


class _Reader:
    """Maps the arrays of a checked graph folder and checks each one before use."""

    def __init__(self, folder: Path, files: dict) -> None:
        self.folder, self.files = folder, files

    def array(self, stem: str, dtype: type, shape: tuple[int | None, ...]) -> np.ndarray:
        """``stem.npy`` memory-mapped (copy on write), of ``dtype`` and ``shape`` (None: any)."""
        file = self.folder / f"{stem}.npy"
        if file.name not in self.files:
            raise _fail(file, f"missing (not listed in {self.folder / MANIFEST})")
        try:
            array = np.load(file, mmap_mode="c", allow_pickle=False)
        except (ValueError, OSError) as err:
            raise _fail(file, f"not a readable .npy array (truncated?): {err}") from None
        fits = len(array.shape) == len(shape) and all(
            w in (None, g) for g, w in zip(array.shape, shape)
        )
        if array.dtype != dtype or not fits:
            want = tuple("*" if w is None else w for w in shape)
            raise _fail(file, f"expected {np.dtype(dtype)} {want}, got {array.dtype} {array.shape}")
        return array

    def strings(self, stem: str, count: int | None = None) -> _Strings:
        """The strings packed in ``stem.npy`` and ``stem_offsets.npy`` (``count`` of them)."""
        blob = self.array(stem, np.uint8, (None,))
        at = self.array(f"{stem}_offsets", np.int64, (None if count is None else count + 1,))
        if len(at) == 0 or at[0] != 0 or at[-1] != len(blob) or (np.diff(at) < 0).any():
            raise _fail(self.folder / f"{stem}_offsets.npy", f"does not cut {stem}.npy")
        return _Strings(blob, at)

    def pairs(self, stem: str, bounds: tuple[int, int]) -> torch.Tensor:
        """Sorted, distinct (2, E) int64 pairs below ``bounds``."""
        pairs, file = self.array(stem, np.int64, (2, None)), self.folder / f"{stem}.npy"
        if pairs.size and (pairs.min() < 0 or (pairs.max(axis=1) >= bounds).any()):
            raise _fail(file, f"indices outside [0, {bounds[0]}) x [0, {bounds[1]})")
        if (np.diff(pairs[0] * bounds[1] + pairs[1]) <= 0).any():
            raise _fail(file, "pairs not sorted or repeated")
        return torch.from_numpy(pairs)


def load_entity_graph(folder: str | os.PathLike, *, fingerprint: str | None = None) -> EntityGraph:
    """Check a folder written by :meth:`EntityGraph.save` and map its arrays.

    Parameters
    ----------
    folder : path
    fingerprint : str, optional
        The :func:`~georag.retrieval.phrase_graph.corpus_fingerprint` the graph must have.

    Raises
    ------
    ValueError
        One line ``graph: <file or folder>: ...``: a missing or foreign folder, a checksum
        or size mismatch, another format version, an unreadable (truncated) array, a wrong
        dtype or shape, indices out of range, unsorted pairs, NaN weights or embeddings, or
        a graph of another corpus.
    """
    folder = Path(folder)
    try:
        manifest = check_folder(folder, format=FORMAT, version=VERSION)
    except ArtifactError as error:
        raise ValueError(f"graph: {error}") from None
    if (version := manifest.get("version")) != VERSION:
        raise _fail(folder / MANIFEST, f"format version {version!r}, not {VERSION} (rebuild it)")
    try:
        if "graph.json" not in manifest["files"]:
            raise KeyError("graph.json")
        meta = json.loads((folder / "graph.json").read_text())
        n, dim = int(meta["num_passages"]), meta["embedding_dim"]
        config = EntityGraphConfig(**meta["config"])
        extractor_phrases = {e: int(meta["extractor_phrases"][e]) for e in config.extractors}
        saved = str(meta["fingerprint"])
        if n < 1 or not (dim is None or (isinstance(dim, int) and dim >= 0)):
            raise ValueError(f"num_passages {n}, embedding_dim {dim!r}")
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise _fail(folder / "graph.json", f"not an entity graph ({error})") from None
    if fingerprint is not None and saved != fingerprint:
        raise ValueError(
            f"graph: {folder} was built for another corpus (fingerprint {saved[:12]}..., "
            f"this corpus {fingerprint[:12]}...)"
        )
    read = _Reader(folder, manifest["files"])
    phrases = tuple(read.strings("phrases").tolist())
    if any(a >= b for a, b in zip(phrases, phrases[1:])):
        raise _fail(folder / "phrases.npy", "phrases not sorted or repeated")
    p = len(phrases)
    contains = read.pairs("contains", (n, p))
    if p and int(np.bincount(contains[1].numpy(), minlength=p).min()) == 0:
        raise _fail(folder / "contains.npy", "a phrase that no passage holds")
    synonym_index = read.pairs("synonym_index", (p, p))
    if (synonym_index[0] >= synonym_index[1]).any():
        raise _fail(folder / "synonym_index.npy", "a pair (i, j) with i >= j")
    weight = read.array("synonym_weight", np.float32, (synonym_index.shape[1],))
    if not np.isfinite(weight).all():
        raise _fail(folder / "synonym_weight.npy", "NaN or infinite weights")
    embeddings = None if dim is None else read.array("phrase_embeddings", np.float32, (p, dim))
    if embeddings is not None and not np.isfinite(embeddings).all():
        raise _fail(folder / "phrase_embeddings.npy", "NaN or infinite embeddings")
    return EntityGraph(
        num_passages=n,
        phrases=phrases,
        contains=contains,
        synonym_index=synonym_index,
        synonym_weight=torch.from_numpy(weight),
        phrase_embeddings=None if embeddings is None else torch.from_numpy(embeddings),
        fingerprint=saved,
        config=config,
        extractor_phrases=extractor_phrases,
        corpus=read.strings("corpus", 3 * n),
        spacy_found=read.strings("spacy_found", n if "spacy" in config.extractors else 0),
    )

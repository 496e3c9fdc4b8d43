"""A corpus index on disk, built once and updated live: the parts every corpus retriever
fits from, in generations (:mod:`georag.retrieval.generations`).

A generation folder (one :func:`georag._io.atomic_folder`, one ``manifest.json`` with the
georag version, the encoder and its settings, the graphs, and the size and SHA-256 of every
file) holds:

``docs.json``
    The passages' ids, titles and texts, in row order.
``embeddings.npy``
    Their unit-norm embeddings (N, D), float32, of ``title + " " + text`` by the encoder.
``dense.faiss``, ``bm25/``
    The first-stage faiss and BM25 indexes (:class:`~georag.retrieval.store.IndexStore`).
``cache/``
    What the retrievers derive from the corpus, as their ``corpus.cache_dir``, for the
    graphs named at build time (:data:`GRAPHS`): ``passage`` (the ISO-RAG passage graph of
    ``iso``, ``ppr_global``, ``learned_iso``), ``phrase`` (the phrase graph of
    ``phrase_ppr``), ``entity:EXTRACTORS`` (the entity-passage graph of ``hipporag2``,
    ``iso_entity``, their learned twins and ``phrase_ppr`` with ``entities``, e.g.
    ``entity:title`` or ``entity:title,spacy``), ``hyte`` (the HyTE-H Lorentz index).

An update (:func:`update_index`) encodes only the new passages; the entity-passage graphs
follow with :meth:`~georag.retrieval.entity_graph.EntityGraph.add` and
:meth:`~georag.retrieval.entity_graph.EntityGraph.remove` (spaCy and the phrase encoder run
on what is new); every other part is derived again from the stored texts and embeddings, so
an updated index equals one built from the resulting corpus.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from georag import __version__
from georag._io import ArtifactError, atomic_folder, check_folder
from georag.batch import Corpus
from georag.data.beir import BeirDataset, parse_json
from georag.resources import DEFAULT_MODEL
from georag.retrieval import generations
from georag.retrieval.bm25 import BM25Index
from georag.retrieval.candidates import corpus_embeddings
from georag.retrieval.dense import DenseIndex
from georag.retrieval.encoder import TextEncoder
from georag.retrieval.entity_graph import EntityGraph
from georag.retrieval.passage_graph import corpus_graph
from georag.retrieval.phrase_graph import build_phrase_graph
from georag.retrieval.store import IndexStore
from georag.retrievers.entity import EntityGraphOptions, entity_graph_folder, entity_graph_for

__all__ = [
    "FORMAT",
    "GRAPHS",
    "CorpusIndex",
    "build_index",
    "check_graph",
    "documents_from_dataset",
    "read_documents",
    "update_index",
]

FORMAT = "georag-index"
VERSION = 1
GRAPHS = ("passage", "phrase", "entity:EXTRACTORS", "hyte")
#: the encoder fields of an index written before they were recorded
_UNRECORDED = {"encoder_backend": "torch", "encoder_export": None}


@dataclass(frozen=True)
class CorpusIndex:
    """One generation of an index, loaded and checked.

    Attributes
    ----------
    root, generation : Path
        The index folder and the generation folder read.
    doc_ids, titles, texts : list of str, length N
    embeddings : torch.Tensor, shape (N, D), float32
    manifest : dict
        Its ``model``, ``max_seq_length``, ``dim``, ``kind`` and ``graphs`` describe it.
    """

    root: Path
    generation: Path
    doc_ids: list[str]
    titles: list[str]
    texts: list[str]
    embeddings: torch.Tensor
    manifest: dict

    @property
    def size(self) -> int:
        """N, the number of passages."""
        return len(self.doc_ids)

    @cached_property
    def row_of(self) -> dict[str, int]:
        """``{doc id: row}``."""
        return {d: i for i, d in enumerate(self.doc_ids)}

    @property
    def model(self) -> str:
        return self.manifest["model"]

    @property
    def graphs(self) -> tuple[str, ...]:
        return tuple(self.manifest["graphs"])

    def corpus(self) -> Corpus:
        """The passages as a :class:`Corpus` whose cache is this generation's ``cache/``."""
        cache = str(self.generation / "cache")
        return Corpus(self.doc_ids, self.titles, self.texts, self.embeddings, cache_dir=cache)

    def full_texts(self) -> list[str]:
        """``title + " " + text`` of each passage (the text alone without a title)."""
        return [_full(t, x) for t, x in zip(self.titles, self.texts)]

    def store(self) -> IndexStore:
        """The first-stage faiss + BM25 store of this generation."""
        return IndexStore(
            DenseIndex.load(self.generation / "dense.faiss"),
            BM25Index.load(self.generation / "bm25"),
            self.doc_ids,
            self.full_texts(),
            self.model,
            self.manifest.get("encoder_backend", "torch"),
        )

    def check_encoder(self, encoder: TextEncoder) -> None:
        """``encoder`` must be the index's (name, maximum length and width)."""
        got = {"model": encoder.name, "max_seq_length": encoder.max_seq_length}
        got["dim"] = encoder.dim
        got["encoder_backend"] = encoder.backend
        got["encoder_export"] = encoder.export
        for field, value in got.items():
            recorded = self.manifest.get(field, _UNRECORDED.get(field))
            if value != recorded:
                raise ValueError(
                    f"{self.generation / 'manifest.json'}: {field} is {recorded!r}, the "
                    f"encoder's is {value!r} (another encoder)"
                )

    @classmethod
    def open(cls, root: str | os.PathLike) -> CorpusIndex:
        """Load the live generation of ``root``, every file's size and SHA-256 checked.

        Raises
        ------
        ValueError
            One line naming the folder, the file or the field that is wrong.
        """
        root = Path(root)
        try:
            return generations.read_current(root, lambda gen: cls._load(root, gen))
        except ArtifactError as err:
            raise ValueError(f"index: {err}") from None

    @classmethod
    def _load(cls, root: Path, generation: Path) -> CorpusIndex:
        manifest = check_folder(generation, format=FORMAT, version=VERSION)
        where = generation / "manifest.json"
        for key in ("model", "max_seq_length", "dim", "kind", "graphs", "size"):
            if key not in manifest:
                raise ArtifactError(f"{where}: field {key!r} missing")
        docs = json.loads((generation / "docs.json").read_text(encoding="utf-8"))
        embeddings = torch.from_numpy(np.load(generation / "embeddings.npy", allow_pickle=False))
        n = manifest["size"]
        if [len(docs[k]) for k in ("ids", "titles", "texts")] != [n] * 3:
            raise ArtifactError(f"{generation / 'docs.json'}: does not hold {n} passages")
        if tuple(embeddings.shape) != (n, manifest["dim"]):
            raise ArtifactError(
                f"{generation / 'embeddings.npy'}: shape {tuple(embeddings.shape)}, "
                f"the manifest says ({n}, {manifest['dim']})"
            )
        return cls(
            root, generation, docs["ids"], docs["titles"], docs["texts"], embeddings, manifest
        )


def _full(title: str, text: str) -> str:
    return f"{title} {text}".strip() if title else text


# ---------------------------------------------------------------------------- documents
def _document(doc: object, where: str) -> tuple[str, str, str]:
    if not isinstance(doc, Mapping):
        fields = {k: getattr(doc, k, None) for k in ("id", "title", "text")}
        if fields["id"] is None or fields["text"] is None:
            raise ValueError(f"{where}: a document is a dict with 'id' and 'text', got {doc!r}")
        doc = fields
    doc_id, title, text = doc.get("id", doc.get("_id")), doc.get("title") or "", doc.get("text")
    for name, value in (("id", doc_id), ("title", title), ("text", text)):
        if not isinstance(value, str):
            raise ValueError(f"{where}: {name!r} must be a string, got {value!r}")
    if not doc_id:
        raise ValueError(f"{where}: an empty 'id'")
    return doc_id, title, text


def parse_documents(documents: Iterable, where: str = "documents") -> tuple[list, list, list]:
    """``(ids, titles, texts)`` of dicts ``{"id", "title"?, "text"}`` (or objects with those
    attributes); a duplicate id is a ValueError naming it."""
    rows = [_document(doc, f"{where}[{i}]") for i, doc in enumerate(documents)]
    ids = [r[0] for r in rows]
    seen: set[str] = set()
    duplicate = sorted({i for i in ids if i in seen or seen.add(i)})
    if duplicate:
        raise ValueError(f"{where}: duplicate id(s) {duplicate[:5]}")
    return ids, [r[1] for r in rows], [r[2] for r in rows]


def read_documents(path: str | os.PathLike) -> list[dict]:
    """The documents of a JSONL file, one ``{"id", "title"?, "text"}`` object a line."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--corpus: no such file {path}")
    docs = []
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if line.strip():
                record = parse_json(line, f"{path}:{line_no}")
                _document(record, f"{path}:{line_no}")
                docs.append(record)
    if not docs:
        raise ValueError(f"--corpus: {path} holds no documents")
    return docs


def documents_from_dataset(dataset: BeirDataset) -> list[dict]:
    """The corpus of a loaded data set as documents, in its order."""
    return [{"id": d, "title": doc.title, "text": doc.text} for d, doc in dataset.corpus.items()]


# ---------------------------------------------------------------------------- graphs
def _entity_options(name: str, model: str) -> EntityGraphOptions:
    """The options of graph ``entity:EXTRACTORS`` at the entity methods' defaults (they all
    read the same graph: a retriever's own settings never name a graph field)."""
    return EntityGraphOptions(extractors=name.partition(":")[2], model=model)


def check_graph(name: str) -> str:
    """``name`` if it is a graph an index can hold (:data:`GRAPHS`), else a ValueError."""
    if name in ("passage", "phrase", "hyte"):
        return name
    if name.startswith("entity:") and name.partition(":")[2]:
        _entity_options(name, DEFAULT_MODEL)  # the extractors' own checks
        return name
    raise ValueError(f"--graph: unknown graph {name!r} (known: {', '.join(GRAPHS)})")


def _build_graph(name: str, corpus: Corpus, model: str, encoder: TextEncoder) -> None:
    """Build graph ``name`` of ``corpus`` into its cache (where the retrievers find it)."""
    if name == "passage":
        corpus_graph(corpus)
    elif name == "phrase":
        from georag.retrievers.phrase_ppr import PhrasePPRConfig

        cache = Path(corpus.cache_dir) / "graphs"
        args = (corpus.doc_ids, corpus.titles, corpus.texts, corpus.embeddings)
        build_phrase_graph(*args, config=PhrasePPRConfig().graph_config(), cache_dir=cache)
    elif name == "hyte":
        from georag.retrievers.hyte import HyTERetriever

        HyTERetriever().fit(corpus)
    else:
        entity_graph_for(corpus, _entity_options(name, model))


def _update_entity(
    name: str, old: Corpus, new: Corpus, keep: list[int], model: str, encoder: TextEncoder
) -> None:
    """The entity graph of ``new`` (``old``'s rows ``keep``, then the rest) from ``old``'s."""
    options = _entity_options(name, model)
    if not keep:  # nothing of the old corpus is left
        entity_graph_for(new, options)
        return
    graph: EntityGraph = entity_graph_for(old, options)
    if len(keep) < old.embeddings.shape[0]:
        graph = graph.remove(sorted(set(range(graph.num_passages)) - set(keep)), encoder.encode)
    added = slice(len(keep), None)
    if new.doc_ids[added]:
        graph = graph.add(
            new.doc_ids[added], new.titles[added], new.texts[added], encoder.encode, progress=True
        )
    graph.save(entity_graph_folder(new, options))


# ---------------------------------------------------------------------------- writing
def _write_generation(
    root: Path,
    columns: tuple[list[str], list[str], list[str]],
    embeddings: torch.Tensor,
    *,
    encoder: TextEncoder,
    kind: str,
    graphs: Sequence[str],
    previous: CorpusIndex | None = None,
    keep: list[int] | None = None,
) -> Path:
    generation = generations.next_generation(root)
    ids, titles, texts = columns
    meta = {
        "georag_version": __version__,
        "model": encoder.name,
        "max_seq_length": encoder.max_seq_length,
        "encoder_backend": encoder.backend,
        "encoder_export": encoder.export,
        "dim": int(embeddings.shape[1]),
        "kind": kind,
        "graphs": list(graphs),
        "size": len(ids),
    }
    with atomic_folder(generation, format=FORMAT, version=VERSION, **meta) as tmp:
        steps = ["docs", "embeddings", "faiss", "bm25", *graphs]
        for step in tqdm(steps, desc=f"index {generation.name}", unit="part"):
            if step == "docs":
                blob = json.dumps({"ids": ids, "titles": titles, "texts": texts})
                (tmp / "docs.json").write_text(blob, encoding="utf-8")
            elif step == "embeddings":
                np.save(tmp / "embeddings.npy", embeddings.numpy(), allow_pickle=False)
            elif step == "faiss":
                dense = DenseIndex(embeddings.shape[1], kind=kind)
                dense.add(embeddings)
                dense.save(tmp / "dense.faiss")
            elif step == "bm25":
                BM25Index.build([_full(t, x) for t, x in zip(titles, texts)]).save(tmp / "bm25")
            else:
                corpus = Corpus(ids, titles, texts, embeddings, cache_dir=str(tmp / "cache"))
                if previous is not None and step.startswith("entity:"):
                    args = (step, previous.corpus(), corpus, keep, encoder.name, encoder)
                    _update_entity(*args)
                else:
                    _build_graph(step, corpus, encoder.name, encoder)
        generations.checkpoint("parts")
    generations.checkpoint("staged")
    generations.switch(root, generation)
    generations.checkpoint("switched")
    generations.prune(root)
    return generation


def build_index(
    documents: Iterable,
    out: str | os.PathLike,
    *,
    model: str = DEFAULT_MODEL,
    kind: str = "flat",
    graphs: Sequence[str] = (),
    encoder: TextEncoder | None = None,
) -> CorpusIndex:
    """Build an index of ``documents`` in folder ``out`` (its first generation, or the next
    one when ``out`` already is an index: a rebuild readers see whole).

    Parameters
    ----------
    documents : iterable of dict
        ``{"id", "title"?, "text"}`` (:func:`read_documents`, :func:`documents_from_dataset`).
    out : path
        The index folder; an existing folder must be empty or an index.
    model : str
        The sentence encoder (ignored when ``encoder`` is given).
    kind : {"flat", "ivf"}
        The faiss index.
    graphs : sequence of str
        The graphs to hold (:data:`GRAPHS`); a method whose graph is missing is refused.
    encoder : TextEncoder, optional
    """
    out = Path(out)
    graphs = list(dict.fromkeys(check_graph(g) for g in graphs))
    if out.exists() and any(out.iterdir()) and not generations.is_root(out):
        raise ValueError(f"--out: {out} exists, is not empty and is not a georag index")
    ids, titles, texts = parse_documents(documents)
    if not ids:
        raise ValueError("documents: the corpus is empty")
    encoder = encoder or TextEncoder(model)
    full = [_full(t, x) for t, x in zip(titles, texts)]
    embeddings, _ = corpus_embeddings(full, encoder)
    with generations.writer_lock(out):
        args = ((ids, titles, texts), embeddings.float().contiguous())
        _write_generation(out, *args, encoder=encoder, kind=kind, graphs=graphs)
    return CorpusIndex.open(out)


def update_index(
    root: str | os.PathLike,
    *,
    add: Iterable = (),
    delete: Iterable[str] = (),
    encoder: TextEncoder | None = None,
) -> CorpusIndex:
    """Delete passages by id, then append ``add``; the next generation becomes live.

    Only the added passages are encoded. Readers see the index before or after, never
    between; a process killed at any point leaves the previous generation live.

    Raises
    ------
    ValueError
        An unknown id to delete, an added id that is already in the index or given twice,
        deleting every passage, or an ``encoder`` other than the index's.
    """
    root = Path(root)
    new_ids, new_titles, new_texts = parse_documents(add, "add")
    delete = list(delete)
    with generations.writer_lock(root):
        generations.checkpoint("locked")
        old = CorpusIndex.open(root)
        generations.prune(root)  # what a writer killed before its switch left
        row = old.row_of
        unknown = [d for d in dict.fromkeys(delete) if d not in row]
        if unknown:
            raise ValueError(f"delete: unknown id(s) {unknown[:10]}")
        gone = {row[d] for d in delete}
        keep = [i for i in range(old.size) if i not in gone]
        clash = [d for d in new_ids if d in row and row[d] not in gone]
        if clash:
            raise ValueError(f"add: id(s) already in the index {clash[:10]}")
        if not keep and not new_ids:
            raise ValueError("delete: would remove every passage of the index")
        encoder = encoder or TextEncoder(
            old.model, backend=old.manifest.get("encoder_backend", "torch")
        )
        old.check_encoder(encoder)
        full = [_full(t, x) for t, x in zip(new_titles, new_texts)]
        fresh = encoder.encode(full, desc="new documents") if full else None
        generations.checkpoint("encoded")
        kept = old.embeddings[keep]
        embeddings = kept if fresh is None else torch.cat([kept, fresh.to(kept.dtype)])
        columns = tuple(
            [column[i] for i in keep] + added
            for column, added in zip(
                (old.doc_ids, old.titles, old.texts), (new_ids, new_titles, new_texts)
            )
        )
        _write_generation(
            root,
            columns,
            embeddings.contiguous(),
            encoder=encoder,
            kind=old.manifest["kind"],
            graphs=old.graphs,
            previous=old,
            keep=keep,
        )
    return CorpusIndex.open(root)

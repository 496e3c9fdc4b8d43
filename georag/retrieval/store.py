"""A saved first-stage index of one corpus: faiss + BM25 + ids and texts, with a manifest."""

from __future__ import annotations

import json
import os
from pathlib import Path

from georag._io import ArtifactError, atomic_folder, check_folder
from georag.data.beir import BeirDataset
from georag.resources import DEFAULT_MODEL
from georag.retrieval.bm25 import BM25Index
from georag.retrieval.candidates import corpus_embeddings
from georag.retrieval.dense import DenseIndex
from georag.retrieval.encoder import TextEncoder
from georag.retrieval.hybrid import fuse

__all__ = ["IndexStore", "build_store"]

FORMAT = "georag-store"
VERSION = 1


class IndexStore:
    """Dense and BM25 indexes over the same documents, searchable by text."""

    def __init__(
        self,
        dense: DenseIndex,
        bm25: BM25Index,
        doc_ids: list[str],
        texts: list[str],
        model: str,
        encoder_backend: str = "torch",
    ) -> None:
        if not (dense.size == bm25.num_docs == len(doc_ids) == len(texts)):
            raise ValueError(
                f"index parts disagree: dense {dense.size}, bm25 {bm25.num_docs}, "
                f"{len(doc_ids)} ids, {len(texts)} texts"
            )
        self.dense, self.bm25, self.doc_ids, self.texts, self.model = (
            dense,
            bm25,
            doc_ids,
            texts,
            model,
        )
        self.encoder_backend = encoder_backend
        self._encoder: TextEncoder | None = None

    @property
    def size(self) -> int:
        return len(self.doc_ids)

    def save(self, folder: str | os.PathLike) -> None:
        """Write every part into a temporary folder, then swap it into place as a whole.

        ``manifest.json`` (SHA-256 of every file, the BM25 part's included) is written last;
        a killed write leaves the previous store loadable.
        """
        with atomic_folder(
            folder,
            format=FORMAT,
            version=VERSION,
            model=self.model,
            size=self.size,
            encoder_backend=self.encoder_backend,
        ) as tmp:
            self.dense.save(tmp / "dense.faiss")
            self.bm25.save(tmp / "bm25")
            docs = json.dumps({"doc_ids": self.doc_ids, "texts": self.texts})
            (tmp / "docs.json").write_text(docs, encoding="utf-8")

    @classmethod
    def load(cls, folder: str | os.PathLike) -> IndexStore:
        """Read a store, checking the manifest's format, sizes and checksums (its queries
        are encoded with the encoder backend that built it)."""
        folder = Path(folder)
        try:
            manifest = check_folder(folder, format=FORMAT, version=VERSION)
        except ArtifactError as err:
            raise ValueError(f"--index: {err}") from None
        docs = json.loads((folder / "docs.json").read_text(encoding="utf-8"))
        return cls(
            DenseIndex.load(folder / "dense.faiss"),
            BM25Index.load(folder / "bm25"),
            docs["doc_ids"],
            docs["texts"],
            manifest["model"],
            manifest.get("encoder_backend", "torch"),
        )

    def search(
        self, query: str, *, k: int = 10, first_stage: str = "hybrid"
    ) -> list[tuple[str, float, str]]:
        """Top-``k`` ``(doc_id, score, text)`` for one query."""
        if first_stage == "bm25":
            scores, indices = self.bm25.search([query], k)
        else:
            self._encoder = self._encoder or TextEncoder(
                self.model, show_progress=False, backend=self.encoder_backend
            )
            dense = self.dense.search(self._encoder.encode([query]), k)
            scores, indices = (
                dense
                if first_stage == "dense"
                else fuse(dense, self.bm25.search([query], k), num_docs=self.size, top_m=k)
            )
        return [
            (self.doc_ids[j], float(s), self.texts[j])
            for s, j in zip(scores[0].tolist(), indices[0].tolist())
            if j >= 0
        ]


def build_store(
    dataset: BeirDataset,
    folder: str | os.PathLike,
    *,
    model: str = DEFAULT_MODEL,
    kind: str = "flat",
    encoder_backend: str = "torch",
) -> IndexStore:
    """Encode and index ``dataset``'s corpus and save it into ``folder`` (with the encoder
    backend ``encoder_backend``, which the store's queries then use too)."""
    doc_ids = list(dataset.corpus)
    texts = [dataset.corpus[d].full_text for d in doc_ids]
    embeddings, _ = corpus_embeddings(texts, TextEncoder(model, backend=encoder_backend))
    dense = DenseIndex(embeddings.shape[1], kind=kind)
    dense.add(embeddings)
    store = IndexStore(dense, BM25Index.build(texts), doc_ids, texts, model, encoder_backend)
    store.save(folder)
    return store

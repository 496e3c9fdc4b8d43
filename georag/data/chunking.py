"""Sliding-window chunking that remembers which document each chunk came from."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Chunks", "chunk_documents"]


@dataclass(frozen=True)
class Chunks:
    """Chunks of a corpus.

    Attributes
    ----------
    texts : list of str
        Chunk texts, length C.
    doc_ids : list of str
        The source document of each chunk, length C.
    chunk_ids : list of str
        ``"<doc_id>#<k>"`` for the k-th chunk of a document, length C.
    """

    texts: list[str]
    doc_ids: list[str]
    chunk_ids: list[str]

    def __len__(self) -> int:
        return len(self.texts)


def chunk_documents(docs: dict[str, str], *, window: int = 300, overlap: int = 60) -> Chunks:
    """Split each document into windows of ``window`` words that overlap by ``overlap`` words.

    A document of at most ``window`` words is one chunk; an empty document still gets one
    (empty) chunk so that no document disappears from the mapping.

    Parameters
    ----------
    docs : dict of str to str
        ``doc_id -> text``.
    window : int
        Words per chunk, > 0.
    overlap : int
        Words shared by consecutive chunks, 0 <= overlap < window.
    """
    if window <= 0:
        raise ValueError(f"window must be positive, got {window}")
    if not 0 <= overlap < window:
        raise ValueError(f"overlap must be in [0, window={window}), got {overlap}")
    stride = window - overlap
    texts: list[str] = []
    doc_ids: list[str] = []
    chunk_ids: list[str] = []
    for doc_id, text in docs.items():
        words = text.split()
        starts = range(0, max(len(words) - overlap, 1), stride)
        for k, start in enumerate(starts):
            texts.append(" ".join(words[start : start + window]))
            doc_ids.append(doc_id)
            chunk_ids.append(f"{doc_id}#{k}")
    return Chunks(texts, doc_ids, chunk_ids)

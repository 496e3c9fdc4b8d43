"""BM25 over bm25s (Lucene scoring, k1=1.2, b=0.75 by default)."""

from __future__ import annotations

import logging
import os

import numpy as np
import torch

from georag._io import atomic_folder, check_folder

__all__ = ["BM25Index", "tokenize"]

TOKENIZERS = ("default", "whitespace", "stem")
FORMAT = "georag-bm25"
VERSION = 1


def _bm25s():
    """Import bm25s, which sets its logger to DEBUG at import: let the caller's config decide."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.NOTSET)
    return bm25s


def tokenize(texts: list[str], tokenizer: str = "default") -> list[list[str]]:
    """Split texts into tokens.

    ``default``: bm25s' tokenizer (lowercase, words of 2+ characters, English stop words removed);
    ``whitespace``: lowercase and split on whitespace (the HyTE-H paper's choice);
    ``stem``: ``default`` plus an English Snowball stemmer (needs PyStemmer).
    """
    bm25s = _bm25s()

    if tokenizer == "whitespace":
        return [text.lower().split() for text in texts]
    if tokenizer == "default":
        stemmer = None
    elif tokenizer == "stem":
        try:
            import Stemmer
        except ImportError as err:
            raise ValueError("tokenizer='stem' needs PyStemmer: pip install PyStemmer") from err
        stemmer = Stemmer.Stemmer("english").stemWords
    else:
        raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {tokenizer!r}")
    return bm25s.tokenize(
        texts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
    )


class BM25Index:
    """A BM25 index over a list of texts. Build with :meth:`build`."""

    def __init__(self, retriever, num_docs: int, *, k1: float, b: float, tokenizer: str) -> None:
        self.retriever = retriever
        self.num_docs = num_docs
        self.k1, self.b, self.tokenizer = k1, b, tokenizer

    @classmethod
    def build(
        cls, texts: list[str], *, k1: float = 1.2, b: float = 0.75, tokenizer: str = "default"
    ) -> BM25Index:
        """Index ``texts`` (N documents)."""
        bm25s = _bm25s()
        if len(texts) == 0:
            raise ValueError("texts: cannot build a BM25 index over an empty corpus")
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"k1 must be >= 0 and b in [0, 1], got k1={k1}, b={b}")
        tokens = tokenize(texts, tokenizer)
        if not any(tokens):
            raise ValueError(
                f"texts: none of the {len(texts)} documents has an indexable "
                f"token (all empty or stop words, tokenizer={tokenizer!r})"
            )
        retriever = bm25s.BM25(k1=k1, b=b)
        retriever.index(tokens, show_progress=False)
        return cls(retriever, len(texts), k1=k1, b=b, tokenizer=tokenizer)

    def search(self, queries: list[str], k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-``k`` documents per query.

        Returns
        -------
        scores : torch.Tensor, shape (B, k'), float32
        indices : torch.Tensor, shape (B, k'), int64
            ``k' = min(k, num_docs)``. A query with no known token scores 0 everywhere.
        """
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        if len(queries) == 0:
            return torch.empty(0, 0), torch.empty(0, 0, dtype=torch.long)
        vocab = self.retriever.vocab_dict
        tokens = [[t for t in query if t in vocab] for query in tokenize(queries, self.tokenizer)]
        k = min(k, self.num_docs)
        # A query with no indexed token matches nothing: every document scores 0.
        scores = torch.zeros(len(queries), k)
        indices = torch.arange(k).repeat(len(queries), 1)
        known = [row for row, query in enumerate(tokens) if query]
        if known:
            found, found_scores = self.retriever.retrieve(
                [tokens[r] for r in known], k=k, show_progress=False
            )
            scores[known] = torch.from_numpy(np.asarray(found_scores, dtype=np.float32))
            indices[known] = torch.from_numpy(np.asarray(found, dtype=np.int64))
        return scores, indices

    def scores(self, queries: list[str]) -> torch.Tensor:
        """The BM25 score of every document for each query, shape (B, N), float32 (0 for a
        query with no indexed token); no sort, unlike :meth:`search`."""
        vocab = self.retriever.vocab_dict
        out = torch.zeros(len(queries), self.num_docs)
        for row, query in enumerate(tokenize(queries, self.tokenizer)):
            known = [t for t in query if t in vocab]
            if known:
                out[row] = torch.from_numpy(
                    np.asarray(self.retriever.get_scores(known), dtype=np.float32)
                )
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Write the index into folder ``path``, replacing it as a whole.

        bm25s' files and a ``manifest.json`` (settings, SHA-256 of every file) are written
        into a temporary folder that is then swapped into place; a killed write leaves the
        previous index.
        """
        settings = {
            "num_docs": self.num_docs,
            "k1": self.k1,
            "b": self.b,
            "tokenizer": self.tokenizer,
        }
        with atomic_folder(path, format=FORMAT, version=VERSION, settings=settings) as tmp:
            self.retriever.save(str(tmp))

    @classmethod
    def load(cls, path: str | os.PathLike) -> BM25Index:
        """Read an index written by :meth:`save` (checksums checked; ValueError naming the file)."""
        bm25s = _bm25s()

        manifest = check_folder(path, format=FORMAT, version=VERSION)
        settings = manifest.get("settings")
        if not isinstance(settings, dict) or set(settings) != {"num_docs", "k1", "b", "tokenizer"}:
            raise ValueError(f"path: {path}/manifest.json has no valid settings")
        try:
            retriever = bm25s.BM25.load(str(path))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"path: cannot read the BM25 index at {path}: {err}") from None
        return cls(
            retriever,
            settings["num_docs"],
            k1=settings["k1"],
            b=settings["b"],
            tokenizer=settings["tokenizer"],
        )

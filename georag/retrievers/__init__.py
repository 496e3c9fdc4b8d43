"""Corpus-level retrievers and pool expanders: methods that rank the rows of a whole corpus.

Each is fitted on a :class:`~georag.batch.Corpus` and ranks its rows for a
:class:`~georag.batch.QueryBatch` (:class:`~georag.rerank.base.Retriever`), registered by
name in the one method registry (:mod:`georag.rerank.registry`) beside the pool rerankers:

* :mod:`~georag.retrievers.dense` and :mod:`~georag.retrievers.lexical`: exact cosine,
  BM25 and their fusions over the corpus (the non-graph bars);
* :mod:`~georag.retrievers.iso` and :mod:`~georag.retrievers.learned_iso`: ISO-RAG on the
  passage graph and its learnable twin;
* :mod:`~georag.retrievers.ppr_global`: whole-graph PPR over the passage graph;
* :mod:`~georag.retrievers.phrase_ppr`: PPR over the passage-phrase (or entity) graph as a
  residual;
* :mod:`~georag.retrievers.hipporag2` and :mod:`~georag.retrievers.learned_hipporag2`:
  HippoRAG 2's retrieval on the entity-passage graph and its learnable twin;
* :mod:`~georag.retrievers.iso_entity` and :mod:`~georag.retrievers.learned_iso_entity`:
  ISO-RAG on the entity-passage graph and its learnable twin;
* :mod:`~georag.retrievers.hyte`: HyTE-H's BM25 + Lorentz pipeline;
* :mod:`~georag.retrievers.gar`: adaptive reranking over a corpus graph (a pool expander).

:mod:`~georag.retrievers.base` holds what they share, :mod:`~georag.retrievers.entity` what
the entity-graph retrievers share, :mod:`~georag.retrievers.learned` what the learnable
ones share. :mod:`~georag.retrievers.index` keeps a corpus index on disk (the parts they fit
from, updated live) and :mod:`~georag.retrievers.retriever` is ``georag.Retriever``, any of
them by text over such an index.
"""

"""Corpus-level retrievers and pool expanders: methods that rank the rows of a whole corpus.

Each is fitted on a :class:`~georag.batch.Corpus` and ranks its rows for a
:class:`~georag.batch.QueryBatch` (:class:`~georag.rerank.base.Retriever`), registered by
name in the one method registry (:mod:`georag.rerank.registry`) beside the pool rerankers:

* :mod:`~georag.retrievers.dense`: exact cosine over the corpus (the plain bar);
* :mod:`~georag.retrievers.iso` and :mod:`~georag.retrievers.learned_iso`: ISO-RAG and its
  learnable twin;
* :mod:`~georag.retrievers.ppr_global`: whole-graph PPR over the passage graph;
* :mod:`~georag.retrievers.phrase_ppr`: PPR over the passage-phrase graph as a residual;
* :mod:`~georag.retrievers.hyte`: HyTE-H's BM25 + Lorentz pipeline;
* :mod:`~georag.retrievers.gar`: adaptive reranking over a corpus graph (a pool expander).

:mod:`~georag.retrievers.base` holds what they share.
"""

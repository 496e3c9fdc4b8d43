"""Geometric pool rerankers and their learnable twins.

* :mod:`~georag.rerank.geometric.diffusion`: personalized PageRank over the pool's graph
  (``diffusion``, ``learned_diffusion``);
* :mod:`~georag.rerank.geometric.maniscope`: k-NN-graph geodesics fused with cosine
  (``maniscope``, ``learned_maniscope``);
* :mod:`~georag.rerank.geometric.ricci_filtration`: Ricci flow and surgery of the query
  graph (``ricci``, ``learned_ricci``);
* :mod:`~georag.rerank.geometric.hyte`: BM25 + Lorentz hybrid re-scoring (``hyte_rescore``)
  and the HyTE-H config, encoder and index builder.
"""

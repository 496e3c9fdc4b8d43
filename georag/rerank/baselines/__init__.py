"""Non-geometric second stages, the baselines the geometric methods are measured against.

* :mod:`~georag.rerank.baselines.adapter`: a learned linear adapter with learned feature
  weights (``learned_adapter``);
* :mod:`~georag.rerank.baselines.learned_map`: the learned embedding map alone
  (``learned_map``);
* :mod:`~georag.rerank.baselines.doc_prior`: a per-document prior (``prior``);
* :mod:`~georag.rerank.baselines.rocchio`: Rocchio feedback (``rocchio``);
* :mod:`~georag.rerank.baselines.ltr`: LambdaRank learning to rank (``ltr``).
"""

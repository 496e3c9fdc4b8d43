"""Residual geometric heads and the geometric features they weigh.

* :mod:`~georag.rerank.heads.residual_heads`: heads that add geometry to a base score,
  starting at zero change (``graph_smoothing``, ``feature_head``);
* :mod:`~georag.rerank.heads.geo_features`: soft geometric features of each candidate.
"""

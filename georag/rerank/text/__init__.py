"""Text second stages: models that read the query and candidate texts.

* :mod:`~georag.rerank.text.bi_encoder`: a bi-encoder re-embedding (``bi``);
* :mod:`~georag.rerank.text.cross_encoder`: a cross-encoder (``ce``).
"""

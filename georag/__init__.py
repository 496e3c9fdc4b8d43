"""georag: batched geometric reranking for retrieval-augmented generation.

Packages: ``georag.geometry`` (pure tensor math), ``georag.retrieval`` (encoders, indexes,
first stage), ``georag.rerank`` (one reranker per method), ``georag.models``,
``georag.data``, ``georag.eval``; the ``georag`` command lives in ``georag.cli``.
"""

__version__ = "0.1.0"

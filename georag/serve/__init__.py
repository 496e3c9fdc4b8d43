"""``georag serve``: any georag reranker as an HTTP rerank service.

The text-embeddings-inference shape (``POST /rerank``) and the Cohere / Jina shape
(``POST /v1/rerank``), micro-batched onto the method's batched path, with limits, an
optional API key, ``/health`` and Prometheus ``/metrics``. FastAPI and uvicorn (the
``serve`` extra) are imported only by :mod:`georag.serve.app`.

Modules: ``config`` (the settings), ``shapes`` (the two API shapes), ``batcher`` (the
micro-batcher), ``metrics``, ``auth``, ``service`` (all of it without a web framework),
``app`` (the FastAPI shell and the runner).
"""

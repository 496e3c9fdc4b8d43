"""``georag serve``: any georag reranker, or an index's corpus retrieval, as an HTTP service.

Reranking in the text-embeddings-inference shape (``POST /rerank``), the Cohere / Jina
shape (``POST /v1/rerank``) and Cohere's v2 shape (``POST /v2/rerank``); with ``--index``,
a :class:`georag.Retriever` behind ``POST /retrieve``, ``POST /documents`` and ``DELETE
/documents``. Micro-batched onto the batched path, with limits, an optional API key,
``/health``, Prometheus ``/metrics`` and the OpenAPI document of every route. FastAPI and
uvicorn (the ``serve`` extra) are imported only by :mod:`georag.serve.app`.

Modules: ``config`` (the settings), ``shapes`` (the API shapes), ``batcher`` (the
micro-batcher), ``metrics``, ``auth``, ``service`` (the rerank service without a web
framework), ``corpus`` (the corpus retrieval service), ``schema`` (the OpenAPI document),
``app`` (the FastAPI shell and the runner), ``drain`` (the shutdown that loses no request),
``mcp`` (the same models and limits as MCP tools: ``georag mcp``), ``load`` and
``load_retrieve`` (the load test of ``scripts/bench/load_serve.py``).
"""

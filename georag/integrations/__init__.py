"""Drop-in front ends of georag's kernels for other libraries' users
(:mod:`georag.integrations.grc`: GraphRicciCurvature) and adapters of
:class:`georag.Reranker` to RAG frameworks (:mod:`~georag.integrations.langchain`,
:mod:`~georag.integrations.llama_index`, :mod:`~georag.integrations.pyterrier`)."""

"""A stand-in with georag.Retriever's interface (word overlap scores), until it lands."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class RetrievedDoc:
    id: str
    title: str
    text: str
    score: float


class FakeRetriever:
    def __init__(self, documents, method="dense"):
        self.method, self.index_dir = method, "fake"
        self._docs = {d["id"]: d for d in documents}
        self._lock = threading.Lock()

    @property
    def size(self):
        return len(self._docs)

    def retrieve(self, query, k=10):
        return self.retrieve_batch([query], k)[0]

    def retrieve_batch(self, queries, k=10):
        docs = self._docs  # one state for the whole batch
        out = []
        for q in queries:
            words = set(q.lower().split())
            scored = sorted(
                ((len(words & set(d["text"].lower().split())), i) for i, d in docs.items()),
                key=lambda x: (-x[0], x[1]),
            )[:k]
            out.append(
                [
                    RetrievedDoc(i, docs[i].get("title", ""), docs[i]["text"], float(s))
                    for s, i in scored
                ]
            )
        return out

    def add(self, documents):
        with self._lock:
            known = [d["id"] for d in documents if d["id"] in self._docs]
            if known:
                raise ValueError(f"ids already in the index: {known}")
            self._docs = {**self._docs, **{d["id"]: d for d in documents}}

    def delete(self, ids):
        with self._lock:
            unknown = [i for i in ids if i not in self._docs]
            if unknown:
                raise ValueError(f"ids not in the index: {unknown}")
            self._docs = {i: d for i, d in self._docs.items() if i not in set(ids)}

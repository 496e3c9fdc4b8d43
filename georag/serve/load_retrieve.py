"""The corpus retrieval workload of the load test (``load_serve.py --mode retrieve``).

An index of a data set's corpus less its last ``adds x add_batch`` documents (held out) is
built once; every server starts on a copy of it. Timed cells send the data set's queries
to ``POST /retrieve`` (:func:`georag.serve.load.measure_cell`) and compare each answer with
the in-process :meth:`georag.Retriever.retrieve` of the same index: a mismatch returns
other documents or a score further than ``atol`` away (a query encoded within a batch
differs from one encoded alone in the last float bits).

Updates under load (:func:`updates_under_load`): one client adds the held-out documents,
``add_batch`` per ``POST /documents``, one update after the other, while ``concurrency``
clients send probe queries (each held-out document's own text, so that the document is
found once added). Before, the in-process retriever on another copy records every probe's
answer in each state of the index (after 0, 1, ..., ``adds`` updates,
:func:`update_states`); an answer is consistent when it equals a state that lies between
the updates acknowledged before its request was sent and those begun before its answer
came, so an answer from a half-applied update (one document of a pair in, or the
documents in and not yet their embeddings) or from an older state counts as
inconsistent. After each acknowledged update its client sends the probes of its documents
at once: each must be in its probe's answer (``visible``).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import orjson

from georag.serve.load import Connection, percentile, request_bytes

__all__ = [
    "retrieve_workload",
    "retrieve_references",
    "compare_retrieve",
    "update_states",
    "updates_under_load",
]


def retrieve_workload(
    dataset: str, data_dir: str | None, held_out: int, folder: str | Path, backend: str = "torch"
) -> tuple[list[str], list[dict]]:
    """Build the index of ``dataset``'s corpus less its last ``held_out`` documents in
    ``folder`` with the encoder ``backend`` (the server's and the in-process reference's query
    encoder follow the index's); the data set's queries and the held-out documents."""
    from georag.data.beir import load_beir
    from georag.resources import DEFAULT_MODEL
    from georag.retrieval.encoder import TextEncoder
    from georag.retrievers.index import build_index, documents_from_dataset

    data = load_beir(dataset, data_dir=data_dir)
    documents = documents_from_dataset(data)
    if held_out >= len(documents):
        raise ValueError(f"--adds: {held_out} documents to hold out of {len(documents)}")
    encoder = TextEncoder(DEFAULT_MODEL, backend=backend) if backend != "torch" else None
    build_index(documents[: len(documents) - held_out], folder, encoder=encoder)
    return list(data.queries.values()), documents[len(documents) - held_out :]


def copy_index(folder: str | Path, to: str | Path) -> str:
    """A fresh copy of the index ``folder`` at ``to`` (replacing it)."""
    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(folder, to)
    return str(to)


def _pairs(docs) -> list[tuple[str, float]]:
    return [(d.id, float(d.score)) for d in docs]


def retrieve_references(folder, method: str, queries: list[str], top_k: int) -> list[list]:
    """``[(id, score)]`` of :meth:`georag.Retriever.retrieve` per query, one at a time."""
    import georag

    retriever = georag.Retriever(folder, method=method)
    return [_pairs(retriever.retrieve(q, k=top_k)) for q in queries]


def compare_retrieve(answer: dict, expected: list, atol: float) -> tuple[bool, bool]:
    """(mismatch, same order) of one /retrieve answer against ``[(id, score)]``."""
    got = {r["id"]: r["score"] for r in answer["results"]}
    want = dict(expected)
    if got.keys() != want.keys():
        return True, False
    same_order = [r["id"] for r in answer["results"]] == [i for i, _ in expected]
    return any(abs(got[i] - s) > atol for i, s in want.items()), same_order


def update_states(folder, method: str, probes: list[str], groups: list[list[dict]], top_k: int):
    """``states[m][p]``: probe ``p``'s answer ``[(id, score)]`` after the first ``m``
    updates (in process, on ``folder``, which the updates change)."""
    import georag

    retriever = georag.Retriever(folder, method=method)
    states = [[_pairs(d) for d in retriever.retrieve_batch(probes, k=top_k)]]
    for group in groups:
        retriever.add(group)
        states.append([_pairs(d) for d in retriever.retrieve_batch(probes, k=top_k)])
    return states


async def _run(url: str, probes: list[str], groups: list[list[dict]], top_k: int, concurrency):
    """The updates and the probes; ``(adds, records)``: per update ``(status, seconds,
    visible)``, per probe answer ``(probe, lowest state, highest state, status, answer)``."""
    asks = [
        request_bytes(url, orjson.dumps({"query": p, "top_k": top_k}), "/retrieve") for p in probes
    ]
    counts = {"begun": 0, "acked": 0, "done": False}
    adds: list = []
    records: list = []

    async def prober(first: int) -> None:
        connection = await Connection.open(url)
        i = first
        while not counts["done"]:
            p, lowest = i % len(asks), counts["acked"]
            status, answer = await connection.send(asks[p])
            records.append((p, lowest, counts["begun"], status, answer))
            i += concurrency
        connection.close()

    async def updater() -> None:
        connection = await Connection.open(url)
        await asyncio.sleep(0.2)  # the probers first
        for m, group in enumerate(groups):
            body = orjson.dumps({"documents": group})
            counts["begun"] += 1
            t0 = time.perf_counter()
            status, _ = await connection.send(request_bytes(url, body, "/documents"))
            seconds = time.perf_counter() - t0
            counts["acked"] += status == 200
            visible = True
            first = sum(len(g) for g in groups[:m])
            for probe, document in enumerate(group, start=first):  # its own text finds it
                seen, answer = await connection.send(asks[probe])
                found = {r["id"] for r in answer["results"]} if seen == 200 else set()
                visible &= document["id"] in found
            adds.append((status, seconds, visible))
        counts["done"] = True
        connection.close()

    await asyncio.gather(updater(), *(prober(w) for w in range(concurrency)))
    return adds, records


def updates_under_load(
    url: str,
    probes: list[str],
    groups: list[list[dict]],
    states: list,
    top_k: int,
    concurrency: int,
    atol: float,
) -> dict:
    """Add ``groups`` one after the other while ``concurrency`` clients send ``probes``;
    the counts of errors, inconsistent answers and updates not visible at once."""
    t0 = time.perf_counter()
    adds, records = asyncio.run(_run(url, probes, groups, top_k, concurrency))
    wall = time.perf_counter() - t0
    answered = [r for r in records if r[3] == 200]

    def consistent(record) -> bool:
        p, lowest, highest, _, answer = record
        return any(
            not compare_retrieve(answer, states[m][p], atol)[0] for m in range(lowest, highest + 1)
        )

    seconds = [1000 * s for status, s, _ in adds if status == 200]
    return {
        "updates": len(adds),
        "documents_added": sum(len(g) for g, a in zip(groups, adds) if a[0] == 200),
        "update_errors": sum(status != 200 for status, _, _ in adds),
        "update_p50_ms": percentile(seconds, 50) if seconds else None,
        "update_max_ms": max(seconds) if seconds else None,
        "not_visible_after_ack": sum(not visible for _, _, visible in adds),
        "retrieves": len(records),
        "retrieve_errors": len(records) - len(answered),
        "retrieves_per_s": len(records) / wall,
        "inconsistent": sum(not consistent(r) for r in answered),
    }

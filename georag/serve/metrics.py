"""Service metrics in the Prometheus text format (no client library needed).

Counters of requests by route and of responses by status code, histograms of batch
sizes, queue waits and request latencies (of reranks; with an index, of retrieves and of
document updates, and the documents added, deleted and held). Each worker process keeps
its own.
"""

from __future__ import annotations

import bisect
import collections

__all__ = ["Histogram", "Metrics"]

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
OPS = ("added", "deleted")


class Histogram:
    """Cumulative-bucket histogram.

    Parameters
    ----------
    name, help : str
    buckets : sequence of float
        Upper bounds, increasing (``+Inf`` is added).
    """

    def __init__(self, name: str, help: str, buckets) -> None:
        self.name, self.help = name, help
        self.bounds = tuple(buckets)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def lines(self) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        total = 0
        for bound, count in zip((*self.bounds, "+Inf"), self.counts):
            total += count
            out.append(f'{self.name}_bucket{{le="{bound}"}} {total}')
        out += [f"{self.name}_sum {self.sum:.6f}", f"{self.name}_count {total}"]
        return out


class Metrics:
    """Everything ``GET /metrics`` reports."""

    def __init__(self) -> None:
        self.requests: collections.Counter[str] = collections.Counter()
        self.responses: collections.Counter[int] = collections.Counter()
        self.batch_size = Histogram(
            "georag_batch_size", "queries per batched call of the method", BATCH_BUCKETS
        )
        self.queue_wait = Histogram(
            "georag_queue_wait_seconds", "time a query waited for its batch", LATENCY_BUCKETS
        )
        self.latency = Histogram(
            "georag_request_latency_seconds", "rerank request latency", LATENCY_BUCKETS
        )
        self.retrieve_latency = Histogram(
            "georag_retrieve_latency_seconds", "retrieve request latency", LATENCY_BUCKETS
        )
        self.update_latency = Histogram(
            "georag_update_latency_seconds",
            "document update latency (POST and DELETE /documents)",
            LATENCY_BUCKETS,
        )
        self.documents: collections.Counter[str] = collections.Counter()
        self.by_route = {
            "/rerank": self.latency,
            "/v1/rerank": self.latency,
            "/v2/rerank": self.latency,
            "/retrieve": self.retrieve_latency,
            "/documents": self.update_latency,
        }

    def render(self, waiting: int, size: int | None = None) -> str:
        """The Prometheus text exposition (``waiting``: queries queued now; ``size``: the
        documents of a served index)."""
        lines = [
            "# HELP georag_requests_total requests by route",
            "# TYPE georag_requests_total counter",
        ]
        lines += [
            f'georag_requests_total{{route="{r}"}} {n}' for r, n in sorted(self.requests.items())
        ]
        lines += [
            "# HELP georag_responses_total responses by status code (errors are codes >= 400)",
            "# TYPE georag_responses_total counter",
        ]
        lines += [
            f'georag_responses_total{{code="{c}"}} {n}' for c, n in sorted(self.responses.items())
        ]
        lines += [
            "# HELP georag_queue_depth queries waiting for a batch",
            "# TYPE georag_queue_depth gauge",
            f"georag_queue_depth {waiting}",
        ]
        if size is not None:
            lines += [
                "# HELP georag_documents_total documents added and deleted through /documents",
                "# TYPE georag_documents_total counter",
            ]
            lines += [f'georag_documents_total{{op="{op}"}} {self.documents[op]}' for op in OPS]
            lines += [
                "# HELP georag_index_documents documents in the served index",
                "# TYPE georag_index_documents gauge",
                f"georag_index_documents {size}",
            ]
            histograms = (self.batch_size, self.queue_wait, self.retrieve_latency)
            histograms += (self.update_latency,)
        else:
            histograms = (self.batch_size, self.queue_wait, self.latency)
        for histogram in histograms:
            lines += histogram.lines()
        return "\n".join(lines) + "\n"

"""The pools of the geometry-adds protocol as tensors, and their features.

* :class:`PoolData`: a pool with its embeddings once per document, its features per
  candidate (:func:`pool_data`, :func:`add_features`: BM25, the first-stage rank, the
  document prior and the geometric features of :data:`GEO_FEATURES`), its corpus rows,
  query texts and the corpus' passage-phrase graph (:class:`PhraseCorpus`);
* :func:`phrase_ppr_pool`: the phrase-graph PPR mass of the pool's documents;
* :class:`CorpusFeatures`, :func:`corpus_features`, :func:`prepare`: the corpus-level
  parts (BM25 index, phrase graph) built once per data set, and a fold's two pools;
* :func:`seen_queries` and :func:`report_run`: which report queries have relevant
  documents seen in training; a pool's scores as a run.

The protocol on these pools is :mod:`georag.experiments.geometry_adds`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from georag.batch import scores_to_run
from georag.data.datasets import load_dataset
from georag.rerank.baselines.doc_prior import relevant_elsewhere
from georag.rerank.baselines.ltr import rank_feature
from georag.rerank.heads.geo_features import (
    HUB_FEATURES,
    POOL_FEATURES,
    hubness_features,
    pool_features,
)
from georag.resources import default_cache_dir
from georag.retrieval.bm25 import BM25Index, tokenize
from georag.retrieval.phrase_graph import PhraseGraph, build_phrase_graph, query_phrase_weights
from georag.retrievers.phrase_ppr import PhrasePPRConfig, phrase_ppr_feature
from train.pools import Pool

GEO_FEATURES = POOL_FEATURES + HUB_FEATURES + ("phrase_ppr",)


LTR_FEATURES = ("mapped_cosine", "raw_cosine", "bm25", "rank", "prior")


PPR = PhrasePPRConfig()  # seeds, damping and solver of the phrase-graph PPR


PPR_CHUNK = 128  # queries per PPR solve: bounds the (N + P, B) teleport and mass


@dataclass(frozen=True)
class PhraseCorpus:
    """A corpus' passage-phrase graph and its sparse weights (:meth:`PhraseGraph.to_csr`)."""

    graph: PhraseGraph
    csr: torch.Tensor  # sparse CSR (N + P, N + P)

    @classmethod
    def of(cls, graph: PhraseGraph) -> PhraseCorpus:
        return cls(graph, graph.to_csr())


@dataclass
class PoolData:
    """A pool as tensors: embeddings once per document, features per candidate; the
    corpus rows, query texts and phrase graph that the phrase PPR needs."""

    pool: Pool
    query: torch.Tensor  # (B, D)
    table: torch.Tensor  # (U, D) one row per distinct document
    index: torch.Tensor  # (B, M) row of each candidate in ``table`` (0 at padding)
    features: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> (B, M)
    corpus_rows: torch.Tensor | None = None  # (B, M) corpus row of each candidate (-1 at padding)
    texts: list[str] = field(default_factory=list)  # (B,) query texts
    phrases: PhraseCorpus | None = None

    @property
    def mask(self) -> torch.Tensor:
        return self.pool.batch.mask


def bm25_pool_scores(index: BM25Index, queries: list[str], rows: torch.Tensor) -> torch.Tensor:
    """BM25 score of each candidate (corpus row ``rows[b, m]``, -1 at padding) for its
    query, shape (B, M) float32 (0 at padding)."""
    vocab = index.retriever.vocab_dict
    out = torch.zeros(rows.shape)
    for b, tokens in enumerate(tokenize(queries, index.tokenizer)):
        known = [t for t in tokens if t in vocab]
        if known:
            scores = torch.from_numpy(index.retriever.get_scores(known)).float()
            out[b] = torch.where(rows[b] >= 0, scores[rows[b].clamp_min(0)], 0.0)
    return out


def pool_data(pool: Pool) -> PoolData:
    """The tensors of ``pool`` (distinct documents once)."""
    batch = pool.batch
    position: dict[str, int] = {}
    firsts: list[tuple[int, int]] = []
    index = torch.zeros(batch.mask.shape, dtype=torch.long)
    for b, row in enumerate(batch.doc_ids):
        for m, d in enumerate(row):
            if not d:
                continue
            if d not in position:
                position[d] = len(position)
                firsts.append((b, m))
            index[b, m] = position[d]
    at = torch.tensor(firsts)
    return PoolData(pool, batch.query, batch.cands[at[:, 0], at[:, 1]], index)


def phrase_ppr_pool(
    data: PoolData, seeds: torch.Tensor, rows: torch.Tensor, passage_weight: float
) -> torch.Tensor:
    """Phrase-graph PPR mass of the pool's documents over each query's largest among them.

    The PPR runs over the whole corpus graph
    (:func:`~georag.retrievers.phrase_ppr.phrase_ppr_feature` with the seeds, damping and
    solver of :data:`PPR`), seeded from ``seeds`` on the pool's passages (no passage outside
    the pool is a seed) and from the query's phrases.

    Parameters
    ----------
    data : PoolData
        With ``corpus_rows``, ``texts`` and ``phrases``.
    seeds : torch.Tensor, shape (R, M)
        Passage seed scores of the candidates of ``data``'s queries ``rows``.
    rows : torch.Tensor, shape (R,)
        Query rows of ``data``.
    passage_weight : float
        Share of the teleport mass on the passage seeds.

    Returns
    -------
    torch.Tensor, shape (R, M)
        In [0, 1], 1 at each query's candidate of largest mass, 0 at padding.
    """
    graph, out = data.phrases.graph, []
    for s in range(0, len(rows), PPR_CHUNK):
        part = rows[s : s + PPR_CHUNK]
        at = data.corpus_rows[part]
        keep = at >= 0
        base = torch.full((len(part), graph.num_passages), -torch.inf)
        which = torch.arange(len(part)).unsqueeze(1).expand_as(at)
        base[which[keep], at[keep]] = seeds[s : s + PPR_CHUNK][keep].float()
        phrases = query_phrase_weights([data.texts[i] for i in part.tolist()], graph)
        mass = phrase_ppr_feature(
            data.phrases.csr, base, phrases, **PPR.feature_options(passage_weight)
        )
        pooled = torch.where(keep, mass.gather(1, at.clamp_min(0)), 0.0)
        out.append(pooled / pooled.amax(dim=1, keepdim=True).clamp_min(torch.finfo().tiny))
    return torch.cat(out)


def add_features(
    data: PoolData,
    *,
    bm25: BM25Index,
    phrases: PhraseCorpus,
    corpus_rows: dict[str, int],
    query_texts: dict[str, str],
    fit: Pool,
    chunk: int = 128,
) -> None:
    """Attach every feature of ``data``'s candidates (and its corpus rows, query texts and
    ``phrases``); ``fit`` (the fitting pool) gives the prior and the hubness, leaving a
    fitting query's own labels and row out."""
    batch = data.pool.batch
    rows = torch.tensor([[corpus_rows.get(d, -1) for d in row] for row in batch.doc_ids])
    data.corpus_rows, data.phrases = rows, phrases
    data.texts = [query_texts[q] for q in batch.query_ids]
    feats = {
        "bm25": bm25_pool_scores(bm25, data.texts, rows),
        "prior": relevant_elsewhere(batch.query_ids, batch.doc_ids, fit.qrels),
        "rank": rank_feature(batch.scores, batch.mask),
        "raw_cosine": batch.scores.clone(),
    }
    parts = [pool_features(batch.slice(s, s + chunk)) for s in range(0, batch.batch_size, chunk)]
    for name in POOL_FEATURES:
        feats[name] = torch.cat([p[name] for p in parts])
    order = fit.batch.scores.masked_fill(~fit.batch.mask, -torch.inf).argsort(1, descending=True)
    top = [[fit.batch.doc_ids[b][m] for m in order[b, :10].tolist()] for b in range(len(order))]
    feats.update(hubness_features(batch, fit.batch.query, top, fit.batch.query_ids))
    feats["phrase_ppr"] = phrase_ppr_pool(data, batch.scores, all_rows(data), PPR.passage_weight)
    data.features = {k: v.float() for k, v in feats.items()}


def seen_queries(report: Pool, fit: Pool) -> set[str]:
    """Report queries with a relevant document that is relevant to some fitting query."""
    known = {d for judged in fit.qrels.values() for d, g in judged.items() if g > 0}
    return {
        q
        for q, judged in report.qrels.items()
        if any(g > 0 and d in known for d, g in judged.items())
    }


def all_rows(data: PoolData) -> torch.Tensor:
    """Every query row of the pool, ``(B,)``."""
    return torch.arange(data.pool.batch.batch_size)


@dataclass(frozen=True)
class CorpusFeatures:
    """The corpus-level inputs of the features, built once per data set."""

    bm25: BM25Index
    phrases: PhraseCorpus
    rows: dict[str, int]  # corpus row of each document id
    texts: dict[str, str]  # text of each query id of the data set


def corpus_features(dataset: str, data_dir: str | None, split: str) -> CorpusFeatures:
    """BM25 and the phrase graph over ``dataset``'s corpus (the graph cached under
    ``$GEORAG_CACHE/graphs``), with the texts of its ``split`` queries (and test ones)."""
    data = load_dataset(dataset, split=split, data_dir=data_dir)
    ids = list(data.corpus)
    bm25 = BM25Index.build([data.corpus[d].full_text for d in ids])
    graph = build_phrase_graph(
        ids,
        [data.corpus[d].title for d in ids],
        [data.corpus[d].text for d in ids],
        config=PPR.graph_config(),
        cache_dir=default_cache_dir() / "graphs",
    )
    texts = dict(data.queries)
    if split != "test":  # scifact: the report queries are those of the test split
        texts.update(load_dataset(dataset, split="test", data_dir=data_dir).queries)
    rows = {d: i for i, d in enumerate(ids)}
    return CorpusFeatures(bm25, PhraseCorpus.of(graph), rows, texts)


def prepare(corpus: CorpusFeatures, fit: Pool, report: Pool) -> tuple[PoolData, PoolData]:
    """``(fit data, report data)`` with every feature attached."""
    out = []
    for pool in (fit, report):
        part = pool_data(pool)
        add_features(
            part,
            bm25=corpus.bm25,
            phrases=corpus.phrases,
            corpus_rows=corpus.rows,
            query_texts=corpus.texts,
            fit=fit,
        )
        out.append(part)
    return tuple(out)


def report_run(data: PoolData, scores: torch.Tensor) -> dict[str, dict[str, float]]:
    """The TREC run of ``scores`` over ``data``'s report queries."""
    batch = data.pool.batch
    return scores_to_run(scores, batch.mask, batch.query_ids, batch.doc_ids)

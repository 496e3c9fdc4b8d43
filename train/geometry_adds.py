"""Does geometry add to the strongest non-geometric second stages? The protocol.

One fold = a fitting pool (training queries: a seeded part of them held out for
validation) and a report pool. On it, in this order:

* ``dense``: the first-stage order;
* ``prior``: dense + b * [the document is relevant to another training query], b chosen
  on the validation queries (:mod:`georag.rerank.doc_prior`);
* ``map``: the learned adapter (:class:`~georag.rerank.adapter.LearnedAdapter`), on the
  query side or on both sides (the better on validation), Adam, learned loss
  temperature, early stopping on the validation queries;
* ``map+bm25``: the same with a learned BM25 weight, continued from ``map``;
* ``map+prf``: Rocchio feedback in the mapped space (:mod:`georag.rerank.rocchio`),
  alpha and k chosen on validation;
* ``ltr``: LambdaRank (:mod:`georag.rerank.ltr`) over the mapped and raw cosine, BM25,
  the first-stage rank and the prior, early stopping on validation;
* residual geometric heads (:mod:`georag.rerank.residual_heads`) on ``map`` and
  ``map+bm25``, trained end to end (the adapter's map and weights too) from that
  baseline's trained state, zero at start: graph smoothing (k chosen on validation) and
  the linear head over the geometric features (:mod:`georag.rerank.geo_features`);
  ``ltr+geo``: the same features in LambdaRank (gradient-free); and the feature-drop
  rows (one feature left out at a time);
* ``map+bm25 + phrase-PPR``: ``map+bm25 + w * PPR / max PPR``, the personalized PageRank
  mass over the corpus' passage-phrase graph (:mod:`georag.retrievers.phrase_ppr`), seeded from
  the map's scores on the pool's passages and from the query's phrases, taken at the pool's
  documents over each query's largest there; the passage weight and ``w`` chosen on the
  validation queries (``w`` = 0 is ``map+bm25`` itself).

Among the geometric features, ``phrase_ppr`` is that mass seeded from the first-stage
cosine with :class:`~georag.retrievers.phrase_ppr.PhrasePPRConfig`'s defaults (the corpus
graph is built once per corpus and cached).

Nothing is chosen on the report pool. Every training starts by validating its starting
state, so a trained row never exports weights that validate worse than its start.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field, replace

import torch
from torch import nn

from georag.batch import scores_to_run
from georag.data.datasets import load_dataset
from georag.rerank.adapter import AdapterConfig, LearnedAdapter
from georag.rerank.doc_prior import prior_scores, relevant_elsewhere
from georag.rerank.geo_features import HUB_FEATURES, POOL_FEATURES, hubness_features, pool_features
from georag.rerank.ltr import LambdaRank, LambdaRankConfig, rank_feature
from georag.rerank.residual_heads import (
    FeatureHead,
    FeatureHeadConfig,
    GraphSmoothing,
    GraphSmoothingConfig,
)
from georag.rerank.rocchio import rocchio_scores
from georag.resources import default_cache_dir
from georag.retrieval.bm25 import BM25Index, tokenize
from georag.retrieval.phrase_graph import PhraseGraph, build_phrase_graph, query_phrase_weights
from georag.retrievers.phrase_ppr import PhrasePPRConfig, phrase_ppr_feature, residual_scores
from train.losses import ndcg_at_k, ranking_loss
from train.pools import Pool, holdout_split

__all__ = [
    "GEO_FEATURES",
    "LTR_FEATURES",
    "NON_GEOMETRIC",
    "CorpusFeatures",
    "PhraseCorpus",
    "PoolData",
    "Settings",
    "Stack",
    "bm25_pool_scores",
    "corpus_features",
    "phrase_ppr_pool",
    "pool_data",
    "run_fold",
    "seen_queries",
]

GEO_FEATURES = POOL_FEATURES + HUB_FEATURES + ("phrase_ppr",)
LTR_FEATURES = ("mapped_cosine", "raw_cosine", "bm25", "rank", "prior")
NON_GEOMETRIC = ("dense", "prior", "map", "map+bm25", "map+prf", "ltr")
PRIOR_GRID = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
PRF_GRID = tuple((a, k) for a in (0.1, 0.25, 0.5, 1.0) for k in (3, 5, 10))
SMOOTH_K = (5, 10, 20)
PPR = PhrasePPRConfig()  # seeds, damping and solver of the phrase-graph PPR
PPR_WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
PPR_PASSAGE_WEIGHTS = (0.05, 0.3, 1.0)
PPR_CHUNK = 128  # queries per PPR solve: bounds the (N + P, B) teleport and mass


@dataclass(frozen=True)
class Settings:
    """Training settings of every gradient-trained row (defaults written once here)."""

    epochs: int = 30
    patience: int = 4
    batch_size: int = 64
    map_lr: float = 1e-3
    lr: float = 0.02
    temperature: float = 0.5
    val_fraction: float = 0.2
    seed: int = 0
    drop_heads: bool = True


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
    feats["phrase_ppr"] = phrase_ppr_pool(data, batch.scores, _all(data), PPR.passage_weight)
    data.features = {k: v.float() for k, v in feats.items()}


def seen_queries(report: Pool, fit: Pool) -> set[str]:
    """Report queries with a relevant document that is relevant to some fitting query."""
    known = {d for judged in fit.qrels.values() for d, g in judged.items() if g > 0}
    return {
        q
        for q, judged in report.qrels.items()
        if any(g > 0 and d in known for d, g in judged.items())
    }


class Stack(nn.Module):
    """An adapter and an optional residual head on its scores."""

    def __init__(self, adapter: LearnedAdapter, head: nn.Module | None = None) -> None:
        super().__init__()
        self.adapter, self.head = adapter, head

    def forward(self, data: PoolData, rows: torch.Tensor) -> torch.Tensor:
        uniq, inverse = torch.unique(data.index[rows], return_inverse=True)
        cands = self.adapter.map_docs(data.table[uniq])[inverse]
        query = self.adapter.map_query(data.query[rows])
        mask = data.mask[rows]
        feats = {k: v[rows] for k, v in data.features.items()}
        scores = self.adapter.scores_from(query, cands, mask, feats)
        if isinstance(self.head, GraphSmoothing):
            return self.head.residual(scores, cands, mask)
        if isinstance(self.head, FeatureHead):
            return self.head.residual(scores, mask, feats)
        return scores


def _ndcg(scores: torch.Tensor, data: PoolData, rows: torch.Tensor) -> float:
    pool = data.pool
    return float(
        ndcg_at_k(scores, pool.batch.mask[rows], pool.gains[rows], pool.ideal[rows]).mean()
    )


def _all(data: PoolData) -> torch.Tensor:
    return torch.arange(data.pool.batch.batch_size)


def predict(stack: Stack, data: PoolData, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Scores of ``stack`` on ``rows`` of ``data`` (all by default), without autograd."""
    rows = _all(data) if rows is None else rows
    with torch.no_grad():
        return torch.cat([stack(data, rows[s : s + 256]) for s in range(0, len(rows), 256)])


def train_stack(
    stack: Stack, data: PoolData, train: torch.Tensor, val: torch.Tensor, settings: Settings
) -> dict:
    """Adam on the listwise loss (learned temperature) over ``train`` rows, early stopping
    on the validation NDCG@10 of ``val`` rows; ``stack`` ends with its best weights
    (its starting ones compete). Returns a summary with the training seconds."""
    torch.manual_seed(settings.seed)
    started = time.perf_counter()
    log_t = nn.Parameter(torch.tensor(float(torch.log(torch.tensor(settings.temperature)))))
    maps = [p for n, p in stack.named_parameters() if n.startswith("adapter.embed.")]
    knobs = [p for n, p in stack.named_parameters() if not n.startswith("adapter.embed.")]
    optimizer = torch.optim.Adam(
        [{"params": maps, "lr": settings.map_lr}, {"params": knobs + [log_t], "lr": settings.lr}]
    )
    pool = data.pool
    best = (_ndcg(predict(stack, data, val), data, val), copy.deepcopy(stack.state_dict()))
    start, waited, epochs = best[0], 0, 0
    for epoch in range(settings.epochs):
        order = train[torch.randperm(len(train))]
        for s in range(0, len(order), settings.batch_size):
            rows = order[s : s + settings.batch_size]
            loss = ranking_loss(
                stack(data, rows), pool.batch.mask[rows], pool.gains[rows], temperature=log_t.exp()
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        epochs = epoch + 1
        value = _ndcg(predict(stack, data, val), data, val)
        if value > best[0]:
            best, waited = (value, copy.deepcopy(stack.state_dict())), 0
        else:
            waited += 1
            if waited >= settings.patience:
                break
    stack.load_state_dict(best[1])
    return {
        "val_init": start,
        "val_best": best[0],
        "epochs": epochs,
        "seconds": time.perf_counter() - started,
    }


def _stack_from(base: Stack, head: nn.Module | None = None, features: tuple = ()) -> Stack:
    """A copy of ``base``'s adapter (with ``features`` added at weight 0) under ``head``."""
    cfg = base.adapter.config
    adapter = LearnedAdapter(replace(cfg, features=cfg.features + features))
    state = base.adapter.state_dict()
    weights = torch.zeros(len(adapter.config.features))
    weights[: len(cfg.features)] = state["feature_weights"]
    adapter.load_state_dict({**state, "feature_weights": weights})
    return Stack(adapter, head)


def _ltr_features(data: PoolData, mapped: torch.Tensor, names: tuple[str, ...]) -> torch.Tensor:
    feats = {**data.features, "mapped_cosine": mapped}
    return torch.stack([feats[n] for n in names], dim=-1)


def _fit_ltr(names, fit_data, fit_mapped, report_data, report_mapped, train, val, seed):
    started = time.perf_counter()
    x = _ltr_features(fit_data, fit_mapped, names)
    pool = fit_data.pool
    model = LambdaRank(LambdaRankConfig(features=names, seed=seed))
    model.fit(
        x[train],
        pool.batch.mask[train],
        pool.gains[train],
        val=(x[val], pool.batch.mask[val], pool.gains[val]),
    )
    scores = model.predict(_ltr_features(report_data, report_mapped, names), report_data.mask)
    val_scores = model.predict(x[val], pool.batch.mask[val])
    return scores, {
        "val_best": _ndcg(val_scores, fit_data, val),
        "rounds": model.booster.best_iteration,
        "seconds": time.perf_counter() - started,
    }


def run_fold(fit: PoolData, report: PoolData, settings: Settings, log=print) -> dict:
    """Every row on one fold: ``{"scores": {row: (B, M) report scores}, "notes": {row:
    summary}}``; the rows of :data:`NON_GEOMETRIC` first, then the geometric ones."""
    n = fit.pool.batch.batch_size
    train_rows, val_rows = holdout_split(
        list(range(n)), fraction=settings.val_fraction, seed=settings.seed
    )
    train, val = torch.tensor(train_rows), torch.tensor(val_rows)
    scores: dict[str, torch.Tensor] = {"dense": report.pool.batch.scores.clone()}
    notes: dict[str, dict] = {}

    def note(name: str, summary: dict) -> None:
        notes[name] = summary
        log(f"  {name}: {summary}")

    # prior: b on the validation queries
    started = time.perf_counter()
    fit_scores = fit.pool.batch.scores
    values = {
        b: _ndcg(prior_scores(fit_scores[val], fit.features["prior"][val], b), fit, val)
        for b in PRIOR_GRID
    }
    weight = max(values, key=values.get)
    scores["prior"] = prior_scores(report.pool.batch.scores, report.features["prior"], weight)
    note(
        "prior",
        {"weight": weight, "val_best": values[weight], "seconds": time.perf_counter() - started},
    )

    # map: query side or both sides, the better on validation
    fits = {}
    for side in ("both", "query"):
        stack = Stack(LearnedAdapter(AdapterConfig(side=side, dim=fit.query.shape[1])))
        fits[side] = (stack, {"side": side, **train_stack(stack, fit, train, val, settings)})
    side = max(fits, key=lambda s: fits[s][1]["val_best"])
    mapped, summary = fits[side]
    summary["seconds"] = sum(f[1]["seconds"] for f in fits.values())  # both sides trained
    scores["map"] = predict(mapped, report)
    note("map", summary)

    lexical = _stack_from(mapped, features=("bm25",))
    note("map+bm25", train_stack(lexical, fit, train, val, settings))
    scores["map+bm25"] = predict(lexical, report)

    # Rocchio in the mapped space, fed by the map's ranking
    started = time.perf_counter()
    with torch.no_grad():
        adapter = mapped.adapter

        def prf(data: PoolData, rows: torch.Tensor, alpha: float, k: int) -> torch.Tensor:
            query = adapter.map_query(data.query[rows])
            cands = adapter.map_docs(data.table)[data.index[rows]]
            base = predict(mapped, data, rows)
            return rocchio_scores(query, cands, data.mask[rows], base, alpha, k)

        values = {ak: _ndcg(prf(fit, val, *ak), fit, val) for ak in PRF_GRID}
        alpha, k = max(values, key=values.get)
        scores["map+prf"] = prf(report, _all(report), alpha, k)
    note(
        "map+prf",
        {
            "alpha": alpha,
            "k": k,
            "val_best": values[(alpha, k)],
            "seconds": time.perf_counter() - started,
        },
    )

    fit_mapped, report_mapped = predict(mapped, fit), scores["map"]
    ltr_args = (fit, fit_mapped, report, report_mapped, train, val, settings.seed)
    scores["ltr"], summary = _fit_ltr(LTR_FEATURES, *ltr_args)
    note("ltr", summary)

    # phrase-graph PPR on map+bm25, seeded from the map's scores
    started = time.perf_counter()
    fit_lexical = predict(lexical, fit, val)
    values = {}
    for share in PPR_PASSAGE_WEIGHTS:
        mass = phrase_ppr_pool(fit, fit_mapped[val], val, share)
        for w in PPR_WEIGHTS:
            values[(share, w)] = _ndcg(residual_scores(fit_lexical, mass, w), fit, val)
    share, w = max(values, key=values.get)
    mass = phrase_ppr_pool(report, report_mapped, _all(report), share) if w else None
    scores["map+bm25 + phrase-PPR"] = residual_scores(scores["map+bm25"], mass, w)
    note(
        "map+bm25 + phrase-PPR",
        {
            "passage_weight": share,
            "weight": w,
            "val_init": values[(PPR_PASSAGE_WEIGHTS[0], 0.0)],
            "val_best": values[(share, w)],
            "seconds": time.perf_counter() - started,
        },
    )

    # residual geometric heads, from each baseline's trained state
    for base_name, base in (("map", mapped), ("map+bm25", lexical)):
        trials = {}
        for k in SMOOTH_K:
            stack = _stack_from(base, GraphSmoothing(GraphSmoothingConfig(k=k)))
            trials[k] = (stack, {"k": k, **train_stack(stack, fit, train, val, settings)})
        k = max(trials, key=lambda k: trials[k][1]["val_best"])
        stack, summary = trials[k]
        summary["seconds"] = sum(t[1]["seconds"] for t in trials.values())
        summary["beta"] = float(stack.head.beta().detach())
        summary["temperature"] = float(stack.head.temperature().detach())
        scores[f"{base_name} + smoothing"] = predict(stack, report)
        note(f"{base_name} + smoothing", summary)

        stack = _stack_from(base, FeatureHead(FeatureHeadConfig(features=GEO_FEATURES)))
        summary = train_stack(stack, fit, train, val, settings)
        summary["weights"] = dict(zip(GEO_FEATURES, stack.head.feature_weights.tolist()))
        scores[f"{base_name} + geo head"] = predict(stack, report)
        note(f"{base_name} + geo head", summary)

    scores["ltr+geo"], summary = _fit_ltr(LTR_FEATURES + GEO_FEATURES, *ltr_args)
    note("ltr+geo", summary)
    for drop in GEO_FEATURES:
        kept = tuple(f for f in GEO_FEATURES if f != drop)
        scores[f"ltr+geo - {drop}"], summary = _fit_ltr(LTR_FEATURES + kept, *ltr_args)
        note(f"ltr+geo - {drop}", summary)
        if settings.drop_heads:
            stack = _stack_from(lexical, FeatureHead(FeatureHeadConfig(features=kept)))
            summary = train_stack(stack, fit, train, val, settings)
            scores[f"map+bm25 + geo head - {drop}"] = predict(stack, report)
            note(f"map+bm25 + geo head - {drop}", summary)
    return {"scores": scores, "notes": notes}


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

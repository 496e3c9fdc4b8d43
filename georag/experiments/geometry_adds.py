"""Does geometry add to the strongest non-geometric second stages? The protocol of
``scripts/quality/quality_geometry_adds.py``.

One fold = a fitting pool (training queries: a seeded part of them held out for
validation) and a report pool. On it, in this order:

* ``dense``: the first-stage order;
* ``prior``: dense + b * [the document is relevant to another training query], b chosen
  on the validation queries (:mod:`georag.rerank.baselines.doc_prior`);
* ``map``: the learned adapter (:class:`~georag.rerank.baselines.adapter.LearnedAdapter`), on the
  query side or on both sides (the better on validation), Adam, learned loss
  temperature, early stopping on the validation queries;
* ``map+bm25``: the same with a learned BM25 weight, continued from ``map``;
* ``map+prf``: Rocchio feedback in the mapped space (:mod:`georag.rerank.baselines.rocchio`),
  alpha and k chosen on validation;
* ``ltr``: LambdaRank (:mod:`georag.rerank.baselines.ltr`) over the mapped and raw cosine, BM25,
  the first-stage rank and the prior, early stopping on validation;
* residual geometric heads (:mod:`georag.rerank.heads.residual_heads`) on ``map`` and
  ``map+bm25``, trained end to end (the adapter's map and weights too) from that
  baseline's trained state, zero at start: graph smoothing (k chosen on validation) and
  the linear head over the geometric features (:mod:`georag.rerank.heads.geo_features`);
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

The pools and their features are :mod:`georag.experiments.adds_features`. Over a data
set: :func:`folds_of` (:func:`~georag.experiments.folds.learned_folds`), :func:`run_dataset`
(every fold), :func:`statistics` (intervals, seen / unseen NDCG@10, Holm-corrected tests
against ``map`` and the best non-geometric row) and :func:`markdown`.

Nothing is chosen on the report pool. Every training starts by validating its starting
state, so a trained row never exports weights that validate worse than its start.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, replace

import torch
from torch import nn

from georag.experiments.adds_features import (
    GEO_FEATURES,
    LTR_FEATURES,
    PoolData,
    all_rows,
    corpus_features,
    phrase_ppr_pool,
    prepare,
    report_run,
    seen_queries,
)
from georag.experiments.folds import folds_from_args, subset_training
from georag.experiments.significance import holm_tests, interval_rows, per_query_arrays
from georag.rerank.baselines.adapter import AdapterConfig, LearnedAdapter
from georag.rerank.baselines.doc_prior import prior_scores
from georag.rerank.baselines.ltr import LambdaRank, LambdaRankConfig
from georag.rerank.baselines.rocchio import rocchio_scores
from georag.rerank.heads.residual_heads import (
    FeatureHead,
    FeatureHeadConfig,
    GraphSmoothing,
    GraphSmoothingConfig,
)
from georag.retrievers.phrase_ppr import residual_scores
from train.losses import ndcg_at_k, ranking_loss
from train.pools import holdout_split

NON_GEOMETRIC = ("dense", "prior", "map", "map+bm25", "map+prf", "ltr")


PRIOR_GRID = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


PRF_GRID = tuple((a, k) for a in (0.1, 0.25, 0.5, 1.0) for k in (3, 5, 10))


SMOOTH_K = (5, 10, 20)


PPR_WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)


PPR_PASSAGE_WEIGHTS = (0.05, 0.3, 1.0)


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


def predict(stack: Stack, data: PoolData, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Scores of ``stack`` on ``rows`` of ``data`` (all by default), without autograd."""
    rows = all_rows(data) if rows is None else rows
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
        scores["map+prf"] = prf(report, all_rows(report), alpha, k)
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
    mass = phrase_ppr_pool(report, report_mapped, all_rows(report), share) if w else None
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


METRICS = ("ndcg@10", "recall@10", "mrr@10")


def folds_of(dataset: str, args, encoder):
    """``(fit pool, report pool, label, qrels split)`` per fold
    (:func:`~georag.experiments.folds.learned_folds`; scifact: a seeded ``--train-queries``)."""
    folds = folds_from_args(dataset, args, encoder, corpus=False, val_fraction=0.2)
    if dataset == "scifact":
        folds, _ = subset_training(folds, args.train_queries, seed=0)
    split = "train" if dataset == "scifact" else "test"
    return [(fold.train, fold.report, fold.label, split) for fold in folds]


def run_dataset(dataset: str, args, encoder) -> dict:
    """Every fold of ``dataset`` through :func:`run_fold`: the rows' runs over the report
    queries, their notes per fold, the seen report queries, the qrels and the folds."""
    settings = Settings(
        epochs=args.epochs, patience=args.patience, seed=args.seed, drop_heads=args.drop_heads
    )
    runs: dict[str, dict] = {}
    notes: dict[str, list] = {}
    seen, qrels, folds = set(), {}, {}
    splits = folds_of(dataset, args, encoder)
    started = time.perf_counter()
    corpus = corpus_features(dataset, args.data_dir, splits[0][3])
    print(f"{dataset}: BM25 and phrase graph {time.perf_counter() - started:.0f} s", flush=True)
    for fit_pool, report_pool, label, _ in splits:
        started = time.perf_counter()
        fit, report = prepare(corpus, fit_pool, report_pool)
        print(
            f"{dataset} {label}: {fit_pool.batch.batch_size} fitting queries, "
            f"{report_pool.batch.batch_size} report; "
            f"features {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        result = run_fold(fit, report, settings, log=lambda text: print(text, flush=True))
        for name, scores in result["scores"].items():
            runs.setdefault(name, {}).update(report_run(report, scores))
            notes.setdefault(name, []).append(result["notes"].get(name, {}))
        seen |= seen_queries(report_pool, fit_pool)
        qrels.update(report_pool.qrels)
        folds[label] = list(report_pool.batch.query_ids)
    return {"runs": runs, "notes": notes, "seen": sorted(seen), "qrels": qrels, "folds": folds}


def statistics(result: dict, args) -> tuple[list[dict], str]:
    """Means and 95% bootstrap intervals of :data:`METRICS`, NDCG@10 on the seen and unseen
    report queries, training seconds, and each row's NDCG@10 against ``map`` and against
    the best non-geometric row (paired randomization, Holm); the rows and that best row."""
    queries, values = per_query_arrays(result["runs"], result["qrels"], METRICS)
    seen = set(result["seen"])
    parts = {"seen": [i for i, q in enumerate(queries) if q in seen]}
    parts["unseen"] = [i for i, q in enumerate(queries) if q not in seen]
    resampling = {"resamples": args.resamples, "seed": args.seed}
    rows = interval_rows(values, METRICS, **resampling)
    for row in rows:
        per = values[row["method"]]
        row["train_s"] = sum(f.get("seconds", 0.0) for f in result["notes"][row["method"]])
        for part, index in parts.items():
            row[part] = float(per["ndcg@10"][index].mean()) if index else float("nan")
            row[f"{part}_n"] = len(index)
    best = max((r for r in rows if r["method"] in NON_GEOMETRIC), key=lambda r: r["ndcg@10"])
    for key, bar in (("map", "map"), ("best", best["method"])):
        tested = [r for r in rows if r["method"] not in ("dense", bar)]
        pairs = [(r["method"], bar) for r in tested]
        for row, (delta, _, p_holm) in zip(
            tested, holm_tests(values, "ndcg@10", pairs, **resampling), strict=True
        ):
            row[f"delta_{key}"], row[f"p_{key}"] = delta, p_holm
    return rows, best["method"]


def markdown(saved: dict) -> str:
    """A data set's section: heading, command, protocol and the table of its rows."""
    rows = saved["rows"]
    head = (
        "| method | NDCG@10 [95% CI] | Recall@10 [95% CI] | MRR@10 [95% CI] "
        f"| NDCG@10 seen ({rows[0]['seen_n']}) | unseen ({rows[0]['unseen_n']}) "
        f"| Δ vs map | p (Holm) | Δ vs {saved['best']} | p (Holm) | training s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        cells = [r["method"]]
        for m in METRICS:
            low, high = r[f"{m}_ci"]
            cells.append(f"{r[m]:.4f} [{low:.4f}, {high:.4f}]")
        cells += [f"{r[part]:.4f}" if r[f"{part}_n"] else "–" for part in ("seen", "unseen")]
        for key in ("map", "best"):
            has = f"p_{key}" in r
            cells += [
                f"{r[f'delta_{key}']:+.4f}" if has else "",
                f"{r[f'p_{key}']:.4f}" if has else "",
            ]
        cells.append(f"{r['train_s']:.1f}" if r["train_s"] else "")
        lines.append("| " + " | ".join(cells) + " |")
    return (
        f"### {saved['dataset']} ({rows[0]['queries']} report queries)\n\n"
        f"`{saved['command']}`; {saved['date']}, load average {saved['load']}; "
        f"{saved['protocol']}\n\n" + head + "\n".join(lines) + "\n"
    )

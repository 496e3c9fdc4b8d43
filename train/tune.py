"""The gradient-free baseline: a TPE search over the same knobs the learnable rerankers train.

For a learnable reranker, :func:`tune` searches its scalar knobs (no embedding map) with
optuna's TPE sampler ("Algorithms for Hyper-Parameter Optimization", Bergstra et al.),
maximizing mean NDCG@10 over the *training* queries (training and validation rows of the
split; never a report or test query). Each trial is one inference pass of the reranker
with those knob values, so "tuned" and "learned" start from the same paper defaults
(trial 0), search the same parameters and see the same queries. The trial sequence depends
on the knobs' names as well as on the seed: optuna's multivariate TPE (its default for one
objective) orders the search space by name before it draws, so renaming a knob can change
the trials and the tuned result.
"""

from __future__ import annotations

import optuna
import torch

from georag.config import config_value
from georag.rerank.registry import is_retriever, make_method
from train.losses import ndcg_at_k
from train.pools import Pool

__all__ = ["tune", "pool_ndcg", "failed_trials", "TRIAL_ERRORS"]

# A trial whose knobs the method rejects (e.g. a flow step that drives a length negative,
# a power iteration that does not converge) fails alone: optuna records it as FAIL and the
# search goes on.
TRIAL_ERRORS = (ValueError, RuntimeError, ArithmeticError)


def pool_ndcg(reranker, pool: Pool, *, batch_size: int = 256) -> float:
    """Mean NDCG@10 of ``reranker``'s inference output over every query of ``pool``."""
    values = []
    with torch.no_grad():
        for start in range(0, pool.batch.batch_size, batch_size):
            part = pool.batch.slice(start, start + batch_size)
            result = reranker(part)
            values.append(
                ndcg_at_k(
                    result.scores,
                    result.keep,
                    pool.gains[start : start + batch_size],
                    pool.ideal[start : start + batch_size],
                )
            )
    return float(torch.cat(values).mean())


def tune(
    method: str, pool: Pool, *, trials: int = 50, seed: int = 0, options: dict | None = None
) -> tuple[dict[str, float], optuna.Study]:
    """Search ``method``'s knobs on ``pool`` (training queries only).

    Parameters
    ----------
    method : str
        Registry name of a learnable reranker; its class's ``search_space`` is searched.
    pool : Pool or train.corpus_data.QuerySet
        The training queries' candidates (or, for a corpus-level retriever, the training
        queries and their corpus).
    trials : int
        TPE trials (the first is the config's defaults, the paper's, clipped into the
        search box: a fusion weight of 0 becomes the low end of its log range).
    seed : int
        Sampler seed.
    options : dict, optional
        Fixed config fields of the reranker (not searched).

    Returns
    -------
    best : dict
        The best knob values, as reranker options.
    study : optuna.Study
        Every trial, failed ones included (:func:`failed_trials` counts them: a trial
        raising one of ``TRIAL_ERRORS`` or returning NaN fails alone).
    """
    reranker = make_method(method)
    space = getattr(reranker, "search_space", None)
    if not space:
        raise ValueError(f"method: {method!r} is not a learnable reranker with a search space")
    if trials < 1:
        raise ValueError(f"trials must be positive, got {trials}")
    defaults = {
        name: min(max(float(config_value(reranker.config, name)), low), high)
        for name, (low, high, _) in space.items()
    }

    def objective(trial: optuna.Trial) -> float:
        knobs = {
            name: trial.suggest_float(name, low, high, log=log)
            for name, (low, high, log) in space.items()
        }
        reranker = make_method(method, {**(options or {}), **knobs})
        if is_retriever(reranker):  # a corpus-level retriever ranks the pool's corpus
            reranker.fit(pool.corpus)
        return pool_ndcg(reranker, pool)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    study.enqueue_trial(defaults)
    study.optimize(objective, n_trials=trials, catch=TRIAL_ERRORS)
    if failed_trials(study) == len(study.trials):
        raise ValueError(f"trials: all {trials} trials of {method!r} failed")
    return dict(study.best_params), study


def failed_trials(study: optuna.Study) -> int:
    """How many trials of ``study`` failed (raised or returned NaN)."""
    return sum(t.state == optuna.trial.TrialState.FAIL for t in study.trials)

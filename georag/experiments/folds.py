"""The splits of an experiment: training and report queries of every fold, nested validation.

Two protocols (the ones of docs/learned_results.md):

* ``scifact`` (a training split beside the test split): train on ``qrels/train.tsv``,
  report on ``qrels/test.tsv``, one fold labelled ``holdout``;
* every other data set (one judged split): seeded k-fold cross-validation over its queries
  (:func:`train.pools.kfold_split`), each fold ``fold<i>`` reported by models fitted on the
  other folds. Inside a fold's training queries a learned model holds out a seeded
  ``val_fraction`` for early stopping (:func:`train.learned_data.split_rows`); the report
  fold never reaches training, tuning or validation.

A fold is a :class:`Fold`: its training and report pools (the dense top-M of each query),
and, for corpus-level retrievers, the same queries asked against the whole corpus.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from train.corpus_data import QuerySet, load_query_set
from train.learned_data import split_rows
from train.pools import Pool, load_pool

__all__ = [
    "Fold",
    "SCIFACT",
    "cv_rows",
    "cv_folds",
    "learned_folds",
    "folds_from_args",
    "training_subset",
    "subset_training",
]

SCIFACT = ("train", "test")  # its training and report splits


class Fold(NamedTuple):
    """One training / report split of the queries of a data set.

    Attributes
    ----------
    train : Pool
        The training queries (validation part included), B_t queries of M candidates.
    report : Pool
        The report queries, B_r of them; disjoint from ``train``.
    train_queries, report_queries : QuerySet or None
        The same queries over the whole corpus (corpus-level retrievers), in the same order
        as the pools; ``None`` when the experiment ranks pools only.
    label : str
        ``holdout`` or ``fold<i>``.
    """

    train: Pool
    report: Pool
    train_queries: QuerySet | None
    report_queries: QuerySet | None
    label: str


def cv_rows(
    num_queries: int, *, folds: int, fold: int, val_fraction: float, seed: int
) -> tuple[list[int], list[int]]:
    """Training and report rows of fold ``fold`` of seeded k-fold cross-validation.

    Parameters
    ----------
    num_queries : int
        Queries of the data set (rows ``0 .. num_queries - 1``).
    folds, fold : int
        Number of folds and the one reported, ``0 <= fold < folds``.
    val_fraction : float
        Share of the training rows a learned model holds out for validation; it orders the
        training rows (below), it removes none.
    seed : int

    Returns
    -------
    fit, report : list of int
        ``fit``: the training rows, then the validation rows of
        :func:`~train.learned_data.split_rows` (each part sorted; a learned model splits
        them again, :func:`~georag.experiments.training.fit`); ``report``: the sorted rows
        of the fold. The report rows of the ``folds`` folds partition
        ``range(num_queries)``, and no fold's ``fit`` holds one of its ``report`` rows.
    """
    rows = split_rows(
        num_queries,
        protocol="kfold",
        val_fraction=val_fraction,
        seed=seed,
        folds=folds,
        fold=fold,
    )
    return rows["train"] + rows["val"], rows["report"]


def learned_folds(
    dataset: str,
    *,
    data_dir: str | None,
    encoder,
    corpus: bool,
    folds: int,
    val_fraction: float,
    seed: int,
) -> list[Fold]:
    """The folds of ``dataset`` under the protocol of the module docstring.

    Parameters
    ----------
    dataset : str
        A data set name of :func:`georag.data.datasets.load_dataset`.
    data_dir : str or None
        Where the data sets are (``None``: ``$GEORAG_DATA``).
    encoder : TextEncoder or None
        Encodes the queries (corpus embeddings come from the shared cache).
    corpus : bool
        Also load the queries over the whole corpus (:class:`Fold` ``*_queries``).
    folds : int
        Folds of the cross-validation (ignored for scifact).
    val_fraction : float
        See :func:`cv_rows`.
    seed : int

    Returns
    -------
    list of Fold
        One ``holdout`` fold for scifact, ``folds`` folds otherwise.

    Raises
    ------
    ValueError
        When the pool and the corpus queries of a data set differ in order.
    """
    if dataset == "scifact":
        train = load_pool("scifact", split="train", data_dir=data_dir, encoder=encoder)
        report = load_pool("scifact", split="test", data_dir=data_dir, encoder=encoder)
        sets = (None, None)
        if corpus:
            sets = tuple(
                load_query_set("scifact", split=x, data_dir=data_dir, encoder=encoder)
                for x in SCIFACT
            )
        return [Fold(train, report, *sets, "holdout")]
    pool = load_pool(dataset, split="test", data_dir=data_dir, encoder=encoder)
    queries = (
        load_query_set(dataset, split="test", data_dir=data_dir, encoder=encoder)
        if corpus
        else None
    )
    if queries is not None and queries.batch.ids != pool.batch.query_ids:
        raise ValueError(f"{dataset}: pool and corpus queries differ in order")
    return cv_folds(pool, queries, folds=folds, val_fraction=val_fraction, seed=seed)


def folds_from_args(
    dataset: str, args, encoder, *, corpus: bool, val_fraction: float | None = None
) -> list[Fold]:
    """:func:`learned_folds` with a script's options (``--data-dir``, ``--folds``,
    ``--val-fraction`` unless ``val_fraction`` is given, ``--seed``; those of
    :func:`~georag.experiments.training.add_training_options`)."""
    return learned_folds(
        dataset,
        data_dir=args.data_dir,
        encoder=encoder,
        corpus=corpus,
        folds=args.folds,
        val_fraction=args.val_fraction if val_fraction is None else val_fraction,
        seed=args.seed,
    )


def cv_folds(
    pool: Pool, queries: QuerySet | None, *, folds: int, val_fraction: float, seed: int
) -> list[Fold]:
    """The ``folds`` folds of seeded cross-validation over the queries of ``pool``
    (:func:`cv_rows`), labelled ``fold<i>``.

    Parameters
    ----------
    pool : Pool
        B queries.
    queries : QuerySet or None
        The same B queries, in the same order, over the corpus.
    folds : int
    val_fraction : float
    seed : int

    Returns
    -------
    list of Fold
    """
    out = []
    for fold in range(folds):
        fit_rows, report_rows = cv_rows(
            pool.batch.batch_size, folds=folds, fold=fold, val_fraction=val_fraction, seed=seed
        )
        out.append(
            Fold(
                pool.subset(fit_rows),
                pool.subset(report_rows),
                None if queries is None else queries.subset(fit_rows),
                None if queries is None else queries.subset(report_rows),
                f"fold{fold}",
            )
        )
    return out


def training_subset(num_queries: int, keep: int, seed: int) -> list[int]:
    """A seeded ``keep`` of ``num_queries`` training rows.

    Returns
    -------
    list of int
        Sorted rows; all of ``range(num_queries)`` when ``keep`` is 0 or not smaller.
    """
    if not keep or keep >= num_queries:
        return list(range(num_queries))
    rows = torch.randperm(num_queries, generator=torch.Generator().manual_seed(seed))[:keep]
    return sorted(rows.tolist())


def subset_training(
    folds: list[Fold], keep: int, seed: int
) -> tuple[list[Fold], dict[str, list[int]]]:
    """The folds with a seeded ``keep`` of the training queries of each
    (:func:`training_subset`; the report queries stay whole).

    Parameters
    ----------
    folds : list of Fold (or of 5-tuples in its field order)
    keep : int
        Training queries to keep per fold (0: all).
    seed : int

    Returns
    -------
    folds : list of Fold
    counts : dict
        ``{label: [queries kept, queries there were]}``.
    """
    out, counts = [], {}
    for train, report, train_q, report_q, label in folds:
        rows = training_subset(train.batch.batch_size, keep, seed)
        counts[label] = [len(rows), train.batch.batch_size]
        if len(rows) < train.batch.batch_size:
            train = train.subset(rows)
            train_q = None if train_q is None else train_q.subset(rows)
        out.append(Fold(train, report, train_q, report_q, label))
    return out, counts

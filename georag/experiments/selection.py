"""What one run of the learned-geometry experiment computes, and the names of its sections.

A run is a :class:`LearnedRun`: the learnable methods, the rows (roles) computed for each,
their fixed config fields, the training subset, the tuning and training settings and the
statistics' resampling. :func:`selection_of` names what tells its sections apart from those
of other runs over the same data set (the heading, the work file, the command options), so
that runs of other selections add to the same results file.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import georag.perf.bench as harness
from georag.experiments.training import FOLDS, RESAMPLES, Training

__all__ = ["ROLES", "GEOMETRIC", "LearnedRun", "selection_of"]

GEOMETRIC = ("learned_diffusion", "learned_maniscope", "learned_ricci")
ROLES = ("paper", "tuned", "learned", "learned+map", "map")  # the rows besides dense


@dataclass(frozen=True)
class LearnedRun:
    """One run of the learned-geometry experiment.

    Attributes
    ----------
    methods : tuple of str
        Learnable methods (registry names).
    roles : tuple of str
        The rows computed for each method besides dense, a subset of :data:`ROLES`.
    method_options : dict
        ``{method: {field: value}}``: fixed config fields of the tuned and learned rows.
    train_queries : int
        Train and tune on a seeded this many of each fold's training queries (0: all).
    trials : int
        TPE trials of the tuned rows.
    jobs : int
        Processes the roles of a data set run in.
    work : Path
        Where the training runs and the sections are kept.
    training : Training
    folds : int
        Cross-validation folds.
    resamples : int
        Bootstrap resamples and randomization-test sign flips.
    """

    methods: tuple[str, ...] = GEOMETRIC
    roles: tuple[str, ...] = ROLES
    method_options: dict = field(default_factory=dict)
    train_queries: int = 0
    trials: int = 50
    jobs: int = 1
    work: Path = Path("runs/quality_learned")
    training: Training = Training()
    folds: int = FOLDS
    resamples: int = RESAMPLES

    @property
    def seed(self) -> int:
        return self.training.seed

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LearnedRun:
        """The run of the options of ``scripts/quality/quality_learned.py`` (``method_options``
        already parsed into ``{method: {field: value}}``)."""
        return cls(
            methods=tuple(args.methods),
            roles=tuple(args.roles),
            method_options=args.method_options,
            train_queries=args.train_queries,
            trials=args.trials,
            jobs=args.jobs,
            work=Path(args.work),
            training=Training.from_args(args),
            folds=args.folds,
            resamples=args.resamples,
        )


def selection_of(run: LearnedRun) -> tuple[str, str, str]:
    """What tells this run's sections from others of the same data set: the fixed method
    options, the training subset and the roles when not all.

    Returns
    -------
    heading : str
        The heading suffix, ``": <methods> [<options>]"``.
    stem : str
        The work file's stem suffix (``<dataset>__<stem>.json``).
    command : str
        The command options that reproduce the run.
    """
    given = [f"{n}.{k}={v}" for n, o in sorted(run.method_options.items()) for k, v in o.items()]
    extra = given + ([f"{run.train_queries} training queries"] if run.train_queries else [])
    roles = [r for r in ROLES if r in run.roles]
    extra += [] if roles == list(ROLES) else [f"roles {' '.join(roles)}"]
    heading = f": {', '.join(run.methods)}" + (f" [{', '.join(extra)}]" if extra else "")
    stem = "+".join(run.methods) + "".join("__" + g.replace(" ", "-") for g in extra)
    t = run.training
    command = (
        f"--methods {' '.join(run.methods)} "
        + "".join(f"--method-option {g} " for g in given)
        + (f"--roles {' '.join(roles)} " if roles != list(ROLES) else "")
        + (f"--train-queries {run.train_queries} " if run.train_queries else "")
        + f"--trials {run.trials} --epochs {t.epochs} --patience {t.patience} "
        f"--lr {t.lr} --seed {t.seed} --jobs {run.jobs}"
    )
    return heading, stem, command


def parse_args(argv: list[str] | None = None, *, doc: str | None = None) -> argparse.Namespace:
    """The command line of ``scripts/quality/quality_learned.py`` (its docstring ``doc`` is
    the help text), with ``method_options`` (``{method: {key: value}}``) parsed; a bad
    option stops with a usage error (exit 2) naming it."""
    from georag.experiments.training import add_training_options
    from georag.rerank.registry import parse_option

    parser = harness.bench_parser(doc, repeats=None, out="--json", device=False)
    parser.set_defaults(threads=1)
    parser.add_argument("--datasets", nargs="+", default=["scifact", "cranfield", "cisi"])
    parser.add_argument(
        "--methods",
        nargs="+",
        default=list(GEOMETRIC),
        help="learnable geometric rerankers (registry names)",
    )
    parser.add_argument(
        "--method-option",
        action="append",
        default=[],
        metavar="NAME.KEY=VALUE",
        help="a fixed config field of a learnable method in the tuned and learned rows "
        "(repeatable; named in the section's heading)",
    )
    parser.add_argument(
        "--roles",
        nargs="+",
        choices=ROLES,
        default=list(ROLES),
        help="the rows to compute besides dense (map: the map alone; named in the heading "
        "unless all)",
    )
    parser.add_argument(
        "--train-queries",
        type=harness.non_negative_int,
        default=0,
        help="train and tune on a seeded subset of this many of each fold's training "
        "queries (0: all; named in the heading)",
    )
    parser.add_argument(
        "--jobs",
        type=harness.positive_int,
        default=1,
        help="run the roles of a data set in this many processes (1 torch thread each); "
        "the rows are the same as with 1",
    )
    parser.add_argument(
        "--note",
        default="",
        help="a paragraph under the section's heading (e.g. how the run was sized, and why)",
    )
    parser.add_argument("--trials", type=int, default=50)
    add_training_options(parser)
    parser.add_argument("--work", default="runs/quality_learned")
    parser.add_argument("--out", default="docs/learned_results.md")
    parser.add_argument(
        "--tex", help="also write the table of every section saved in --work as LaTeX here"
    )
    parser.add_argument(
        "--render", action="store_true", help="only rewrite --out from the sections saved in --work"
    )
    args = parser.parse_args(argv)
    args.method_options = {}
    for text in args.method_option:
        name, _, rest = text.partition(".")
        key, sep, value = rest.partition("=")
        if not (name and key and sep):
            parser.error(f"--method-option: expected NAME.KEY=VALUE, got {text!r}")
        try:
            parsed = parse_option(name, key, value)
        except ValueError as error:
            parser.error(f"--method-option: {error}")
        args.method_options.setdefault(name, {})[key] = parsed
    return args

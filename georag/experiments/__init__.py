"""Experiment protocols of the quality scripts: splits, rows, statistics and their tables.

Modules (each one concern; the scripts under ``scripts/`` are their command lines):

* :mod:`~georag.experiments.folds`: training / report folds, nested validation order,
  seeded training subsets;
* :mod:`~georag.experiments.training`: the training settings and :func:`fit` of a learnable
  method on a fold;
* :mod:`~georag.experiments.selection`: what one learned-geometry run computes, and the
  names of its sections;
* :mod:`~georag.experiments.roles`: the rows (paper, tuned, learned, learned+map, map
  alone) over every fold, side by side in processes;
* :mod:`~georag.experiments.significance`: means, bootstrap intervals, paired
  randomization tests with Holm's correction;
* :mod:`~georag.experiments.tables`: the sections' tables in Markdown and LaTeX;
* :mod:`~georag.experiments.sections`: a results file of sections, merged run by run, and
  the learned sections in docs/results.md;
* :mod:`~georag.experiments.iso_multihop`: the ISO-RAG multi-hop rows and their ablations.

The package sits above :mod:`georag.eval` and the ``train`` package (it imports both);
nothing below it imports it. Nothing is imported here: importing a module of the package
loads Lightning and optuna.
"""

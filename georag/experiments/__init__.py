"""Experiment protocols of the scripts: splits, rows, statistics, tables, benchmark cases.

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
* :mod:`~georag.experiments.iso_multihop`: the ISO-RAG multi-hop rows and their ablations;
* :mod:`~georag.experiments.phrase_multihop`: phrase-graph PPR against the learned map;
* :mod:`~georag.experiments.geometry_adds` (pools and features:
  :mod:`~georag.experiments.adds_features`): geometry against the strongest
  non-geometric second stages;
* :mod:`~georag.experiments.gar`: corpus-graph adaptive reranking against its scorer;
* :mod:`~georag.experiments.combined`, :mod:`~georag.experiments.combined_doc`: the saved
  runs of several scripts in one table, tested jointly, and its document;
* :mod:`~georag.experiments.results_doc`: docs/results.md;
* the benchmark cases that time layers above :mod:`georag.perf`:
  :mod:`~georag.experiments.scale` (corpus growth), :mod:`~georag.experiments.latency`
  (every method, in child processes), :mod:`~georag.experiments.ricci_bench`,
  :mod:`~georag.experiments.ricci_trees` (one kernel by several source trees),
  :mod:`~georag.experiments.graph_bench`, :mod:`~georag.experiments.entity_bench`,
  :mod:`~georag.experiments.index_bench` (the corpus index: build, parity with ``georag
  eval``, updates against a rebuild, kill -9 during an update).

The package sits above :mod:`georag.eval` and the ``train`` package (it imports both);
nothing below it imports it. Nothing is imported here: importing a module of the package
loads Lightning and optuna.
"""

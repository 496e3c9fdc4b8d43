"""Measuring speed: timers, the CPU thread policy and the benchmark harness.

Modules: ``timing`` (median and 90th percentile of timed calls, CUDA synchronised),
``threads`` (the thread policy of the ``georag`` command, the service and the scripts;
scoped thread counts), ``bench`` (the harness of scripts/: one parser, one header, the
figures as JSON), ``peers`` (GraphRicciCurvature run in ``.venv-peers``), ``scaling``
(the arithmetic and tables of the corpus-growth benchmark) and ``latency_tables`` (the
latency benchmark's tables). They import nothing of georag above the bottom modules
(``peers`` and ``scaling`` nothing but ``bench``), so every layer may time itself; the
benchmark cases that time the layers above live in :mod:`georag.experiments`.
"""

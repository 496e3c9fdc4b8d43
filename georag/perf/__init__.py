"""Measuring speed: timers, the CPU thread policy and the benchmark harness.

Modules: ``timing`` (median and 90th percentile of timed calls, CUDA synchronised),
``threads`` (the thread policy of the ``georag`` command, the service and the scripts;
scoped thread counts), ``bench`` (the harness of scripts/: one parser, one header, the
figures as JSON). They import nothing of georag above the bottom modules, so every layer
may time itself.
"""

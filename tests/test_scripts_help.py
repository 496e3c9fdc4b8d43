"""Every script under scripts/ and its folders answers ``--help`` (its imports and its parser
work), and every one but those listed in ``OFF_HARNESS`` is built on georag.perf.bench.

One fresh process runs each script as ``__main__`` with ``--help`` in turn (torch and
the other heavy imports load once), its own folder first on ``sys.path`` as ``python
scripts/<folder>/<name>.py`` puts it, and reports every script that did not exit 0 with a
usage line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"

_RUN_ALL = """
import contextlib, io, json, os, runpy, sys
base = list(sys.path)
failed = {}
for path in sys.argv[1:]:
    sys.path[:] = [os.path.dirname(path), *base]
    out = io.StringIO()
    sys.argv = [path, "--help"]
    code = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            runpy.run_path(path, run_name="__main__")
    except SystemExit as stop:
        code = stop.code
    except BaseException as err:
        code = repr(err)
    if code not in (0, None) or "usage:" not in out.getvalue():
        failed[path] = f"exit {code}: {out.getvalue()[-500:]}"
print(json.dumps(failed))
"""


def test_every_script_answers_help():
    scripts = sorted(str(p) for p in SCRIPTS.rglob("*.py"))
    assert len(scripts) >= 20
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _RUN_ALL, *scripts],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert failed == {}, failed


# Not on the harness: the GraphRicciCurvature runner runs in .venv-peers, which has no torch
# (its parents print the header).
OFF_HARNESS = {"ricci_reference.py"}


def test_every_script_uses_the_harness():
    scripts = list(SCRIPTS.rglob("*.py"))
    assert OFF_HARNESS <= {p.name for p in scripts}
    off = {p.name for p in scripts if "georag.perf.bench" not in p.read_text()}
    assert off == OFF_HARNESS


def test_every_script_has_its_line_in_the_scripts_readme():
    """scripts/README.md names every script by its path (what it measures, output, duration)."""
    listed = (SCRIPTS / "README.md").read_text(encoding="utf-8")
    missing = [
        p.relative_to(SCRIPTS.parent).as_posix()
        for p in SCRIPTS.rglob("*.py")
        if f"`{p.relative_to(SCRIPTS.parent).as_posix()}" not in listed
    ]
    assert not missing, missing

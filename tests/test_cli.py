import subprocess
import sys

import pytest

from georag.cli import main


@pytest.mark.parametrize("argv, message", [
    ([], "the following arguments are required: command"),
    (["eval", "--top-m", "0", "--dataset", "x"], "--top-m: must be positive"),
    (["eval", "--first-stage", "sparse"], "invalid choice: 'sparse'"),
    (["eval"], "--dataset is required"),
    (["eval", "--dataset", "/no/such/folder"], "folder '/no/such/folder' does not exist"),
    (["search", "--index", "/nonexistent", "cats"], "holds no georag index"),
])
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("georag: error:") and message in err
    assert err.count("\n") == 1


def test_console_script_help():
    out = subprocess.run([sys.executable, "-m", "georag.cli", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for command in ("demo", "eval", "index", "search"):
        assert command in out

"""The ``probes`` console command (analyses/__main__.py): one entry for every analysis, summary and the cache."""

from __future__ import annotations

import pytest

from analyses import ANALYSES
from analyses import __main__ as command


def test_every_analysis_summary_and_the_cache_is_a_command(capsys):
    command.main(["--help"])
    shown = capsys.readouterr().out
    for name in [*ANALYSES, "figures", "report", "claims", "recurrence_claims", "cache"]:
        assert f"  {name.replace('_', '-')} " in shown


def test_a_command_runs_that_modules_main_with_the_rest_of_the_line(capsys):
    with pytest.raises(SystemExit) as done:
        command.main(["mog-lens", "--help"])
    assert done.value.code == 0 and "--n-sentences" in capsys.readouterr().out


def test_an_unknown_command_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as done:
        command.main(["anisotropi"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith("error: unknown command 'anisotropi'") and err.count("\n") == 1

"""Help of both command lines in a narrow or piped terminal: every word of every option's help is
there, wrapped, never cut with `…` (rich's help panels did that: `streamlets.stats.config-param…`)."""

from __future__ import annotations

import re

import click
import pytest
from typer.main import get_command
from typer.testing import CliRunner

from blueprint.cli.app import app as blueprint_app
from blueprint.cli.kubectl import app as kubectl_app


def commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        path = (*prefix, name)
        yield path, cmd
        if isinstance(cmd, click.Group):
            yield from commands(cmd, path)


def words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize("typer_app", [blueprint_app, kubectl_app], ids=["blueprint", "kubectl-streamlets"])
@pytest.mark.parametrize("columns", [60, 100])
def test_help_is_never_cut_in_a_narrow_or_piped_terminal(typer_app, columns):
    root = get_command(typer_app)
    runner = CliRunner()
    checked = 0
    for path, cmd in commands(root):
        result = runner.invoke(typer_app, [*path, "--help"], env={"COLUMNS": str(columns)}, terminal_width=columns)
        assert result.exit_code == 0, result.output
        out = result.output
        assert "…" not in out, f"{' '.join(path)} --help cuts words at {columns} columns:\n{out}"
        assert all(len(line) <= columns for line in out.splitlines()), out
        squeezed = re.sub(r"\s+", "", out)  # Click wraps at spaces and folds a word longer than the column
        for param in cmd.params:
            for word in words(param.help or ""):  # each word of the help, whole
                assert word in squeezed, f"{' '.join(path)}: {word!r} missing:\n{out}"
        checked += 1
    assert checked >= 3

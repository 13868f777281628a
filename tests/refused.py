"""A command that must refuse, run in-process as a user would type it: one ``error:`` line, exit 2, no
traceback (the charter's bad-input rule); one home for the tests of each command's bad inputs."""

from __future__ import annotations

from typer.testing import CliRunner

from collbench.cli.app import app


def refused_line(args: list[str]) -> str:
    """The one ``error:`` line of ``collbench ARGS`` at 200 columns (no line cut), asserting that the
    command ended by its exit alone (no other exception), with status 2 and exactly one such line."""
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.output
    return errors[0]

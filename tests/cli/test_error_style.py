"""One error style everywhere (issue 34): a bad option value, an unknown option or command, or a missing
argument that Typer finds reads as collbench's own errors do, one `error: ...` line and exit code 2,
never Typer's box with a usage block."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app

WIDE = {"COLUMNS": "200", "NO_COLOR": "1"}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["sweep", "--ranks", "abc"], "Invalid value for '--ranks'"),
        (["sweep", "--bogus"], "No such option: --bogus"),
        (["sweep", "-f", "x"], "Invalid value for '-f'"),
        (["bogus"], "No such command 'bogus'."),
        (["--bogus"], "No such option: --bogus"),
        (["predict"], "Missing option '--ranks'"),
        (["export", "nccl-tuner"], "Missing argument 'PROFILE'"),
        (["import", "nccl-tests", "--ranks", "0", "x.log"], "--ranks 0: import nccl-tests needs at least 1 rank"),
        (["compare", "--json", "true", "a", "b"], "--json is a flag and takes no value ('true')"),
        (["tune", "--op", "bogus"], "unknown op 'bogus'"),
        # --json, which fit, predict, layout, discover and compare take: sweep said 'Possible options: --op'.
        (["sweep", "--json"], "`collbench sweep` has no option --json: its JSON output is --format json"),
    ],
)
def test_every_mistake_is_one_error_line_and_exit_2(args: list[str], says: str) -> None:
    result = CliRunner().invoke(app, args, env=WIDE)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.output
    assert "╭" not in result.output and "Usage:" not in result.output


def test_typer_mistakes_point_at_the_commands_help() -> None:
    result = CliRunner().invoke(app, ["sweep", "--ranks", "abc"], env=WIDE)
    assert result.output.strip().endswith("(`collbench sweep -h` lists the options)")
    result = CliRunner().invoke(app, ["bogus"], env=WIDE)
    assert result.output.strip().endswith("(`collbench -h` lists the commands)")


def test_a_group_alone_still_shows_its_help() -> None:
    result = CliRunner().invoke(app, ["export"], env=WIDE)
    assert "nccl-tuner" in result.output and "error:" not in result.output


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["sweep", "--op"], "collbench sweep"),
        (["tune", "-O"], "collbench tune"),
        (["export", "nccl-tuner", "-O"], "collbench export nccl-tuner"),
        (["import", "nccl-tests", "x.log", "--ranks"], "collbench import nccl-tests"),
        (["export", "bogus"], "collbench export"),
    ],
)
def test_an_option_missing_its_value_points_at_its_commands_help(args: list[str], where: str) -> None:
    # The parser's "Option '--op' requires an argument." carries no context: it pointed at `collbench -h`.
    result = CliRunner().invoke(app, args, env=WIDE)
    assert result.exit_code == 2, result.output
    assert result.output.strip().endswith(f"(`{where} -h` lists the {'commands' if 'bogus' in args else 'options'})")

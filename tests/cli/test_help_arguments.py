"""Every command's --help names its arguments as its usage line does (``RESULTS``, ``ALGO``, ``PROFILE``)
and shows no Python type beside them: Typer printed ``RESULTS... <list[Path]>``, ``algo <str>`` and
``BASE <path>``, and the usage line ``{RESULTS...}...``."""

from __future__ import annotations

import importlib
import itertools
import re

import pytest
from typer.main import get_group
from typer.testing import CliRunner

from collbench.cli.app import COMMANDS, GROUPS, app


def _paths() -> list[list[str]]:
    out = [[name] for name in COMMANDS]
    for name, (module, _) in GROUPS.items():
        group = get_group(importlib.import_module(f"collbench.cli.{module}").app)
        out += [[name, sub] for sub in group.list_commands(None)]  # type: ignore[arg-type]
    return out


def _arguments_panel(text: str) -> list[str]:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "Arguments" in line and line.startswith("╭")), None)
    if start is None:
        return []
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("╰"))
    return lines[start + 1 : end]


@pytest.mark.parametrize("path", _paths(), ids=" ".join)
def test_arguments_are_named_without_a_python_type(path: list[str]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    assert "...}" not in usage, usage
    for line in _arguments_panel(result.output):
        assert not re.search(r"<[\w\[\], ]+>", line), line
        named = re.match(r"│ \*\s+(\S+)", line)  # an argument's first line: required, then its name
        if named:
            assert named.group(1).isupper(), line


def test_fit_and_explain_name_their_arguments() -> None:
    fit = CliRunner().invoke(app, ["fit", "--help"], env={"COLUMNS": "80", "NO_COLOR": "1"}).output
    assert "Usage: collbench fit [OPTIONS] {RESULTS}..." in fit
    assert _arguments_panel(fit)[0].split()[1:3] == ["*", "RESULTS"]
    explain = CliRunner().invoke(app, ["explain"], env={"COLUMNS": "200"})
    assert explain.exit_code == 2 and "Missing argument 'ALGO'" in explain.output


def test_report_names_discovers_output_option_as_discover_has_it() -> None:
    # discover writes its file with -O (its -o is refused: sweep's reduction, as in nccl-tests).
    report = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"}).output
    assert "`collbench discover -O`" in report and "discover -o" not in report


def test_options_name_what_they_take() -> None:
    # tune --ranks takes counts (2,4,8), not any text ("<str>"); predict's files were named "P" and "F".
    wide = {"COLUMNS": "200", "NO_COLOR": "1"}
    tune = CliRunner().invoke(app, ["tune", "--help"], env=wide).output
    assert re.search(r"--ranks\s+N\[,N\.\.\.\]\s+Local ranks", tune)
    predict = CliRunner().invoke(app, ["predict", "--help"], env=wide).output
    assert re.search(r"--profile\s+PROFILE\.yaml\s", predict) and re.search(r"--fits\s+FITS\.json\s", predict)


@pytest.mark.parametrize("path", [[], *_paths()], ids=lambda p: " ".join(p) or "collbench")
def test_options_show_what_they_take_not_a_python_type(path: list[str]) -> None:
    # Typer printed `--nodes <int>`, `--sizes <str>`, `--timeout <float>`, `--ranks <int range>` where an
    # option named no metavar; every option's value is named as a usage line writes it (N, SIZE, SECONDS).
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    for line in result.output.splitlines():
        assert not re.search(r"--[\w-]+(?:\s+-\w)?\s+<[\w\[\], ]+>", line), line
    options = [line for line in result.output.splitlines() if re.match(r"│ [* ]*--", line)]
    assert options, result.output


def test_predict_names_each_value() -> None:
    wide = {"COLUMNS": "200", "NO_COLOR": "1"}
    predict = CliRunner().invoke(app, ["predict", "--help"], env=wide).output
    for option, metavar in (("--ranks", "N"), ("--nodes", "N"), ("--sizes", "SIZE[,SIZE...]"), ("--nccl-arch", "NAME")):
        assert re.search(rf"{re.escape(option)}\s+{re.escape(metavar)}\s", predict), option
    sweep = CliRunner().invoke(app, ["sweep", "--help"], env=wide).output
    assert re.search(r"--timeout\s+-T\s+SECONDS\s", sweep) and re.search(r"--check\s+-c\s+0\|1\s", sweep)


def _prose(text: str) -> list[list[str]]:
    """The help's paragraphs above its panels (the usage line left out), each as its lines."""
    paragraphs: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("╭"):
            break
        if "Usage:" in line:
            continue
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


@pytest.mark.parametrize("path", _paths(), ids=" ".join)
def test_help_prose_is_wrapped_to_the_width(path: list[str]) -> None:
    # A docstring's second paragraph keeps its source line breaks in Typer's help: import nccl-tests
    # printed "... reduce, alltoall," and "scatter, gather, ..." on two lines with room for more.
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    for paragraph in _prose(result.output):
        for line, after in itertools.pairwise(paragraph):
            # each line but the last is full: the next line's first word would not have fitted
            assert len(line) + 1 + len(after.split()[0]) > 80 - 2, paragraph

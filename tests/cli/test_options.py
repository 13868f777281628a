"""Every command's options: one meaning per letter (nccl-tests' where it has one), one spelling for the
output file, flags shown and used as flags, and a hint where people mistype."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main
from synthetic_rows import make_rows
from typer.core import TyperOption
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import write_rows
from collbench.runtime.executor.schedule_runner import default_segment_bytes
from collbench.runtime.sweep import run as sweep_run
from collbench.units import format_bytes

WIDE = {"COLUMNS": "200", "NO_COLOR": "1"}
NCCL_TESTS_LOG = Path(__file__).parents[1] / "fixtures" / "nccl_tests" / "all_reduce_perf_8gpu.log"

# nccl-tests' letters (src/common.cu, its longopts table) and the collbench option each becomes.
NCCL_TESTS_LETTERS = {
    "-b": "--min-bytes",
    "-e": "--max-bytes",
    "-f": "--step-factor",
    "-n": "--iters",
    "-w": "--warmup",
    "-c": "--check",
    "-d": "--dtype",
    "-o": "--redop",
    "-r": "--root",
    "-T": "--timeout",
}
# nccl-tests' letters collbench has no counterpart for: using one for something else would mislead.
NCCL_TESTS_UNMATCHED = ["-t", "-g", "-i", "-m", "-N", "-p", "-I", "-K", "-z", "-y", "-G", "-C", "-S", "-J", "-a"]
NCCL_TESTS_UNMATCHED += ["-R", "-x", "-D", "-V", "-M", "-u"]


def _commands() -> Iterator[tuple[str, typer.main.TyperCommand]]:
    def walk(command: object, path: list[str]) -> Iterator[tuple[str, typer.main.TyperCommand]]:
        # Through list_commands/get_command, as click resolves them: the root loads each command's
        # module when it is first asked for (collbench/cli/app.py).
        if hasattr(command, "list_commands"):
            ctx = typer.Context(command)  # type: ignore[arg-type]
            for name in command.list_commands(ctx):
                yield from walk(command.get_command(ctx, name), [*path, name])
        else:
            yield " ".join(path), command  # type: ignore[misc]

    yield from walk(typer.main.get_command(app), [])


def _options(command: typer.main.TyperCommand) -> Iterator[TyperOption]:
    return (p for p in command.params if isinstance(p, TyperOption))


def test_each_letter_means_one_thing_in_every_command() -> None:
    meanings: dict[str, set[str]] = defaultdict(set)
    where: dict[str, list[str]] = defaultdict(list)
    for name, command in _commands():
        for option in _options(command):
            longs = [o for o in option.opts if o.startswith("--")]
            for letter in (o for o in option.opts if not o.startswith("--")):
                meanings[letter].update(longs)
                where[letter].append(name)
    assert meanings, "no short letters found: the walk is broken"
    for letter, longs in meanings.items():
        assert len(longs) == 1, f"{letter} means {sorted(longs)} in {where[letter]}"
    for letter, long in NCCL_TESTS_LETTERS.items():
        if letter in meanings:
            assert meanings[letter] == {long}, f"{letter} is {meanings[letter]}, nccl-tests' {long}"
    assert not set(meanings) & set(NCCL_TESTS_UNMATCHED)


def test_the_output_file_has_one_spelling_everywhere() -> None:
    for name, command in _commands():
        for option in _options(command):
            if "--output" in option.opts or "-O" in option.opts:
                assert sorted(option.opts) == ["--output", "-O"], f"{name}: {option.opts}"
            assert "--out" not in option.opts and "--output-file" not in option.opts, name


def test_list_options_take_commas_and_repeats_alike() -> None:
    for name, command in _commands():
        for option in _options(command):
            if option.multiple:
                assert option.metavar and "[," in option.metavar, f"{name} {option.opts}: say commas work"


@pytest.mark.parametrize("path", [[], *(name.split() for name, _ in _commands())])
def test_help_shows_flags_without_a_bool_value(path: list[str]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["fit", "--json", "true", "r.jsonl"],
        ["compare", "a.jsonl", "b.jsonl", "--json=false"],
        ["fit", "--piecewise", "false", "r.jsonl"],
        ["tune", "--quick", "yes"],
    ],
)
def test_a_flag_given_a_value_says_it_takes_none(args: list[str]) -> None:
    result = CliRunner().invoke(app, args, env=WIDE)
    assert result.exit_code == 2, result.output
    assert "is a flag and takes no value" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["tune", "-o", "p.yaml"], "-O/--output"),
        (["report", "r.jsonl", "-o", "r.html"], "-O/--output"),
        (["export", "env", "p.yaml", "-o", "env.sh"], "-O/--output"),
        (["predict", "-n", "64", "--fits", "f.json"], "--ranks"),
        (["profile", "predict", "p.yaml", "-n", "8"], "--ranks"),
        (["explain", "ring", "-r", "8"], "--ranks"),
        (["layout", "-c", "2"], "--channels"),
    ],
)
def test_a_letter_from_another_command_says_what_to_write(args: list[str], hint: str) -> None:
    result = CliRunner().invoke(app, args, env=WIDE)
    assert result.exit_code == 2, result.output
    assert hint in result.output and "nccl-tests" in result.output


def test_sweep_dash_o_with_a_file_name_points_at_output() -> None:
    result = CliRunner().invoke(app, ["sweep", "-o", "results.csv"], env=WIDE)
    assert result.exit_code != 0
    assert "unknown reduction 'results.csv'" in result.output and "-O/--output" in result.output


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
def test_fit_and_predict_read_commas_as_repeats(tmp_path: Path) -> None:
    rows = make_rows("ring", 4, 10.0, 2e-4, noise=0.01, seed=0, in_place=(False,))
    rows += make_rows("ring", 4, 10.0, 2e-4, noise=0.01, seed=1, in_place=(False,), op="all-gather")
    rows += make_rows("ring", 4, 10.0, 2e-4, noise=0.01, seed=2, in_place=(False,), op="broadcast")
    results = tmp_path / "r.jsonl"
    write_rows(results, rows)
    runner = CliRunner()
    commas = runner.invoke(app, ["fit", str(results), "--json", "--op", "all-reduce,all-gather"])
    repeats = runner.invoke(app, ["fit", str(results), "--json", "--op", "all-reduce", "--op", "all-gather"])
    assert commas.exit_code == 0, commas.output
    assert json.loads(commas.stdout) == json.loads(repeats.stdout)
    assert {f["op"] for f in json.loads(commas.stdout)["fits"]} == {"all-reduce", "all-gather"}

    everything = runner.invoke(app, ["fit", str(results), "--json"])
    fits = tmp_path / "fits.json"
    fits.write_text(everything.stdout)
    base = ["predict", "--ranks", "64", "--fits", str(fits), "--json"]
    commas = runner.invoke(app, [*base, "--op", "all-reduce,broadcast"])
    repeats = runner.invoke(app, [*base, "--op", "all-reduce", "--op", "broadcast"])
    assert commas.exit_code == 0, commas.output
    assert json.loads(commas.stdout) == json.loads(repeats.stdout)


def test_tune_reads_commas_as_repeats() -> None:
    # Both forms reach the op check one name at a time (the error names the bad one alone).
    result = CliRunner().invoke(app, ["tune", "--op", "all-reduce,bogus", "--quick"], env=WIDE)
    assert result.exit_code != 0 and "unknown op 'bogus'" in result.output


def test_sweep_help_states_the_executors_segment_default() -> None:
    command = dict(_commands())["sweep"]
    (segment,) = (o for o in _options(command) if "--segment-bytes" in o.opts)
    assert f"default {format_bytes(default_segment_bytes('cpu'))}" in (segment.help or "")


def test_sweep_of_one_rank_says_it_moves_no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep_run, "run_sweep", lambda config, progress: [])
    args = ["sweep", "--ranks", "1", "--algo", "ring", "-b", "1K", "-e", "1K", "--stream", str(tmp_path / "s.jsonl")]
    result = CliRunner().invoke(app, args, env=WIDE)
    assert result.exit_code == 0, result.output
    assert "a one-rank world moves no data" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["explain", "ring", "--op", "all-reduce,all-gather"],
        ["import", "nccl-tests", str(NCCL_TESTS_LOG), "--op", "all-reduce,broadcast"],
    ],
)
def test_a_command_of_one_collective_says_so_for_a_list(args: list[str]) -> None:
    result = CliRunner().invoke(app, args, env=WIDE)
    assert result.exit_code == 2, result.output
    assert "--op takes one collective here, got 2" in result.output and "Traceback" not in result.output


def test_a_command_of_one_collective_reads_one_name_with_a_trailing_comma() -> None:
    result = CliRunner().invoke(app, ["explain", "ring", "--op", "all-gather,", "--json"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["op"] == "all-gather"


def test_help_names_every_launcher_run_backend_and_its_exports() -> None:
    # MPICH landed as a backend and an export target: a newcomer finds it from --help alone.
    runner = CliRunner()
    for path, words in (
        (["--help"], ["NCCL tuner, Open MPI, MPICH"]),
        (["export", "--help"], ["mpich-json", "mpich-env"]),
        (["sweep", "--help"], ["mpi / mpich"]),
        (["tune", "--help"], ["mpi or mpich"]),
    ):
        result = runner.invoke(app, path, env=WIDE)
        assert result.exit_code == 0, result.output
        flat = " ".join(result.output.replace("│", " ").split())
        for word in words:
            assert word in flat, (path, word, result.output)


@pytest.mark.parametrize(
    ("click_name", "shown"),
    [("integer", "int"), ("integer range", "int"), ("float range", "float"), ("path", "path"), ("text", "text")],
)
def test_an_options_value_is_named_under_a_typer_that_hands_types_to_click(click_name: str, shown: str) -> None:
    # Typer before 0.29 (0.27.3 on the lent H200's image, where every command failed to build its help
    # on `type_descriptor`) keeps an option's type as a click ParamType, whose `name` says what it is
    # (click/types.py: INT "integer", IntRange "integer range", FloatRange "float range", Path "path",
    # STRING "text", Choice "choice").
    from types import SimpleNamespace

    from collbench.cli.options import _value_kind

    assert _value_kind(SimpleNamespace(type=SimpleNamespace(name=click_name))) == shown
    assert _value_kind(SimpleNamespace(type=SimpleNamespace(name="choice"))) is None

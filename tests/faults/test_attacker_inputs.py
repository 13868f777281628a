"""Hostile and mistaken inputs an attacker found: each must end in one error line (or be handled), never a traceback."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from collbench.cli.app import app
from collbench.errors import ConfigError, InputFileError, UserError
from collbench.nccl.variants import parse_native_variant
from collbench.profile.document import Profile
from collbench.runtime.mpi.ompi_tools import MPIRUN_ARGS_ENV, extra_mpirun_args

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "tests" / "fixtures" / "real"


def test_fit_of_a_log_with_a_40_digit_size_answers_without_a_traceback(tmp_path: Path) -> None:
    # A real log with one size's digits replaced: sizes 37 orders of magnitude apart leave some split
    # designs without full rank.
    text = (REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log").read_text()
    line = next(x for x in text.splitlines() if x.split()[:2] == ["64", "16"])
    path = tmp_path / "hugesize.log"
    path.write_text(text.replace(line, line.replace(" 64 ", " " + "9" * 40 + " ", 1), 1))
    result = CliRunner().invoke(app, ["fit", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "rank deficient" not in result.output


@pytest.mark.parametrize("value", ['"x', "a\\", "--host 'a"])
def test_an_unsplittable_mpirun_args_variable_is_one_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(MPIRUN_ARGS_ENV, value)
    with pytest.raises(ConfigError, match=MPIRUN_ARGS_ENV) as err:
        extra_mpirun_args()
    assert "\n" not in str(err.value)


def test_mpirun_args_still_split_as_a_shell_would(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MPIRUN_ARGS_ENV, "--mca btl self,tcp -x 'A=b c'")
    assert extra_mpirun_args() == ["--mca", "btl", "self,tcp", "-x", "A=b c"]


@pytest.mark.parametrize(
    "name",
    [
        "native:ring/simple@" + "9" * 5000 + "ch",  # past int's 4,300-digit limit
        "native:ring/simple@" + "9" * 50 + "ch",
        "native:ring/simple@\u0661\u0666ch",  # Arabic-Indic 16, which \d and int both accept
        "native@\uff11\uff16ch",  # fullwidth 16
        "native@0ch",
        "native@ch",
    ],
)
def test_channel_counts_are_bounded_ascii_digits(name: str) -> None:
    with pytest.raises(UserError) as err:
        parse_native_variant(name)
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


def test_ascii_channel_counts_still_parse() -> None:
    assert parse_native_variant("native:ring/simple@16ch").channels == 16
    assert parse_native_variant("native@064ch").channels == 64


def _profile_data() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("ring", [[0, 0], [0], [0, 1, 2], [1, 2]])
def test_a_ring_that_is_not_an_order_of_the_ranks_is_refused_at_load(ring: list[int]) -> None:
    data = _profile_data()
    data["rule_sets"][0]["layout"]["rings"] = [ring]
    with pytest.raises(InputFileError, match=r"is not an order of the ranks 0\.\.1") as err:
        Profile.from_dict(data)
    assert "\n" not in str(err.value)


def test_a_measured_world_size_past_what_collbench_runs_is_refused_at_load() -> None:
    data = _profile_data()
    data["rule_sets"][0]["world_size"] = 10**9
    data["rule_sets"][0]["layout"]["rings"] = [[1, 0]]
    with pytest.raises(InputFileError, match="1000000000 ranks"):
        Profile.from_dict(data)


def test_the_real_profile_still_loads() -> None:
    assert Profile.from_dict(_profile_data()).world_size == 2


def test_an_mpi_profile_naming_an_nccl_variant_is_refused_at_load() -> None:
    data = _profile_data()
    data["backend"] = "mpi"
    data["rule_sets"][0]["layout"] = None
    rules = data["rule_sets"][0]["rules"]
    for rule in rules:
        rule["algo"], rule["params"] = "native", {"segment_bytes": None, "layout": "rank-order"}
    Profile.from_dict(data)  # native and Open MPI's own algorithms are what an mpi profile names
    rules[1]["algo"] = "native:ring"
    Profile.from_dict(data)
    rules[1]["algo"] = "native:ring/simple@16ch"
    with pytest.raises(InputFileError, match="an NCCL variant, in a backend mpi profile") as err:
        Profile.from_dict(data)
    assert "\n" not in str(err.value)


def _fit_json(tmp_path: Path, **changes: Any) -> Path:
    """``fit --json`` of a real nccl-tests log, with one fit's fields changed as a hand edit would."""
    log = REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log"
    result = CliRunner().invoke(app, ["fit", str(log), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    segment = changes.pop("segment", None)
    data["fits"][0].update(changes)
    if segment is not None:
        data["fits"][0]["segments"][0].update(segment)
    path = tmp_path / "fits.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "change",
    [
        {"beta_gbps": -1},
        {"beta_gbps": 0},
        {"beta_gbps": math.inf},
        {"gamma_gbps": -1.0},
        {"gamma_gbps": math.nan},
        {"world_size": 10**30},
        {"world_size": 0},
        {"segment": {"beta_gbps": -2.0}},
    ],
)
def test_predict_refuses_a_fit_with_an_impossible_bandwidth_or_world_size(
    tmp_path: Path, change: dict[str, Any]
) -> None:
    path = _fit_json(tmp_path, **change)
    result = CliRunner().invoke(app, ["predict", "--ranks", "64", "--fits", str(path)])
    assert result.exit_code != 0
    assert isinstance(result.exception, SystemExit), result.exception
    # A 31-digit world size is refused by the JSON reader, before int() (naming the line), the rest by the fit.
    assert "must be" in result.output or "fits.json:1: an integer of 31 digits" in result.output


def test_predict_still_reads_an_untouched_fit(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["predict", "--ranks", "64", "--fits", str(_fit_json(tmp_path))])
    assert result.exit_code == 0, result.output


def _rankfile(tmp_path: Path, *options: str) -> Result:
    data = _profile_data()
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return CliRunner().invoke(app, ["export", "ompi-rankfile", str(path), "-O", str(tmp_path / "rf"), *options])


@pytest.mark.parametrize(
    "options",
    [
        ("--hosts", "a b"),
        ("--hosts", "a#b"),
        ("--hosts", "a=b"),
        ("--hosts", "-a"),
        ("--slots", "garbage;rm"),
        ("--slots", "0 #x"),
        ("--slots", "99999-0"),
        ("--slots", "1:2:3"),
        ("--slots", "\u0661"),
    ],
)
def test_rankfile_hosts_and_slots_are_checked_before_they_are_written(tmp_path: Path, options: tuple[str, str]) -> None:
    result = _rankfile(tmp_path, *options)
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output
    assert options[0] in result.output
    assert not (tmp_path / "rf").exists()


@pytest.mark.parametrize(
    "options",
    [("--hosts", "node-1.example.com"), ("--hosts", "10.0.0.1"), ("--slots", "1:0-2"), ("--slots", "0,2-3")],
)
def test_rankfile_takes_real_host_names_and_slot_lists(tmp_path: Path, options: tuple[str, str]) -> None:
    result = _rankfile(tmp_path, *options)
    assert result.exit_code == 0, result.output
    assert options[1] in (tmp_path / "rf").read_text()


@pytest.mark.parametrize(
    "name",
    [
        "all_reduce_perf-p4de-2node-srun-label-readme-excerpt.log",
        "all_reduce_perf-p5-2node-srun-label-readme-excerpt.log",
    ],
)
def test_fit_reads_an_nccl_tests_excerpt_that_import_reads(name: str) -> None:
    # These excerpts keep only the table (its column header, no "out-of-place" banner): import reads them.
    result = CliRunner().invoke(app, ["fit", str(REAL / name)])
    assert result.exit_code == 0, result.output
    assert "fitted cost models" in result.output


def test_sweep_mpi_with_an_unknown_algo_says_it_is_not_open_mpis_and_lists_them() -> None:
    result = CliRunner().invoke(app, ["sweep", "--backend", "mpi", "--ranks", "2", "--algo", "bogus"])
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output
    assert "unknown Open MPI algorithm" in result.output and "native:ring" in result.output
    assert "collbench's own" not in result.output


def test_sweep_gloo_with_a_channel_count_says_channel_counts_are_ncclS() -> None:
    result = CliRunner().invoke(app, ["sweep", "--backend", "gloo", "--ranks", "2", "--algo", "native@16ch"])
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output
    assert "channel count" in result.output and "--backend nccl" in result.output
    assert "unknown algorithm" not in result.output


@pytest.mark.parametrize(
    ("algo", "said"), [("native@0ch", "1 to 64"), ("native@ch", "@<N>ch"), ("native@-1ch", "@<N>ch")]
)
def test_sweep_nccl_checks_the_algo_before_the_gpu(algo: str, said: str) -> None:
    # Whether or not a GPU is visible, a misspelt variant is the error reported.
    result = CliRunner().invoke(app, ["sweep", "--backend", "nccl", "--ranks", "2", "--algo", algo])
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output
    assert said in result.output and "needs CUDA GPUs" not in result.output


@pytest.mark.parametrize(("algo", "said"), [("native:*@8ch", "8 channels"), ("native:*/ll128", "protocol LL128")])
def test_a_variant_without_an_algorithm_is_described_as_what_it_forces(algo: str, said: str) -> None:
    from collbench.exporters.nccl_rules import nccl_choice
    from collbench.profile.rules import Rule

    shape = Profile.from_dict(_profile_data()).default_set
    choice = nccl_choice(Rule("all-reduce", 0, None, algo), shape)
    assert choice.algo is None
    assert said in choice.why and "no algorithm" in choice.why
    assert ("protocol" in choice.why) == ("/" in algo)


@pytest.mark.parametrize("value", ["-np 5", "--host a,b -n 4", "--np=3", "--mca btl self,tcp -c 2"])
def test_mpirun_args_that_set_the_rank_count_are_refused_before_mpirun_runs(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # mpirun takes the last -np it is given: 'COLLBENCH_MPIRUN_ARGS="-np 5" sweep --backend mpi --ranks 2'
    # started 5 ranks (or failed on slots) and ended in exit code 3 and mpirun's advice.
    monkeypatch.setenv(MPIRUN_ARGS_ENV, value)
    with pytest.raises(ConfigError, match=f"{MPIRUN_ARGS_ENV}=.* sets the number of ranks .*--ranks N"):
        extra_mpirun_args()


# What Open MPI 4.1.4's mpirun (Debian bookworm) prints for 'mpirun -np 5 true' on a 2-core host, byte for byte.
OMPI_SLOTS = """\
--------------------------------------------------------------------------
There are not enough slots available in the system to satisfy the 5
slots that were requested by the application:

  true

Either request fewer slots for your application, or make more slots
available for use.

A "slot" is the Open MPI term for an allocatable unit where we can
launch a process.  The number of slots available are defined by the
environment in which Open MPI processes are run:

  1. Hostfile, via "slots=N" clauses (N defaults to number of
     processor cores if not provided)
  2. The --host command line parameter, via a ":N" suffix on the
     hostname (N defaults to 1 if not provided)
  3. Resource manager (e.g., SLURM, PBS/Torque, LSF, etc.)
  4. If none of a hostfile, the --host command line parameter, or an
     RM is present, Open MPI defaults to the number of processor cores

In all the above cases, if you want Open MPI to default to the number
of hardware threads instead of the number of processor cores, use the
--use-hwthread-cpus option.

Alternatively, you can use the --oversubscribe option to ignore the
number of available slots when deciding the number of processes to
launch.
--------------------------------------------------------------------------
"""


def test_a_launchers_long_message_keeps_its_first_sentence_and_its_end() -> None:
    from collbench.runtime.mpi.harness import launcher_excerpt

    # The last 600 characters alone began 'ts to 1 if not provided) 3. Resource manager', the cause cut off.
    said = launcher_excerpt(OMPI_SLOTS, 600)
    assert said.startswith(
        "There are not enough slots available in the system to satisfy the 5 slots that were requested "
        "by the application: ... "
    )
    assert said.endswith("deciding the number of processes to launch. " + "-" * 74)
    assert len(said) <= 605 and "\n" not in said
    tail = said.partition(" ... ")[2]
    assert " " + tail in " " + " ".join(OMPI_SLOTS.split())  # the end from a word's start
    assert launcher_excerpt('  mpirun: Error: unknown option\n "--bogus"\n', 600) == (
        'mpirun: Error: unknown option "--bogus"'
    )


def _edited_json(tmp_path: Path, edit: str) -> Path:
    data = json.loads((REPO / "tests" / "fixtures" / "nccl_tests" / "reduce_scatter_perf_4gpu.json").read_text())
    first = data["results"][0]
    if edit == "size -4096":
        first["size"] = -4096
    elif edit == "size 1e30":
        first["size"] = 1e30
    elif edit == "redop xor":
        first["redop"] = "xor"
    elif edit == "ngpus 0":
        data["config"]["ngpus"] = 0
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        ("size -4096", "row of -4096 bytes (out of place) is not a result: field size_bytes: -4096 is out of range"),
        ("size 1e30", "is not a result: field size_bytes: 1000000000000000019884624838656 is out of range"),
        ("redop xor", "row of 4096 bytes (out of place) is not a result: field redop: unknown reduction 'xor'"),
        ("ngpus 0", "row of 4096 bytes (out of place) is not a result: field world_size: 0 is out of range"),
    ],
)
def test_a_json_result_no_results_file_could_hold_is_refused_by_import_and_fit_alike(
    tmp_path: Path, edit: str, says: str
) -> None:
    # import stopped at writing it ('out.jsonl: row 1 was not written', blaming its own output) while fit
    # fitted a size of -4096 or 1e30 bytes, a reduction 'xor', a run of 0 ranks as measured.
    path = _edited_json(tmp_path, edit)
    for args in (["import", "nccl-tests", str(path), "-O", str(tmp_path / "out.jsonl")], ["fit", str(path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "Traceback" not in result.output
        lines = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and says in " ".join(result.output.split()), result.output
        assert str(path) in lines[0] and "was not written" not in result.output
    assert not (tmp_path / "out.jsonl").exists()


def test_an_mpi_wrapper_that_fails_without_a_word_still_says_how_it_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 'mpicc failed to build mpi_harness.c: ' ended the line, the cause left blank.
    from collbench.runtime.mpi.harness import build_with

    wrapper = tmp_path / "mpicc"
    wrapper.write_text("#!/bin/sh\nexit 3\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("COLLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    said = r"failed to build mpi_harness\.c: it ended with exit code 3 and printed nothing"
    with pytest.raises(UserError, match=said):
        build_with(str(wrapper), "silent wrapper", "ompi", "Open MPI", lambda _: None)

"""The file system as users have it: a missing folder, a name too long, a folder that takes no file.

The attacker's runs: ``-O /nonexistent/dir/x.csv`` made the missing folders silently (as root, at the
filesystem's root); a 300-character file name was an OSError traceback; a plugin build into a folder
that takes no file blamed the compiler ("ld returned 1 exit status").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from tests.faults._run import SWEEP, cli, error_line

REPO = Path(__file__).resolve().parents[2]
PROFILE = str(REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml")
LOG = str(REPO / "tests" / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log")


def _commands(out: Path) -> dict[str, list[str]]:
    """Each command with ``out`` as its output, in the suffix that command writes."""
    return {
        "export": ["export", "ompi-rules", PROFILE, "--from-other-backend", "-O", str(out.with_suffix(".txt"))],
        "import": ["import", "nccl-tests", LOG, "-O", str(out.with_suffix(".jsonl"))],
        "profile merge": ["profile", "merge", PROFILE, "-O", str(out.with_suffix(".yaml"))],
    }


@pytest.mark.parametrize("command", ["export", "import", "profile merge"])
def test_an_output_under_a_missing_folder_is_refused_naming_it_and_nothing_is_made(
    tmp_path: Path, command: str
) -> None:
    out = tmp_path / "typo" / "deeper" / "out.yaml"
    result = CliRunner().invoke(app, _commands(out)[command])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1, result.output
    assert f"the folder {tmp_path / 'typo'} does not exist" in result.output
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("command", ["export", "import", "profile merge"])
def test_a_name_longer_than_the_file_system_takes_is_one_line(tmp_path: Path, command: str) -> None:
    out = tmp_path / ("a" * 300 + ".yaml")
    result = CliRunner().invoke(app, _commands(out)[command])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "a name in this path is 30" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.slow  # 26 s on 2 busy cores: CI runs it in its second step
def test_a_sweep_streaming_to_a_name_too_long_stops_before_any_rank(tmp_path: Path) -> None:
    result = cli([*SWEEP, "--stream", str(tmp_path / ("s" * 300 + ".jsonl")), "-b", "1K", "-e", "1K"], tmp_path)
    assert result.returncode == 2
    assert "a name in this path is 306 bytes long" in error_line(result.stderr)


def test_a_plugin_build_into_a_folder_that_takes_no_file_names_the_folder(tmp_path: Path) -> None:
    # /proc/sys exists and is a directory, but refuses new files (as a read-only mount would).
    result = CliRunner().invoke(app, ["export", "nccl-plugin", PROFILE, "-O", "/proc/sys", "--from-other-backend"])
    assert result.exit_code == 2
    assert "/proc/sys refuses new files" in result.output and "failed to build" not in result.output


def test_a_plugin_directory_under_a_missing_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "typo" / "plugin"
    result = CliRunner().invoke(app, ["export", "nccl-plugin", PROFILE, "-O", str(out), "--from-other-backend"])
    assert result.exit_code == 2
    assert f"the folder {tmp_path / 'typo'} does not exist" in result.output
    assert not (tmp_path / "typo").exists()

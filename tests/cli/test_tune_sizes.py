"""``tune -b/-e``: nccl-tests' letters choose the sizes a tune measures, at either depth."""

from __future__ import annotations

from pathlib import Path

import pytest
from small_tune import quick_made_small
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile
from collbench.results.io import read_rows
from collbench.tuning import config as tune_config


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.dist
def test_tune_measures_the_sizes_b_and_e_choose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quick_made_small(monkeypatch, min_bytes=512, max_bytes=2 << 20)
    out = tmp_path / "p.yaml"
    result = CliRunner().invoke(app, ["tune", "--ranks", "2", "--quick", "-b", "4K", "-e", "64K", "-O", str(out)])
    assert result.exit_code == 0, result.output
    assert {r.size_bytes for r in read_rows(tmp_path / "p-results.jsonl")} == {4096, 16384, 65536}
    # The command recorded in the profile reproduces the tune, sizes included.
    assert Profile.load(out).command == f"collbench tune --ranks 2 --quick -b 4096 -e 65536 --output {out}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-b", "8K", "-e", "4K"], "-b/--min-bytes 8192 is above -e/--max-bytes 4096"),
        (["-b", "6"], "-b/--min-bytes 6: tune measures float32 elements, so sizes are multiples of 4 bytes"),
        (["-e", "0"], "-e/--max-bytes 0"),
        (["-e", "2X"], "-e/--max-bytes '2X' is not a size"),
        (["-b", "32M"], "-b/--min-bytes 33554432 is above -e/--max-bytes 2097152"),  # quick's largest
        (["-b", "1M", "-e", "1M"], "give one size; tune fits its models over sizes: give at least two (sizes grow x2)"),
    ],
)
def test_sizes_that_cannot_work_are_one_line_exit_2(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["tune", "--ranks", "2", "--quick", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "collbench-profile.yaml").exists()


def test_the_depth_keeps_its_own_sizes_where_b_and_e_are_not_given() -> None:
    assert tune_config.TuneConfig(quick=True).depth == tune_config.QUICK
    depth = tune_config.TuneConfig(max_bytes=1 << 20).depth
    assert (depth.min_bytes, depth.max_bytes, depth.rounds) == (256, 1 << 20, tune_config.THOROUGH.rounds)

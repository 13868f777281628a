"""A rank count from 2^20 up is refused where it is given, as every reader of files refuses it.

`collbench profile predict P --ranks 999999999 -O out.yaml` wrote a profile that every command then
refused ('not a profile collbench uses: $.rule_sets[1].world_size: 999999999 ranks, not below 2^20');
`predict --ranks 100000000000000000000` printed a table of times for that many ranks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from refused import refused_line
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.units import MAX_RANKS

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"


def _refused(args: list[str]) -> str:
    line = refused_line(args)
    assert "2^20" in line, line
    return line


@pytest.mark.parametrize("ranks", [str(MAX_RANKS), "999999999", "8:1," + str(MAX_RANKS) + ":1024"])
def test_profile_predict_refuses_before_writing(tmp_path: Path, ranks: str) -> None:
    out = tmp_path / "out.yaml"
    _refused(["profile", "predict", str(PROFILE), "--ranks", ranks, "-O", str(out)])
    assert not out.exists()


def test_profile_predict_just_below_the_bound_writes_a_profile_that_reads_back(tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"
    args = ["profile", "predict", str(PROFILE), "--ranks", f"{MAX_RANKS - 2}:{(MAX_RANKS - 2) // 2}", "-O", str(out)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(app, ["predict", "--profile", str(out), "--ranks", "8"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output


@pytest.mark.parametrize("ranks", [str(MAX_RANKS), "100000000000000000000"])
def test_predict_refuses_more_ranks_than_collbench_takes(ranks: str) -> None:
    line = _refused(["predict", "--profile", str(PROFILE), "--ranks", ranks])
    assert f"--ranks {ranks}" in line


def test_tune_refuses_such_a_predicted_shape_before_measuring(tmp_path: Path) -> None:
    _refused(["tune", "--ranks", "2", "--predict-ranks", str(MAX_RANKS), "-O", str(tmp_path / "p.yaml")])
    assert list(tmp_path.iterdir()) == []

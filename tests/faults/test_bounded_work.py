"""Every command's work is bounded by what it was asked for, and an absurd ask is refused in one line
naming the cap (the attacker's ``explain tree -s 100000`` took 141 s and 1 GB; ``-s 10000000`` was a
MemoryError traceback; ``predict --sizes`` of 10,000 sizes took minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"


@pytest.mark.parametrize(
    "args",
    [
        ["explain", "tree", "-s", "100000"],
        ["explain", "two-tree", "-s", "2000000", "--ranks", "2"],
        ["explain", "two-tree", "-s", "10000000", "--ranks", "2"],
        ["explain", "tree", "-s", "65"],
    ],
)
def test_explain_refuses_more_segments_than_a_schedule_is_cut_in(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "--segments must be 1 to 64" in result.output, result.output


def test_explain_still_shows_64_segments() -> None:
    result = CliRunner().invoke(app, ["explain", "tree", "-s", "64", "--ranks", "3"])
    assert result.exit_code == 0, result.output


def test_predict_refuses_more_sizes_than_it_prices() -> None:
    sizes = ",".join(str(256 * (i + 1)) for i in range(257))
    result = CliRunner().invoke(app, ["predict", "--ranks", "64", "--profile", str(PROFILE), "--sizes", sizes])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "--sizes lists 257 sizes; predict takes at most 256" in result.output

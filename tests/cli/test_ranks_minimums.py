"""`--ranks` minimums, alike across commands (issue 34): sweep allows one rank (it times the call's own
overhead, and a one-GPU machine's default is one rank); tune and predict need two (a collective of one
rank moves no data: nothing to choose between, nothing to predict). One wording for all, and predict
says it before anything it would assume from the rank count."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app

PROFILE = Path(__file__).parents[1] / "fixtures" / "profiles" / "cpu-2core-gloo-4ranks.yaml"
LOG = Path(__file__).parents[1] / "fixtures" / "nccl_tests" / "all_reduce_perf_2node_legacy.log"
WIDE = {"COLUMNS": "200", "NO_COLOR": "1"}
TWO = "needs at least 2 ranks (a collective of one rank moves no data)"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["sweep", "--ranks", "0"], "error: --ranks 0: sweep needs at least 1 rank"),
        (["tune", "--ranks", "1"], f"error: --ranks 1: tune {TWO}"),
        (["tune", "--ranks", "4,1"], f"error: --ranks 1: tune {TWO}"),
        (["tune", "--predict-ranks", "1"], f"error: --predict-ranks 1: a predicted shape {TWO}"),
        (["predict", "--profile", str(PROFILE), "--ranks", "0"], f"error: --ranks 0: predict {TWO}"),
        (["predict", "--profile", str(PROFILE), "--ranks", "1"], f"error: --ranks 1: predict {TWO}"),
        (["profile", "predict", str(PROFILE), "--ranks", "1"], f"error: --ranks 1: a predicted shape {TWO}"),
        (["discover", "--ranks", "0"], "error: --ranks 0: discover needs at least 1 rank"),
        (["layout", "--ranks", "0"], "error: --ranks 0: layout needs at least 1 rank"),
        # Typer's own words ("Input should be greater than or equal to 1"), "--ranks must be at least 1,
        # got 0" and "--ranks must be >= 1" before; a negative count in another wording than 0's.
        (
            ["import", "nccl-tests", str(LOG), "--ranks", "0"],
            "error: --ranks 0: import nccl-tests needs at least 1 rank",
        ),
        (
            ["import", "nccl-tests", str(LOG), "--ranks", "-2"],
            "error: --ranks -2: import nccl-tests needs at least 1 rank",
        ),
        (["fit", str(LOG), "--ranks", "0"], "error: --ranks 0: fit needs at least 1 rank"),
        (["explain", "ring", "--ranks", "-1"], "error: --ranks -1: explain needs at least 1 rank"),
        (["tune", "--ranks", "-2"], f"error: --ranks -2: tune {TWO}"),
        (["tune", "--predict-ranks", "4,-8"], f"error: --predict-ranks -8: a predicted shape {TWO}"),
        (["profile", "predict", str(PROFILE), "--ranks", "-2"], f"error: --ranks -2: a predicted shape {TWO}"),
        (["export", "ompi-rankfile", str(PROFILE), "--ranks", "0"], f"error: --ranks 0: export ompi-rankfile {TWO}"),
        (["sweep", "-n", "-2"], "error: --iters must be from 1 to 10000000 (or auto), got -2"),
    ],
)
def test_too_few_ranks_is_one_line_in_one_wording(args: list[str], line: str) -> None:
    result = CliRunner().invoke(app, args, env=WIDE)
    assert result.exit_code == 2, result.output
    # The error is all there is: predict printed an `assumed:` line for the nodes first.
    assert result.output.strip().splitlines() == [line]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["fit", str(LOG), "--nodes", "0"], "error: --nodes 0: fit needs at least 1 node"),
        (
            ["import", "nccl-tests", str(LOG), "--nodes", "-1"],
            "error: --nodes -1: import nccl-tests needs at least 1 node",
        ),
        (["explain", "ring", "--nodes", "0"], "error: --nodes 0: explain needs at least 1 node"),
        (
            ["predict", "--profile", str(PROFILE), "--ranks", "8", "--nodes", "0"],
            "error: --nodes 0: predict needs at least 1 node",
        ),
        (
            ["predict", "--profile", str(PROFILE), "--ranks", "8", "--measured-nodes", "-3"],
            "error: --measured-nodes -3: predict needs at least 1 node",
        ),
        # More nodes than ranks: a note said 'priced as 8 ranks on 32 nodes' before this error refused it.
        (
            ["predict", "--profile", str(PROFILE), "--ranks", "8", "--nodes", "32"],
            "error: 8 ranks cannot fill 32 nodes (at least one rank a node)",
        ),
    ],
)
def test_too_few_nodes_is_one_line_in_the_same_wording(args: list[str], line: str) -> None:
    # They said "--nodes must be at least 1, got 0", "8 ranks cannot fill 0 nodes (at least one rank a
    # node)" and, for explain, "--nodes 0 does not split --ranks 4 into equal nodes ... give a divisor".
    result = CliRunner().invoke(app, args, env=WIDE)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [line]


def test_sweep_of_one_rank_is_allowed_and_says_what_it_measures(monkeypatch: pytest.MonkeyPatch) -> None:
    from collbench.runtime.sweep import run as sweep_run

    monkeypatch.setattr(sweep_run, "run_sweep", lambda config, progress: [])
    result = CliRunner().invoke(app, ["sweep", "--ranks", "1", "-b", "1K", "-e", "1K"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "a one-rank world moves no data" in result.output

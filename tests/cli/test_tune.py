"""`collbench tune` end to end on a tiny sweep (2 gloo ranks, 2 sizes), and its option errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from small_tune import quick_made_small
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile
from collbench.profile.rules import check_coverage
from collbench.results.io import read_rows
from collbench.results.noise import decision_time_us

TWO_RANKS = Path(__file__).resolve().parents[2] / "docs" / "cpu-2core-gloo-2ranks-topology.yaml"


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.dist
def test_tune_quick_writes_profile_results_and_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real pipeline, made small: every algorithm at 1 KiB and 4 KiB, short timing, two rounds.
    quick_made_small(monkeypatch)
    out = tmp_path / "p.yaml"
    result = CliRunner().invoke(app, ["tune", "--ranks", "2", "--quick", "-O", str(out)])
    assert result.exit_code == 0, result.output
    profile = Profile.load(out)
    assert (profile.backend, profile.world_size, profile.nodes) == ("gloo", 2, 1)
    assert profile.command == f"collbench tune --ranks 2 --quick --output {out}"
    check_coverage(profile.rules)
    assert {r.op for r in profile.rules} == {"all-reduce"}
    rows = read_rows(tmp_path / "p-results.jsonl")
    algos = {r.algo for r in rows}
    assert {"native", "ring", "recursive-doubling"} <= algos
    assert {r.size_bytes for r in rows} == {1024, 4096}
    assert all(r.wrong == 0 for r in rows)
    assert all(r.in_place for r in rows)  # jobs all-reduce in place; tune measures that
    # Each rule's algorithm was measured, and its measured time is the row's.
    for rule in profile.rules:
        assert rule.algo in algos
        if rule.measured_us is not None:
            match = [decision_time_us(r) for r in rows if r.algo == rule.algo and r.size_bytes == rule.at_bytes]
            assert len(match) == 2  # two rounds
            assert rule.measured_us == pytest.approx(min(match), rel=1e-3)
    assert {f.algo for f in profile.fits} <= algos
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The report beside the profile, made from the same rows and profile.
    page = (tmp_path / "p.html").read_text()
    assert 'id="profile"' in page and profile.command in page and "all-reduce, gloo, 2 ranks" in page
    assert "profile:" in result.stdout and "algorithm" in result.stdout
    assert yaml.safe_load(out.read_text())["schema_version"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ranks", "1"], "at least 2"),
        (["-O", "profile.txt"], "use a .yaml name"),
        (["--plot", "p.svg"], "use a .png name"),
        (["--results", "r.txt"], ".jsonl"),
        (["--topology", "does-not-exist.yaml"], "does-not-exist.yaml"),
        (["--timeout", "1e30"], "--timeout must be a positive number of seconds, at most 604,800 (a week)"),
        (["--timeout", "0.5"], "--timeout 0.5: give at least 1 s; a rank takes about that to start"),
        (["--op", ""], "no op to tune; give --op (all-reduce, ... or all), or leave it out for all-reduce"),
        (["--op", ","], "no op to tune"),
        # Measured 3 ranks in rank order into a profile of the 2-rank machine's fingerprint, as sweep refuses.
        (
            ["--ranks", "2,3", "--topology", str(TWO_RANKS)],
            f"--topology {TWO_RANKS} describes 2 ranks, fewer than the 3 this tune runs",
        ),
    ],
)
def test_bad_options_are_one_line_exit_2(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["tune", "--quick", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "collbench-profile.yaml").exists()
    assert list(tmp_path.iterdir()) == []  # nothing left behind, no partial file


def test_ranks_that_contradict_the_launchers_world_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 'mpirun -np 2 collbench tune --ranks 4' tuned the 2 ranks mpirun started and wrote their profile
    # without a word; sweep refuses --ranks under a launcher. The variables torchrun sets
    # (torch/distributed/run.py) for a job of one rank, so that nothing waits for a peer.
    monkeypatch.chdir(tmp_path)
    torchrun = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}
    result = CliRunner().invoke(app, ["tune", "--quick", "--ranks", "4"], env=torchrun)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == "error: --ranks 4 contradicts torchrun's world of 1 rank; leave --ranks out"
    assert list(tmp_path.iterdir()) == []  # nothing measured, nothing written

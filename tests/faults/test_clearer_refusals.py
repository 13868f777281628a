"""The unclear cases of the attacker's pass, each now one line that says what is wrong.

A 5-rank --topology used for a 3-rank sweep (or rankfile) without a word; ``--hosts a,a`` writing two
ranks on one slot; ``sweep --op all-to-all --in-place`` exiting 3 as a rank's failure; a gather root
of 99 on 8 ranks imported as it is.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from collbench.cli.app import app
from tests.faults._run import SWEEP, cli, error_line

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "tests" / "fixtures" / "real"
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"


def _topology(tmp_path: Path, paste: str) -> Path:
    out = tmp_path / "topo.yaml"
    result = CliRunner().invoke(app, ["discover", "--from-nvidia-smi", str(REAL / paste), "-O", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_in_place_for_an_op_that_is_out_of_place_only_is_refused_before_any_rank(tmp_path: Path) -> None:
    args = ["sweep", "--ranks", "2", "--backend", "gloo", "--op", "all-to-all", "--in-place", "-b", "1K", "-e", "1K"]
    result = cli([*args, "--stream", str(tmp_path / "s.jsonl")], tmp_path)
    assert result.returncode == 2
    assert "--in-place: all-to-all run out of place only" in error_line(result.stderr)
    assert not (tmp_path / "s.jsonl").exists()


def test_a_topology_of_fewer_ranks_than_the_sweep_is_refused(tmp_path: Path) -> None:
    topo = _topology(tmp_path, "1080ti-x2-phb.topo.txt")
    args = [*SWEEP, "--ranks", "3", "--topology", str(topo), "--stream", str(tmp_path / "s.jsonl")]
    result = cli(args, tmp_path)
    assert result.returncode == 2
    assert "describes 2 ranks, fewer than the 3 this sweep runs" in error_line(result.stderr)


def test_a_topology_of_more_ranks_than_the_rankfile_says_which_it_follows(tmp_path: Path) -> None:
    topo = _topology(tmp_path, "a10-x4-sys-2nics.topo.txt")
    out = tmp_path / "rf"
    args = ["export", "ompi-rankfile", str(PROFILE), "--topology", str(topo), "-O", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "the topology describes 4 ranks: the ring is planned on its first 2" in result.output.replace("\n", " ")


def test_a_host_named_twice_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(PROFILE.read_text())
    data["rule_sets"][0]["nodes"] = 2  # one rank on each of two nodes
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "rf"
    result = CliRunner().invoke(app, ["export", "ompi-rankfile", str(path), "--hosts", "a,a", "-O", str(out)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "--hosts names a more than once" in result.output
    assert not out.exists()
    assert (
        CliRunner().invoke(app, ["export", "ompi-rankfile", str(path), "--hosts", "a,b", "-O", str(out)]).exit_code == 0
    )


def test_a_root_outside_the_world_is_refused_naming_the_line(tmp_path: Path) -> None:
    text = (REAL / "gather_perf-a100-2node-issue-excerpt.log").read_text().splitlines(keepends=True)
    text[13] = text[13].replace("none       0 ", "none      99 ", 1)
    log = tmp_path / "g.log"
    log.write_text("".join(text))
    result = CliRunner().invoke(
        app, ["import", "nccl-tests", str(log), "--op", "gather", "-O", str(tmp_path / "o.jsonl")]
    )
    assert result.exit_code == 2
    assert "g.log:14:" in result.output and "gather root 99 is not a rank of the 2 ranks" in result.output

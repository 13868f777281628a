"""A file name is printed as it was given: 'collbench report rows.jsonl -O "r[red]x.html"' said
'report: rx.html' (the name read as Rich markup), naming a file that does not exist. The same held for
what discover, import, profile merge and predict, sweep and the NCCL plugin build say they wrote
(merge and sweep print theirs as predict and report do; not run here: merge needs two profiles of
one machine, a sweep starts ranks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
TOPO = REPO / "tests" / "fixtures" / "topologies" / "a100x4-nv4-nics.topo.txt"
LOG = REPO / "tests" / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["report", str(RESULTS), "-O", "{out}"], "r[red]x.html"),
        (["discover", "--from-nvidia-smi", str(TOPO), "-O", "{out}"], "t[bold]x.yaml"),
        (["import", "nccl-tests", str(LOG), "-O", "{out}"], "i[red]x.jsonl"),
        (["profile", "predict", str(PROFILE), "--ranks", "8", "-O", "{out}"], "p[red]x.yaml"),
        (["export", "nccl-plugin", str(PROFILE), "--from-other-backend", "-O", "{out}"], "d[red]x"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else v,
)
def test_a_written_file_is_named_as_given(args: list[str], name: str, tmp_path: Path) -> None:
    out = tmp_path / name
    result = CliRunner().invoke(app, [a.format(out=out) for a in args], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert out.exists()
    assert str(out) in result.output, result.output

"""``tune --op all-to-all,scatter,barrier`` on 2 gloo ranks, then ``report`` and the NCCL exports of its
profile: every op gets rules from its measured rows, all-to-all measured out of place, barrier one rule
at 0 bytes with no bandwidth, and the NCCL exports say in one line that these ops have none."""

from __future__ import annotations

from pathlib import Path

import pytest
from export_text import unwrapped
from small_tune import quick_made_small
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile
from collbench.results.io import read_rows


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.dist
def test_tune_report_and_export_of_the_new_ops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quick_made_small(monkeypatch, min_bytes=512, max_bytes=2 << 20)
    out = tmp_path / "p.yaml"
    args = ["tune", "--ranks", "2", "--backend", "gloo", "--op", "all-to-all,scatter,barrier", "--quick"]
    result = CliRunner().invoke(app, [*args, "-b", "1K", "-e", "16K", "-O", str(out)])
    assert result.exit_code == 0, result.output
    rows = read_rows(tmp_path / "p-results.jsonl")
    assert {r.op for r in rows} == {"all-to-all", "scatter", "barrier"}
    assert {r.in_place for r in rows if r.op == "all-to-all"} == {False}
    assert {r.size_bytes for r in rows if r.op == "barrier"} == {0}
    assert all(r.wrong <= 0 for r in rows)
    profile = Profile.load(out)
    (barrier,) = profile.rules_for("barrier")
    assert (barrier.min_bytes, barrier.max_bytes, barrier.at_bytes) == (0, None, 0)
    measured = {r.algo: r.time_us for r in rows if r.op == "barrier"}
    assert barrier.algo in measured and barrier.measured_us is not None
    for op in ("all-to-all", "scatter"):
        rules = profile.rules_for(op)
        assert rules[0].min_bytes == 0 and rules[-1].max_bytes is None
        assert {r.algo for r in rules} <= {r.algo for r in rows if r.op == op}
    page = (tmp_path / "p.html").read_text()
    assert 'id="op-barrier-gloo-2"' in page and 'id="op-all-to-all-gloo-2"' in page

    report = CliRunner().invoke(app, ["report", str(tmp_path / "p-results.jsonl"), "-O", str(tmp_path / "r.html")])
    assert report.exit_code == 0, report.output
    for command in ("nccl-tuner", "env"):
        exported = CliRunner().invoke(app, ["export", command, str(out), "--from-other-backend"])
        assert exported.exit_code == 0, exported.output
        lines = [line for line in unwrapped(exported.output).splitlines() if "point-to-point" in line]
        assert len(lines) == 1 and lines[0].startswith("# alltoall, scatter, barrier: no rules"), exported.output
        assert not [line for line in exported.output.splitlines() if line.startswith(("alltoall", "scatter"))]

"""Counts read right in the singular and the plural outside ``explain`` too: a profile's shape labels
(and the exported files' comments made from them), the report page, the tune check's summary. They
said ``2 ranks on 1 node(s)``, ``1 GPU(s)``, ``3 rule(s)``; units.counted says ``1 node``, ``3 rules``."""

from __future__ import annotations

import re
from pathlib import Path

from export_text import unwrapped
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile
from collbench.units import ranks_on_nodes

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
HEDGED = re.compile(r"\w\(s\)")


def test_ranks_on_nodes_reads_right_for_one_and_many() -> None:
    assert ranks_on_nodes(1, 1) == "1 rank on 1 node"
    assert ranks_on_nodes(16, 2) == "16 ranks on 2 nodes"


def test_a_profile_s_shape_label_and_its_exports() -> None:
    profile = Profile.load(PROFILE)
    assert [s.shape_label for s in profile.rule_sets] == ["2 ranks on 1 node"]
    result = CliRunner().invoke(app, ["export", "ompi-rules", str(PROFILE), "--from-other-backend"])
    assert result.exit_code == 0, result.output
    text = unwrapped(result.stdout)
    assert "2 ranks on 1 node, measured" in text, result.output
    assert "2 (1 node, measured)" in text
    assert not HEDGED.search(text), HEDGED.search(text)


def test_the_report_page_counts_without_hedging(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(RESULTS), "--profile", str(PROFILE), "-O", str(page)])
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "1 shape: 2 ranks on 1 node." in html
    assert "2 ranks, 1 node: measured" in html
    hedged = HEDGED.search(html)
    assert hedged is None, html[max(0, hedged.start() - 80) : hedged.end() + 80]


def test_one_row_is_one_row(tmp_path: Path) -> None:
    # 'report: r.html (11 KiB, 1 rows)' with 'nccl-tests columns: 1 rows' on the page, and a sweep
    # stopped after its first row 'the 1 rows measured so far are in s.jsonl'.
    from collbench.runtime.sweep.files import kept_rows_note

    one = tmp_path / "one.jsonl"
    one.write_text(RESULTS.read_text().splitlines(keepends=True)[0])
    page = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(one), "-O", str(page)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert re.search(r"KiB, 1 row\)$", result.stdout.strip()), result.stdout
    assert "nccl-tests columns: 1 row (click" in page.read_text()
    assert kept_rows_note(one) == f"; the 1 row measured so far is in {one}"


def test_a_comparison_of_one_point_says_one_point(tmp_path: Path) -> None:
    # compare of a results file cut after its first row said '1 points matched' and 'median over 1 points'.
    one = tmp_path / "one.jsonl"
    one.write_text(RESULTS.read_text().splitlines(keepends=True)[0])
    result = CliRunner().invoke(app, ["compare", str(one), str(one)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "1 point matched." in result.output and "(median over 1 point, +- " in result.output
    assert "1 points" not in result.output

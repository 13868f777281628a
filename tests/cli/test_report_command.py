"""`collbench report` in-process: the page is written; bad input is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from report_inputs import A100_TOPO, EXAMPLE_PROFILE, EXAMPLE_RESULTS
from typer.testing import CliRunner

from collbench.cli.app import app

FIX = Path(__file__).parents[1] / "fixtures" / "nccl_tests"


def _topology_file(tmp_path: Path) -> Path:
    out = tmp_path / "a100.yaml"
    result = CliRunner().invoke(app, ["discover", "--from-nvidia-smi", str(A100_TOPO), "-O", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_report_of_the_example_profile(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.html"
    out.parent.mkdir()  # collbench makes no folders: a missing one is refused
    args = [
        "report",
        str(EXAMPLE_RESULTS),
        "--profile",
        str(EXAMPLE_PROFILE),
        "--topology",
        str(_topology_file(tmp_path)),
    ]
    result = CliRunner().invoke(app, [*args, "-O", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert f"report: {out}" in result.stdout.replace("\n", "")
    assert 'id="machine"' in html and 'id="profile"' in html and "NV4" in html


def test_report_of_an_nccl_tests_log(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(FIX / "all_reduce_perf_8gpu.log"), "-O", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "all-reduce, nccl, 8 ranks" in html and "No profile given" in html


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    (tmp_path / "dir.html").mkdir()
    cases = [
        (["report", str(EXAMPLE_RESULTS), "-O", str(tmp_path / "r.png")], "use a .html name"),
        (["report", str(tmp_path / "none.jsonl"), "-O", str(tmp_path / "r.html")], "no such file"),
        (["report", str(EXAMPLE_RESULTS), "--profile", str(tmp_path / "p.yaml")], "no such profile"),
        (
            ["report", str(EXAMPLE_RESULTS), "--profile", str(EXAMPLE_RESULTS), "-O", str(tmp_path / "r.html")],
            "this is collbench result rows (fit, report and compare read them), not a collbench profile",
        ),
        (
            ["report", str(EXAMPLE_RESULTS), "--topology", str(EXAMPLE_PROFILE), "-O", str(tmp_path / "r.html")],
            "topology",
        ),
        (["report", str(EXAMPLE_RESULTS), "-O", str(tmp_path / "dir.html")], "is a directory"),
    ]
    for args, expected in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert expected in result.output and len(result.output.strip().splitlines()) == 1, result.output
        assert "Traceback" not in result.output
    assert not (tmp_path / "r.html").exists()


def test_files_holding_the_same_series_are_named(tmp_path: Path) -> None:
    """'report h100.log p5.log', two machines' published all_reduce_perf at 16 ranks (tests/fixtures/real,
    SOURCES.md), drew one 'native' line from both with no word that it mixed two runs."""
    real = Path(__file__).parents[1] / "fixtures" / "real"
    h100 = real / "all_reduce_perf-h100-2node-mpirun-gcp.log"
    p5 = real / "all_reduce_perf-p5-2node-srun-label-readme-excerpt.log"
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(h100), str(p5), "-O", str(out)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.stderr.split())
    note = (
        f"note: {h100} and {p5} hold the same series, all-reduce native float32 at 16 ranks over nccl: the page "
        f"draws each as one line, the fastest row at each size of them all; `collbench compare {h100} {p5}` sets "
        "two runs side by side"
    )
    assert note in said, result.stderr
    assert "hold the same series" in out.read_text()
    # Files of different series are drawn apart and need no note.
    other = FIX / "all_reduce_perf_8gpu.log"
    apart = CliRunner().invoke(app, ["report", str(h100), str(other), "-O", str(tmp_path / "s.html")])
    assert apart.exit_code == 0, apart.output
    assert "hold the same series" not in apart.stderr


def test_a_topology_and_profile_of_another_machine_are_said(tmp_path: Path) -> None:
    """'report h100.log --topology cpu.yaml --profile gloo.yaml' drew a CPU host and a gloo profile beside
    16 H100 ranks over NCCL with no word; now a warning each names what differs, on stderr and on the page."""
    repo = Path(__file__).parents[2]
    h100 = Path(__file__).parents[1] / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"
    topo = repo / "docs" / "cpu-2core-gloo-2ranks-topology.yaml"
    profile = repo / "profiles" / "cpu-2core-gloo-2ranks.yaml"
    out = tmp_path / "r.html"
    args = ["report", str(h100), "--topology", str(topo), "--profile", str(profile), "-O", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    said = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert said == [
        f"warning: {topo} does not match the rows: hosts: the rows' ztan-mig-235z, the topology's vm; GPUs: the rows "
        "ran on NVIDIA H100 80GB HBM3, the topology has no GPU; world size: the rows ran 16 ranks, the topology holds "
        "2 rank devices; the page draws it beside them as given",
        f"warning: {profile} does not match the rows: hosts: the rows' ztan-mig-235z, the profile's vm; backend: the "
        "rows' nccl, the profile's gloo; world size: the rows ran 16 ranks, the profile's shapes are 2 ranks; the "
        "page draws its rules and models beside them as given",
    ]
    assert 'id="notes"' in out.read_text() and "does not match the rows" in out.read_text()
    # The committed example's rows, profile and topology are one machine's: no warning.
    same = [
        "report",
        str(repo / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"),
        "--topology",
        str(topo),
        "--profile",
        str(profile),
        "-O",
        str(tmp_path / "s.html"),
    ]
    agreed = CliRunner().invoke(app, same)
    assert agreed.exit_code == 0, agreed.output
    assert "warning" not in agreed.stderr


def test_rows_of_only_zero_byte_calls_make_a_page(tmp_path: Path) -> None:
    """Rows of only 0-byte calls (nccl-tests -b 0 -e 0) ended report in min()'s ValueError traceback (a log
    axis of sizes has no place for 0); now the page is written, its charts saying they have no points."""
    lines = [json.loads(line) for line in Path(EXAMPLE_RESULTS).read_text().splitlines()[:40]]
    zeros = tmp_path / "zeros.jsonl"
    zeros.write_text("".join(json.dumps(dict(r, size_bytes=0, count=0)) + "\n" for r in lines))
    page = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(zeros), "-O", str(page)])
    assert result.exit_code == 0, result.output
    assert "no points" in page.read_text()

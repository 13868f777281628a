"""Issue 13, items 5, 6, 9 and 10: interrupted tunes, bad numbers and hostile inputs, through the real CLI."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import write_rows
from tests.faults._run import cli, env, error_line, start, wait_for, whole_rows
from tests.synthetic_rows import make_rows

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
def test_a_killed_tune_leaves_nothing_in_tmp_and_refuses_to_start_over_its_rows(tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    run_env = env(TMPDIR=str(tmpdir))
    args = ["tune", "--ranks", "2", "--quick", "-O", "p.yaml"]
    partial = tmp_path / "p-results.partial-0.jsonl"
    tune = start(args, tmp_path, env=run_env)
    try:
        assert wait_for(lambda: len(partial.read_bytes().splitlines()) >= 2 if partial.exists() else False)
        tune.send_signal(signal.SIGKILL)  # no handler, no cleanup: the kernel's OOM killer does the same
        tune.wait(timeout=30)
    finally:
        if tune.poll() is None:
            tune.kill()
            tune.wait()
    assert not list(tmpdir.glob("collbench-tune-*"))
    wait_for(lambda: partial.read_bytes().endswith(b"\n"), 10)  # rank 0 may finish its last write
    kept = whole_rows(partial)
    assert len(kept) >= 2
    again = cli(args, tmp_path, env=run_env)
    assert again.returncode == 2
    line = error_line(again.stderr)
    assert "an interrupted tune left its measured rows in" in line and "p-results.partial-0.jsonl" in line
    assert "--resume" in line
    assert whole_rows(partial)[: len(kept)] == kept  # the refused run emptied nothing


def _rows_file(tmp_path: Path) -> Path:
    path = tmp_path / "r.jsonl"
    write_rows(path, make_rows("ring", 4, 20.0, 1e-4, noise=0.02, seed=1, sizes=[1024, 4096, 16384]))
    return path


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("time_us", "Infinity", "is not a finite number"),
        ("time_us", -1.0, "out of range"),
        ("op", 7, "expected text"),
        ("algo", "warp-drive", "unknown algorithm"),
        ("size_bytes", None, "empty"),
    ],
)
def test_fit_names_file_line_and_field_of_a_bad_number(tmp_path: Path, field: str, value: object, problem: str) -> None:
    path = _rows_file(tmp_path)
    lines = path.read_text().splitlines()
    row = json.loads(lines[2])
    row[field] = value
    lines[2] = json.dumps(row).replace('"Infinity"', "Infinity")
    path.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["fit", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}:3: " in result.output and f"field {field}" in result.output and problem in result.output


def test_fit_names_the_line_of_an_empty_csv_cell(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    write_rows(path, make_rows("ring", 4, 20.0, 1e-4, noise=0.02, seed=1, sizes=[1024, 4096]))
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[3].split(",")
    cells[header.index("time_us")] = ""
    lines[3] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["fit", str(path)])
    assert result.exit_code == 2
    assert f"{path}:4: " in result.output and "field time_us: empty" in result.output


def _alias_bomb() -> str:
    text = 'extra: {a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'
    for i in range(1, 10):
        text += f", a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]"
    return text + "}\n"


@pytest.mark.parametrize("kind", ["yaml-alias-bomb", "xml-5000-deep", "smi-cpu-range", "xml-huge-mask"])
def test_hostile_topologies_are_one_line(tmp_path: Path, kind: str) -> None:
    if kind == "yaml-alias-bomb":
        path = tmp_path / "t.yaml"
        path.write_text(_alias_bomb() + "devices: []\n")
        args = ["layout", "--from-file", str(path)]
        expected = "aliases expand to more than"
    elif kind.startswith("xml"):
        path = tmp_path / "t.xml"
        if kind == "xml-5000-deep":
            inner = "".join(f'<pci busid="0000:01:{i % 32:02x}.0">' for i in range(5000))
            body = f'<cpu numaid="0" affinity="ff">{inner}<gpu dev="0"/>' + "</pci>" * 5000 + "</cpu>"
            expected = "nest deeper than"
        else:
            body = f'<cpu numaid="0" affinity="{"f" * 100_000}"><pci busid="0000:01:00.0"><gpu dev="0"/></pci></cpu>'
            expected = "affinity"
        path.write_text(f'<system version="1">{body}</system>\n')
        args = ["layout", "--from-nccl-xml", str(path)]
    else:
        path = tmp_path / "smi.txt"
        text = (REPO / "tests" / "fixtures" / "topologies" / "a100x4-nv4-nics.topo.txt").read_text()
        path.write_text(text.replace("0-1", "0-100000000"))
        args = ["layout", "--from-nvidia-smi", str(path)]
        expected = ""
    result = CliRunner().invoke(app, args)
    assert "Traceback" not in result.output and not isinstance(result.exception, RecursionError | MemoryError)
    if expected:
        assert result.exit_code == 2, result.output
        assert expected in result.output and len([ln for ln in result.output.splitlines() if "error" in ln]) == 1
    else:
        # The paste's CPU column is unusable: the links are still read, and the CPUs left unknown.
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("value", [".nan", ".inf", "-1.0"])
def test_a_topology_with_a_bad_bandwidth_is_one_line(tmp_path: Path, value: str) -> None:
    from collbench.topology.io import dumps_topology
    from collbench.topology.nvidia_smi import parse_nvidia_smi_topo

    topo = parse_nvidia_smi_topo((REPO / "tests" / "fixtures" / "topologies" / "a100x4-nv4-nics.topo.txt").read_text())
    path = tmp_path / "t.yaml"
    path.write_text(dumps_topology(topo, "yaml").replace("bandwidth_gbps: 100.0", f"bandwidth_gbps: {value}", 1))
    result = CliRunner().invoke(app, ["layout", "--from-file", str(path)])
    assert result.exit_code == 2, result.output
    assert "link GPU0-GPU1: bandwidth must be a finite number >= 0" in result.output

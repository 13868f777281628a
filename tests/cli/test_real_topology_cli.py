"""Every published `nvidia-smi topo -m` paste in tests/fixtures/real, fed to the CLI as a user would.

tests/unit/test_real_topologies.py checks what the parser reads from each paste; this checks that
`discover` and `layout` take each one end to end: exit 0, the same devices in the topology document as
in the paste, and rings that visit every GPU once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
PASTES = sorted(p.name for p in REAL.glob("*.topo.txt"))
WIDE = {"COLUMNS": "200"}


def _gpu_rows(path: Path) -> int:
    """GPU rows in the paste, counted from the text alone: a line whose first field names a GPU."""
    text = path.read_text(encoding="utf-8-sig")
    return len({m.group(1) for m in re.finditer(r"^[^\S\n]*(?:\S*\x1b\[\d*m)?(GPU\d+)\b", text, re.MULTILINE)})


@pytest.mark.parametrize("name", PASTES)
def test_discover_and_layout_take_every_real_paste(name: str) -> None:
    paste = REAL / name
    runner = CliRunner()
    found = runner.invoke(app, ["discover", "--from-nvidia-smi", str(paste), "--json"], env=WIDE)
    assert found.exit_code == 0, found.output
    doc = json.loads(found.stdout)
    gpus = [d["id"] for d in doc["devices"] if d["kind"] == "gpu"]
    assert len(gpus) == _gpu_rows(paste) > 0
    laid = runner.invoke(app, ["layout", "--from-nvidia-smi", str(paste), "--json"], env=WIDE)
    assert laid.exit_code == 0, laid.output
    rings = json.loads(laid.stdout)["rings"]
    assert rings and all(sorted(r["order"]) == list(range(len(gpus))) for r in rings)
    assert "Traceback" not in found.output + laid.output


@pytest.mark.parametrize("name", sorted(p.name for p in REAL.glob("*class-only*.topo.xml")))
def test_discover_takes_cloud_topology_files_and_says_what_it_assumed(name: str) -> None:
    result = CliRunner().invoke(app, ["discover", "--from-nccl-xml", str(REAL / name)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert result.output.count("assumed:") == 2
    assert "named only by PCI class" in result.output


def test_a_paste_with_17_nics_says_the_matrix_shows_16_of_them() -> None:
    paste = REAL / "a100-x8-nv12-17nics.topo.txt"
    result = CliRunner().invoke(app, ["discover", "--from-nvidia-smi", str(paste)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "(the matrix shows 16 of 17 NICs; --json lists all)" in result.output


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("GPU0", "devices[0] is str 'GPU0', expected a mapping"),
        ("{id: GPU0, kind: gpu, index: 0, name: {model: A100}}", "devices[0].name is dict, expected a scalar"),
        ("{id: [GPU0], kind: gpu, index: 0}", "devices[0].id is list, expected a scalar"),
        ("{id: GPU0, kind: gpu, index: 0, cpus: {a: 1}}", "devices[0].cpus is dict, expected a list of CPU numbers"),
    ],
)
def test_a_hand_edited_topology_of_the_wrong_shape_is_one_line_naming_the_field(
    tmp_path: Path, device: str, expected: str
) -> None:
    topo = tmp_path / "topo.yaml"
    topo.write_text(f"schema_version: 1\nhost: h\ndevices:\n  - {device}\nlinks: []\n")
    result = CliRunner().invoke(app, ["discover", "--from-file", str(topo)], env={"COLUMNS": "300"})
    assert result.exit_code != 0
    assert expected in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)

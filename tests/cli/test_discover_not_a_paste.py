"""`discover --from-nvidia-smi FILE` on a file that is not a paste of `nvidia-smi topo -m` (issue 34:
the README exited 0 describing the 4 GPUs of its first example, saying nothing). Refused in one line
when which table was meant is not clear; read with an `assumed:` line naming the lines it read when the
file holds one table among other text; a real paste (prompt, title, legends) reads as before, silently.

The tables are the published pastes of tests/fixtures (SOURCES.md); the text around them is this
test's, standing for a README or a saved environment report.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.topology.nvidia_smi import read_nvidia_smi_topo

FIXTURES = Path(__file__).parents[1] / "fixtures"
TABLE = (FIXTURES / "topologies" / "a100x4-nv4-nics.topo.txt").read_text()
WIDE = {"COLUMNS": "200", "NO_COLOR": "1"}
PROSE = "".join(f"Some prose of a README, line {i}, that mentions GPU0 and NVLink.\n" for i in range(40))
RING = "  GPU0 ─pix 24→ GPU1 ─pxb 22→ GPU2 ─pxb 22→ GPU3 ─sys 10→ GPU0\n"


def test_a_readme_with_a_table_among_its_examples_is_refused_in_one_line(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(PROSE + "```\n" + TABLE + "```\n" + PROSE + "```\n" + RING + "```\n" + PROSE)
    result = CliRunner().invoke(app, ["discover", "--from-nvidia-smi", str(readme)], env=WIDE)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {readme}: holds "), result.output
    # 40 lines of prose and a fence, the table, a fence, prose, a fence, the ring.
    ring_at = 41 + len(TABLE.splitlines()) + 1 + 40 + 1 + 1
    assert f"2 lines that start like a matrix's header (lines 42, {ring_at})" in lines[0]
    assert "not clearly one paste of `nvidia-smi topo -m`" in lines[0]


def test_one_table_among_other_text_is_read_and_the_lines_named(tmp_path: Path) -> None:
    report = tmp_path / "collect_env.txt"
    report.write_text(PROSE + "GPU Topology:\n" + TABLE + "\n" + PROSE)
    result = CliRunner().invoke(app, ["discover", "--from-nvidia-smi", str(report)], env=WIDE)
    assert result.exit_code == 0, result.output
    first = TABLE.splitlines().index(next(line for line in TABLE.splitlines() if line.strip().startswith("GPU0")))
    assert f"assumed: {report}: the file holds " in result.output
    assert f"read the `nvidia-smi topo -m` table at lines {41 + first + 1}-{41 + first + 9}" in result.output
    assert "GPUs: 4 x GPU" in result.output


@pytest.mark.parametrize(
    "path",
    sorted((FIXTURES / "real").glob("*.topo.txt")) + sorted((FIXTURES / "topologies").glob("*.topo.txt")),
    ids=lambda p: p.name,
)
def test_published_pastes_read_with_no_note_about_other_text(path: Path) -> None:
    notes: list[str] = []
    read_nvidia_smi_topo(path, notes)
    assert not [n for n in notes if "besides the matrix" in n]

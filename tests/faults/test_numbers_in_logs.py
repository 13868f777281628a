"""Numbers in logs, pastes and results files are checked before ``int()`` and against physical bounds.

The attacker's 5,000-digit rank count or cell (an nccl-tests log, an nvidia-smi paste, a results
file) was Python's int-digits ValueError traceback; a size of 1e30 bytes was imported as a measurement.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "tests" / "fixtures" / "real"
LOG = REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log"
TOPO = REAL / "1080ti-x2-phb.topo.txt"
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"


def _one_error(output: str) -> str:
    assert "Traceback" not in output
    assert output.count("\n") == 1 and output.startswith("error: "), output
    return output


def _log_line(text: str) -> str:
    return next(x for x in text.splitlines() if x.split()[:2] == ["64", "16"])


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda t: t.replace("#  Rank  1 Group", "#  Rank  " + "1" * 5000 + " Group", 1), ":13: a number of 5,000"),
        (lambda t: t.replace(_log_line(t), _log_line(t).replace(" 16 ", " " + "9" * 5000 + " ", 1)), ":35: a number"),
        (lambda t: t.replace(_log_line(t), _log_line(t).replace(" 64 ", " 1" + "0" * 30 + " ", 1)), ":35: a number"),
    ],
)  # fmt: skip
def test_a_log_with_a_huge_number_is_one_line_naming_it_and_writes_nothing(tmp_path: Path, edit, expected) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "x.log"
    log.write_text(edit(LOG.read_text()))
    out = tmp_path / "rows.jsonl"
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(out)])
    assert result.exit_code == 2
    assert expected in _one_error(result.output)
    assert not out.exists()


def test_an_nvidia_smi_paste_with_a_huge_number_is_one_line(tmp_path: Path) -> None:
    paste = tmp_path / "topo.txt"
    paste.write_text(TOPO.read_text().replace("0-11 ", "0-" + "1" * 5000 + " ", 1))
    result = CliRunner().invoke(app, ["discover", "--from-nvidia-smi", str(paste)])
    assert result.exit_code == 2
    assert "topo.txt:2: a number of 5,000 digits" in _one_error(result.output)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"iters": "9" * 5000}, "an integer of 5,000 digits"),
        ({"size_bytes": "1" + "0" * 30}, "an integer of 31 digits"),
        ({"size_bytes": 2**50}, "field size_bytes: 1125899906842624 is out of range"),
        ({"world_size": 1 << 20, "nodes": 1 << 20}, "field world_size: 1048576 is out of range"),
        ({"nodes": 1 << 20}, "field nodes: 1048576 is out of range"),
    ],
)
def test_a_results_row_past_a_physical_bound_is_refused_naming_the_field(
    tmp_path: Path, change: dict[str, int | str], expected: str
) -> None:
    row = json.loads(RESULTS.read_text().splitlines()[0])
    # Digits as text, put in after json.dumps (which, like int(), refuses to write 5,000 of them).
    text = json.dumps(dict(row, **{k: "@" + k for k in change}))
    for key, value in change.items():
        text = text.replace(f'"@{key}"', str(value))
    path = tmp_path / "rows.jsonl"
    path.write_text(text + "\n")
    result = CliRunner().invoke(app, ["compare", str(RESULTS), str(path)])
    assert result.exit_code == 2
    assert expected in _one_error(result.output)


def test_a_size_of_1e400_is_not_finite(tmp_path: Path) -> None:
    row = RESULTS.read_text().splitlines()[0]
    size = json.loads(row)["size_bytes"]
    path = tmp_path / "rows.jsonl"
    path.write_text(row.replace(f'"size_bytes": {size}', '"size_bytes": 1e400') + "\n")
    result = CliRunner().invoke(app, ["fit", str(path)])
    assert result.exit_code == 2
    assert "size_bytes: inf is not a finite number" in _one_error(result.output)


def test_the_real_log_and_paste_still_read(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    assert CliRunner().invoke(app, ["import", "nccl-tests", str(LOG), "-O", str(out)]).exit_code == 0
    assert CliRunner().invoke(app, ["discover", "--from-nvidia-smi", str(TOPO)]).exit_code == 0

"""discover/layout --replay of an NVML recording whose answers have the wrong kind: one error line.

A recording is a JSON file anyone may have edited or cut; each case is the real H100 recording with
one answer changed. Each was a traceback (AttributeError, TypeError, ValueError) before, or a hang.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from refused import refused_line
from typer.testing import CliRunner

from collbench.cli.app import app

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "tests" / "fixtures" / "nvml" / "h100-single.json"
COUNT = "nvmlDeviceGetCount()"
NAME = "nvmlDeviceGetName(gpu0)"
MEMORY = "nvmlDeviceGetMemoryInfo(gpu0)"


@pytest.mark.parametrize(
    ("key", "answer"),
    [
        (COUNT, "x"),  # the entry itself not an object
        (COUNT, -1),
        (COUNT, {"value": "x"}),
        (COUNT, {"value": [1]}),
        (COUNT, {"value": 10**30}),  # every GPU and pair asked about: it never ended
        (NAME, {"value": {"a": 1}}),
        (MEMORY, {"value": {"__struct__": "x"}}),
        (MEMORY, {"value": {"__struct__": {"total": "many"}}}),
    ],
)
@pytest.mark.parametrize("command", ["discover", "layout"])
def test_an_answer_of_the_wrong_kind_is_one_error_naming_the_file(
    tmp_path: Path, key: str, answer: Any, command: str
) -> None:
    data = json.loads(RECORDING.read_text())
    data["calls"][key] = answer
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    line = refused_line([command, "--replay", str(path)])
    assert str(path) in line, line


def test_the_recording_as_made_still_replays() -> None:
    result = CliRunner().invoke(app, ["discover", "--replay", str(RECORDING)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "H100" in result.output


@pytest.mark.parametrize("command", ["discover", "layout"])
def test_a_recording_nested_too_deeply_is_one_error_line(tmp_path: Path, command: str) -> None:
    # json.loads recursed past Python's limit on 100,000 open braces: a RecursionError's traceback.
    path = tmp_path / "deep.json"
    path.write_text('{"a":' * 100_000)
    line = refused_line([command, "--replay", str(path)])
    assert line == f"error: {path}: not JSON collbench reads: nested too deeply"

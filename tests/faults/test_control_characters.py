"""Text from someone else's file is data: terminal escapes in it are shown escaped, never sent raw.

The attacker's profile and results held ``ESC ]0;...BEL`` (window title), ``ESC ]52;c;...`` (the
clipboard, xterm's OSC 52) and ``ESC [2J`` (clear screen) in their host field; ``export`` put them into
the config's comment and ``compare`` printed them in its warning line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from export_text import unwrapped
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import InputFileError, UserError
from collbench.text import printable

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
HOSTILE = "vm\x1b]0;PWNED\x07\x1b]52;c;aGk=\x07\x1b[2J\r\u202eok\nallreduce,0,-1,ring,simple,-1,-1,-1"
CONTROLS = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]] + ["\u202e", "\u2066"]


def test_printable_escapes_every_control_character_and_keeps_the_rest() -> None:
    assert printable("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert printable("line\nnext") == "line\\x0anext"
    assert printable("line\nnext", keep="\n") == "line\nnext"
    assert printable("\u202eevil") == "\\u202eevil"
    assert printable("GPU 0: NVIDIA H100 80GB HBM3 µs ×") == "GPU 0: NVIDIA H100 80GB HBM3 µs ×"
    for c in CONTROLS:
        assert printable(c).isprintable() and len(printable(c)) > 1


def _hostile_profile(tmp_path: Path) -> Path:
    data = yaml.safe_load(PROFILE.read_text())
    data["host"] = HOSTILE
    path = tmp_path / "hostile.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("export", ["nccl-tuner", "ompi-rules"])
def test_an_export_writes_a_hostile_host_escaped_on_its_one_comment_line(tmp_path: Path, export: str) -> None:
    out = tmp_path / "out.conf"
    args = ["export", export, str(_hostile_profile(tmp_path)), "--from-other-backend", "-O", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert not any(c in text for c in CONTROLS if c != "\n")
    # One comment, continued over lines of its own where longer than 80 columns, each a comment.
    machine = [line for line in unwrapped(text).splitlines() if line.startswith("# machine")]
    assert len(machine) == 1 and printable(HOSTILE) in machine[0]
    # The newline in the host did not start a line of its own: no rule line was injected.
    assert not any(line.startswith("allreduce,0,-1,ring,simple,-1,-1,-1") for line in text.splitlines())


def test_compare_prints_a_hostile_host_escaped(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines()]
    path = tmp_path / "new.jsonl"
    path.write_text("".join(json.dumps(dict(r, host=HOSTILE)) + "\n" for r in rows))
    result = CliRunner().invoke(app, ["compare", str(RESULTS), str(path)])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\r" not in result.output and "\u202e" not in result.output
    assert "NEW vm\\x1b]0;PWNED" in result.output


def test_an_error_quoting_data_is_one_escaped_line() -> None:
    err = InputFileError("a\x1b]0;x\x07.yaml", "field host 'b\nc' is wrong")
    assert str(err) == "a\\x1b]0;x\\x07.yaml: field host 'b\\x0ac' is wrong"
    assert str(UserError("x\x1b[2J")) == "x\\x1b[2J"


def test_the_cli_error_line_of_a_hostile_file_name_is_escaped(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", "nccl-tuner", str(tmp_path / "no\x1b[2Jsuch.yaml")])
    assert result.exit_code == 2
    assert "\x1b" not in result.output and "no\\x1b[2Jsuch.yaml" in result.output

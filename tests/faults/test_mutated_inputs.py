"""Valid profiles, topologies and logs mutated field by field, through the real commands.

Each example takes one real file, replaces one field (a leaf of the YAML mapping, or one token of a log
line) with a hostile value, and runs the command a user would. The command either exits 0 having written
a whole output that reads back, or exits 2 with one ``error:`` line and no output file; never another
exit code, never a traceback, never a hang (a hard alarm per example), never a partial output.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows
from collbench.text import printable
from collbench.topology.io import load_topology

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "tests" / "fixtures" / "real"
PROFILE = yaml.safe_load((REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml").read_text())
LOG = (REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log").read_text()
PASTE = REAL / "a10-x4-sys-2nics.topo.txt"
ALARM_S = 30
"""A hard limit per example: a hang fails the test instead of stopping the suite."""
SETTINGS = settings(
    max_examples=int(os.environ.get("MUTATED_EXAMPLES", "25")), deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # fmt: skip

HOSTILE_VALUES: list[Any] = [
    None, True, -1, 0, 1, 2**31, 2**50, 2**63, 10**30, -(2**63), math.nan, math.inf, -math.inf, 1e300,
    0.5, "", "x\x1b]0;title\x07\x1b[2J", "a\nb", "\u202e", "ring", "native", "-1", "1e400", "9" * 30,
    [], {}, [0] * 5000, [[0, 1]] * 100, {"a": 1}, "x" * 10_000,
]  # fmt: skip
HOSTILE_TOKENS = [
    "-1", "0", "nan", "inf", "-inf", "1e400", "9" * 25, "9" * 5000, "-5", "99", "", "N/A", "x\x1b[2J",
    "1" + "0" * 30, "0.000", "ring", "#", "|",
]  # fmt: skip


@contextlib.contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    def hung(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"the command ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))] or [path]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))] or [path]
    return [path]


def _replaced(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(data) if isinstance(data, dict) else list(data)
    copy[path[0]] = _replaced(data[path[0]], path[1:], value)  # type: ignore[index]
    return copy


def _run(args: list[str], out: Path) -> int:
    """Run the command; assert the outcome is a whole output (exit 0) or one error line and none (exit 2)."""
    with _alarm(ALARM_S):
        result = CliRunner().invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args[:3], result.exception)
    assert "Traceback" not in result.output
    if result.exit_code == 0:
        assert out.is_file(), result.output
        text = out.read_text()
        assert text.endswith("\n"), "a partial output"
        assert printable(text, keep="\n") == text, "a control character in the output"
    else:
        assert result.exit_code == 2, result.output
        errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and result.output.count("\n") == 1, result.output
        assert not out.exists(), "an output written by a refused command"
    return int(result.exit_code)


_PROFILE_LEAVES = _leaves(PROFILE)


@given(leaf=st.sampled_from(_PROFILE_LEAVES), value=st.sampled_from(HOSTILE_VALUES))
@SETTINGS
def test_a_profile_with_one_field_replaced_exports_whole_or_is_one_error(
    tmp_path_factory: pytest.TempPathFactory, leaf: tuple[Any, ...], value: Any
) -> None:
    folder = tmp_path_factory.mktemp("profile")
    path = folder / "p.yaml"
    path.write_text(yaml.safe_dump(_replaced(PROFILE, leaf, value)))
    for export in ("nccl-tuner", "ompi-rules"):
        out = folder / f"{export}.conf"
        _run(["export", export, str(path), "--from-other-backend", "-O", str(out)], out)


_TOPOLOGY_TEXT: dict[str, str] = {}


def _topology() -> Any:
    """The real paste's topology, as collbench writes it (made once)."""
    if "yaml" not in _TOPOLOGY_TEXT:
        result = CliRunner().invoke(app, ["discover", "--from-nvidia-smi", str(PASTE), "--json"])
        assert result.exit_code == 0, result.output
        _TOPOLOGY_TEXT["yaml"] = result.stdout
    return yaml.safe_load(_TOPOLOGY_TEXT["yaml"])


@given(data=st.data(), value=st.sampled_from(HOSTILE_VALUES))
@SETTINGS
def test_a_topology_with_one_field_replaced_is_read_whole_or_is_one_error(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, value: Any
) -> None:
    topology = _topology()
    leaf = data.draw(st.sampled_from(_leaves(topology)))
    folder = tmp_path_factory.mktemp("topology")
    path = folder / "t.yaml"
    path.write_text(yaml.safe_dump(_replaced(topology, leaf, value)))
    out = folder / "again.yaml"
    if _run(["discover", "--from-file", str(path), "-O", str(out)], out) == 0:
        load_topology(out)  # what it wrote reads back


_LOG_LINES = LOG.splitlines(keepends=True)
_LOG_TOKENS = [(i, m.start(), m.end()) for i, line in enumerate(_LOG_LINES) for m in re.finditer(r"\S+", line)]


@given(where=st.sampled_from(_LOG_TOKENS), token=st.sampled_from(HOSTILE_TOKENS))
@SETTINGS
def test_a_log_with_one_token_replaced_imports_whole_or_is_one_error(
    tmp_path_factory: pytest.TempPathFactory, where: tuple[int, int, int], token: str
) -> None:
    line, start, end = where
    lines = list(_LOG_LINES)
    lines[line] = lines[line][:start] + token + lines[line][end:]
    folder = tmp_path_factory.mktemp("log")
    path = folder / "x.log"
    path.write_text("".join(lines))
    out = folder / "rows.jsonl"
    if _run(["import", "nccl-tests", str(path), "-O", str(out)], out) == 0:
        assert read_rows(out)  # what it wrote reads back, every row checked

"""`collbench explain`: the whiteboard, the totals, JSON, and one-line errors for bad names."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.cli.explain import crossover_bytes
from collbench.schedules.analysis import schedule_stats
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["explain", *args])
    return result.exit_code, result.stdout, result.stderr


def test_ring_whiteboard_and_totals() -> None:
    code, out, _ = _run("ring", "--op", "all-reduce", "--ranks", "3")
    assert code == 0, out
    assert "step 1 · reduce-scatter 1/2" in out
    assert "a→b 2 (+)" in out
    assert "a0+b0+c0" in out
    assert "steps (latency term): 4" in out
    # 1 MiB over 3 ranks: each sends 2 x 2/3 of it.
    assert "busiest rank, sent or received (bandwidth term): 1.33 MiB" in out
    assert "vs direct" in out and "ring is faster above" in out


def test_direct_has_no_comparison_with_itself() -> None:
    code, out, _ = _run("direct", "--op", "reduce", "--ranks", "4", "--root", "2")
    assert code == 0
    assert "root c" in out and "c*" in out
    assert "vs direct" not in out


def test_json_output() -> None:
    code, out, _ = _run("tree", "--op", "broadcast", "--ranks", "4", "--segments", "2", "--size", "64K", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["algo"] == "tree" and data["op"] == "broadcast" and data["count"] == 8
    board = data["whiteboard"]
    assert board["ranks"] == ["a", "b", "c", "d"]
    assert board["steps"][-1]["holds"] == [["a0", "a1"]] * 4
    assert data["totals"]["size_bytes"] == 65536
    assert data["totals"]["steps"] == 3
    assert data["direct"]["steps"] == 1


def test_large_world_skips_the_board() -> None:
    code, out, _ = _run("ring", "--ranks", "40")
    assert code == 0
    assert "no whiteboard beyond 32 ranks" in out
    assert "steps (latency term): 78" in out


def test_unknown_algorithm_and_op_are_one_line_errors() -> None:
    code, _, err = _run("butterfly")
    assert code == 2
    assert "unknown algorithm 'butterfly'" in err and "ring" in err and len(err.strip().splitlines()) == 1
    code, _, err = _run("ring", "--op", "scan")
    assert code == 2 and "unknown op 'scan'" in err


def test_op_the_algorithm_does_not_do() -> None:
    code, _, err = _run("recursive-doubling", "--op", "broadcast")
    assert code == 2
    assert "does not implement broadcast" in err


def test_bad_size_and_ranks() -> None:
    code, _, err = _run("ring", "--size", "lots")
    assert code == 2 and "not a byte count" in err
    code, _, err = _run("ring", "--size", "6", "--dtype", "float32")
    assert code == 2 and "multiple" in err
    code, _, err = _run("ring", "--ranks", "0")
    assert code == 2 and "--ranks" in err
    code, _, err = _run("ring", "--op", "broadcast", "--root", "5")
    assert code == 2 and "root 5" in err


def test_crossover_between_ring_and_direct() -> None:
    size = 1 << 20
    ring = schedule_stats(get_algorithm("ring").build(Op.ALL_REDUCE, 8, size // 4), 4)
    direct = schedule_stats(get_algorithm("direct").build(Op.ALL_REDUCE, 8, size // 4), 4)
    cross = crossover_bytes(ring, direct, size, alpha_us=5.0, link_gbps=10.0)
    assert cross is not None
    # 12 more steps at 5 us against (7 - 1.75)/1 bytes per byte saved at 10 GB/s: 60 us / 0.000525 us/B.
    assert abs(cross - 60.0 / (5.25 / 1e4)) < 1.0
    assert crossover_bytes(direct, direct, size, alpha_us=5.0, link_gbps=10.0) is None


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--link-gbps", "nan"], "--link-gbps"),
        (["--alpha-us", "nan"], "--alpha-us"),
        (["-s", "-1"], "--segments"),
        (["-r", "1000"], "--ranks"),
    ],
)
def test_explain_refuses_bad_numbers_in_one_line(args: list[str], names: str) -> None:
    result = CliRunner().invoke(app, ["explain", "tree", *args])
    assert result.exit_code == 2
    assert names in result.output

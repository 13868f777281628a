"""`collbench explain`: the whiteboard, the totals, JSON, and one-line errors for bad names."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.cli.explain import crossover_with_direct, estimate
from collbench.schedules.ops import Op


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
    assert "busiest rank over the whole schedule, sent or received: 1.33 MiB" in out
    # The price is the closed form fit and predict use: 2(p-1) steps, 2(p-1)/p of the buffer per port.
    assert "closed-form cost (what fit and predict use): 4 steps and 1.33 MiB through the busiest port" in out
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
    code, _, err = _run("ring", "--op", "prefix-max")
    assert code == 2 and "unknown op 'prefix-max'" in err


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
    # The closed forms at 8 ranks: ring all-reduce takes 14 steps and moves 2 x 7/8 = 1.75 bytes per byte
    # through each port; direct takes 2 steps and moves 14 bytes per byte through the root's port
    # (7 buffers in, then 7 out). 12 more steps at 5 us equal 12.25 bytes per byte at 10 GB/s:
    # 60 us / (12.25 / 1e4 us per byte) = 48,980 bytes.
    found = crossover_with_direct(Op.ALL_REDUCE, "ring", 8, 1, alpha_us=5.0, link_gbps=10.0)
    assert found is not None
    size, ring_faster_above = found
    assert abs(size - 60.0 / (12.25 / 1e4)) <= 1.0
    assert ring_faster_above
    at = estimate(Op.ALL_REDUCE, "ring", 8, 1 << 20, 1, alpha_us=5.0, link_gbps=10.0)
    assert (at.steps, at.port_bytes) == (14, 1.75 * (1 << 20))
    assert crossover_with_direct(Op.ALL_REDUCE, "direct", 8, 1, alpha_us=5.0, link_gbps=10.0) is None


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--link-gbps", "nan"], "--link-gbps"),
        (["--alpha-us", "nan"], "--alpha-us"),
        (["-s", "-1"], "--segments"),
        (["--ranks", "1000"], "--ranks"),
    ],
)
def test_explain_refuses_bad_numbers_in_one_line(args: list[str], names: str) -> None:
    result = CliRunner().invoke(app, ["explain", "tree", *args])
    assert result.exit_code == 2
    assert names in result.output


def test_hierarchical_says_where_it_can_be_seen() -> None:
    # explain draws one node; the schedule's own error pointed at a --topology explain does not take.
    code, out, err = _run("hierarchical", "--op", "all-reduce", "--ranks", "8")
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1
    assert "two or more nodes" in err and "predict --hierarchy K" in err and "sweep --topology" in err

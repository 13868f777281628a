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
    # It printed ~644245093755764.9 us for a message no rank holds.
    code, _, err = _run("ring", "--size", "999999999G")
    assert code == 2 and "--size 999999999G: sizes are below 2^50 bytes (1 PiB)" in err


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
        # '~inf us', and a 77-digit time cut at the 80th column.
        (["--alpha-us", "1e308"], "--alpha-us must be a number of us from 0 to 1,000,000, got 1e+308"),
        (["--link-gbps", "1e-300"], "--link-gbps must be a number of GB/s from 0.001 to 10,000, got 1e-300"),
        (["-s", "-1"], "--segments"),
        (["--ranks", "1000"], "--ranks"),
    ],
)
def test_explain_refuses_bad_numbers_in_one_line(args: list[str], names: str) -> None:
    result = CliRunner().invoke(app, ["explain", "tree", *args])
    assert result.exit_code == 2
    assert names in result.output


def test_hierarchical_says_where_it_can_be_seen() -> None:
    # Without --nodes explain has one node: the error names --nodes, and where it is priced and measured.
    code, out, err = _run("hierarchical", "--op", "all-reduce", "--ranks", "8")
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1
    assert "two or more nodes" in err and "--nodes M" in err
    assert "predict --hierarchy K" in err and "sweep --topology" in err


def test_hierarchical_drawn_on_nodes() -> None:
    # 3 nodes of 2: a ring inside each node (1 step), the two rings across nodes (2 + 2), inside again.
    code, out, _ = _run("hierarchical", "--ranks", "6", "--nodes", "3")
    assert code == 0, out
    assert "hierarchical all-reduce · 6 ranks" in out and "nodes 3" in out
    labels = [line.split(" · ", 1)[1] for line in out.splitlines() if line.startswith("step ")]
    assert labels == [
        "reduce-scatter inside 1/1",
        "reduce-scatter across 1/2",
        "reduce-scatter across 2/2",
        "all-gather across 1/2",
        "all-gather across 2/2",
        "all-gather inside 1/1",
    ]
    # Inside the second node (c, d) first: d adds c's half 3-5 of the buffer, c adds d's half 0-2.
    assert "c→d 3-5 (+)   d→c 0-2 (+)" in out
    assert "steps (latency term): 6" in out
    # The closed form priced on the same nodes: 2(k-1) + 2(m-1) steps, as the schedule has.
    assert "closed-form cost (what fit and predict use): 6 steps and" in out
    data = json.loads(_run("hierarchical", "--ranks", "6", "--nodes", "3", "--json")[1])
    assert data["nodes"] == 3 and data["totals"]["cost_steps"] == data["totals"]["steps"] == 6


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["hierarchical", "--ranks", "4", "--nodes", "1"], "on one node it is a ring"),
        (["hierarchical", "--ranks", "6", "--nodes", "4"], "does not split --ranks 6 into equal nodes"),
        (["ring", "--ranks", "4", "--nodes", "0"], "--nodes 0: explain needs at least 1 node"),
    ],
)
def test_nodes_refused_with_the_reason(args: list[str], names: str) -> None:
    code, out, err = _run(*args)
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and names in err


def test_counts_read_in_the_singular_and_plural() -> None:
    # "1 ranks", "1 element(s)", "2 step(s)" before.
    code, out, _ = _run("ring", "--ranks", "1")
    assert code == 0, out
    assert "ring all-reduce · 1 rank (a) · 1 element drawn · channels 1" in out
    assert "(all-reduce, 1 rank):" in out and "0 steps and 0 B" in out
    code, out, _ = _run("ring", "--ranks", "3")
    assert "3 ranks (a b c) · 3 elements drawn" in out and "vs direct (all through one root): 2 steps," in out
    code, out, _ = _run("dissemination", "--op", "barrier", "--ranks", "2")
    assert code == 0, out
    assert "(barrier, 2 ranks;" in out and "closed-form cost (what fit and predict use): 1 round" in out
    # Rabenseifner's all-gather half doubles what it exchanges: "exchange 1 block", then "2 blocks" (it
    # said "1-block(s)").
    code, out, _ = _run("rabenseifner", "--ranks", "8")
    assert code == 0, out
    assert "exchange 1 block\n" in out and "exchange 2 blocks" in out and "(s)" not in out


def test_the_header_says_the_elements_are_the_whiteboards() -> None:
    # 'ring all-reduce · 4 ranks (a b c d) · 4 elements' under --size 64M read as the message explained;
    # the elements are the drawing's (--count), the totals are for --size.
    code, out, _ = _run("ring", "--op", "all-reduce", "--ranks", "4", "--size", "64M")
    assert code == 0, out
    assert out.splitlines()[0] == "ring all-reduce · 4 ranks (a b c d) · 4 elements drawn · channels 1"
    assert "totals for 64 MiB of float32 (all-reduce, 4 ranks):" in out

"""`collbench explain` of all-to-all, scatter, gather, send/recv and barrier: what goes where per step,
input and output regions, the baseline they are set beside, and barrier without sizes."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from collbench.cli.app import app


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["explain", *args])
    return result.exit_code, result.stdout + result.stderr


def test_pairwise_all_to_all_draws_each_exchange_into_the_output_region() -> None:
    code, out = _run("pairwise", "--op", "all-to-all", "--ranks", "4")
    assert code == 0, out
    assert "pieces 0-3 are each rank's input" in out
    # Step 1: a copies its own block into its output and sends b's block into b's output slot for a.
    assert "step 1 · copy own block, exchange 1/3" in out
    assert "a→a 0→4" in out and "a→b 1→4" in out and "d→a 0→7" in out
    assert "step 3 · exchange 3/3" in out
    last = out[out.index("step 3") :]
    assert "a     a0     a1     a2     a3     a0     b0     c0     d0" in last
    assert "steps (latency term): 3" in out
    assert "768 KiB through the busiest port" in out
    assert "vs linear (every block straight to its rank, at once): 1 step" in out


def test_linear_all_to_all_is_its_own_baseline() -> None:
    code, out = _run("linear", "--op", "a2a", "--ranks", "3")
    assert code == 0, out
    assert "step 1 · copy own block, every block to its rank" in out
    assert "vs " not in out


def test_json_moves_say_where_each_block_was_read_and_landed() -> None:
    code, out = _run("bruck", "--op", "all-to-all", "--ranks", "3", "--json")
    assert code == 0, out
    data = json.loads(out)
    moves = data["whiteboard"]["steps"][0]["moves"]
    own = [m for m in moves if m["from"] == m["to"] == "a"]
    assert [(m["from_pieces"], m["pieces"]) for m in own] == [([0], [3])]
    assert data["direct"] is None and data["baseline"]["algo"] == "linear"
    assert data["totals"]["steps"] == 2


def test_scatter_and_gather_mark_the_root_and_move_blocks_in_place() -> None:
    code, out = _run("binomial", "--op", "scatter", "--ranks", "5", "--root", "2")
    assert code == 0, out
    assert "root c" in out and "c*    c0     c1     c2     c3     c4" in out
    assert "step 1 · hand a subtree its blocks 1/3" in out and "c→b 1" in out
    code, out = _run("linear", "--op", "gather", "--ranks", "3", "--root", "1", "--json")
    assert code == 0, out
    board = json.loads(out)["whiteboard"]
    assert board["steps"][-1]["holds"][1] == ["a0", "b1", "c2"]


def test_sendrecv_shifts_every_input_one_rank_along() -> None:
    code, out = _run("ring", "--op", "sendrecv", "--ranks", "3")
    assert code == 0, out
    assert "a→b 0→1   b→c 0→1   c→a 0→1" in out
    assert "piece 0 is each rank's input" in out
    assert "closed-form cost (what fit and predict use): 1 step and 1 MiB" in out


def test_barrier_has_rounds_and_no_sizes() -> None:
    code, out = _run("dissemination", "--op", "barrier", "--ranks", "5", "--size", "64M")
    assert code == 0, out
    assert "step 3 · round 3/3" in out and "a→b 0 (+)" in out
    assert "totals (barrier, 5 ranks; a barrier moves no data, so no sizes)" in out
    assert "rounds (latency term): 3" in out and "~15.0 us" in out
    assert "MiB" not in out and "vs " not in out
    code, out = _run("tree", "--op", "barrier", "--ranks", "6", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["totals"]["size_bytes"] == 0 and data["totals"]["total_bytes"] == 0
    assert data["whiteboard"]["steps"][-1]["holds"] == [["Σ0"]] * 6
    assert data["totals"]["steps"] == 4


def test_an_algorithm_that_does_not_do_the_op_says_so_in_one_line() -> None:
    code, out = _run("pairwise", "--op", "scatter")
    assert code == 2
    assert "pairwise does not implement scatter; it does: all-to-all" in out and "Traceback" not in out

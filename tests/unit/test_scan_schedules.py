"""Scan and exscan: the contract (ops.py, ir.py), the three builders' shapes and the verifier's
non-commutative order check.

The order check is tested on a real non-commutative reduction too: 2x2 matrix products, where
``A op B`` is ``A @ B``. Each schedule is run on concrete matrices by following ir.py's semantics
(sends read the step's starting buffer, receives apply at its end as ``incoming @ local``), and every
rank's result must equal the ordered product of the ranks' matrices (scan: 0..r, exscan: 0..r-1).
"""

from __future__ import annotations

import pytest

from collbench.schedules.ir import Recv, Schedule, Send, Step
from collbench.schedules.ops import Op, buffer_elems
from collbench.schedules.registry import algorithm_names, algorithms_for, get_algorithm
from collbench.schedules.verifier import ScheduleError, step_waves, verify

SCAN_ALGOS = ("linear", "recursive-doubling", "blelloch")

Matrix = tuple[int, int, int, int]


def _mul(a: Matrix, b: Matrix) -> Matrix:
    return (a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3])


def _x(rank: int) -> Matrix:
    # Upper triangular with distinct entries: products in another order give other matrices.
    return (1, rank + 1, 0, 2)


def _run_ordered(schedule: Schedule) -> list[list[Matrix | None]]:
    """Run ``schedule`` element by element on matrices, with every reducing receive as incoming @ local.

    Steps are taken in waves as the verifier does (a step runs when its partners' matching steps have
    been posted): the builders' rounds are global, so taking all ranks' k-th round together is a valid
    order for them (they never deadlock, checked by ``step_waves``)."""
    n, count = schedule.world_size, schedule.count
    extent = schedule.buffer_elems
    buf: list[list[Matrix | None]] = []
    for r in range(n):
        row: list[Matrix | None] = [None] * extent
        for i in range(count):
            row[i] = _x(r)
        buf.append(row)
    waves = step_waves(schedule)
    last = max((w for rank in waves for w in rank), default=-1)
    for wave in range(last + 1):
        running = [(r, s) for r in range(n) for s, w in enumerate(waves[r]) if w == wave]
        sent: dict[tuple[int, int], list[list[Matrix | None]]] = {}
        for r, s in running:
            for t in schedule.steps[r][s].sends:
                sent.setdefault((r, t.peer), []).append(buf[r][t.start : t.stop])
        for r, s in running:
            for rcv in schedule.steps[r][s].recvs:
                data = sent[(rcv.peer, r)].pop(0)
                for i, value in enumerate(data):
                    here = buf[r][rcv.start + i]
                    if rcv.reduce:
                        assert value is not None and here is not None
                        buf[r][rcv.start + i] = _mul(value, here)
                    else:
                        buf[r][rcv.start + i] = value
    return buf


def _product(ranks: range) -> Matrix:
    out: Matrix = (1, 0, 0, 1)
    for r in ranks:
        out = _mul(out, _x(r))
    return out


def test_the_ops_contract() -> None:
    assert Op.parse("prefix-sum") is Op.SCAN and Op.parse("exclusive_scan") is Op.EXSCAN
    assert Op.SCAN.spec.reduces and Op.SCAN.spec.ordered and not Op.SCAN.spec.out_of_place
    assert Op.EXSCAN.spec.out_of_place and buffer_elems(Op.EXSCAN, 10) == 20
    assert not Op.SCAN.spec.nccl_tuned and not Op.EXSCAN.spec.nccl_tuned
    assert Op.SCAN.spec.busbw_factor(8) == 1.0
    assert {s.name for s in algorithms_for(Op.SCAN)} == {*SCAN_ALGOS, "native"}
    assert {s.name for s in algorithms_for(Op.EXSCAN)} == {*SCAN_ALGOS, "native"}


@pytest.mark.parametrize("algo", SCAN_ALGOS)
@pytest.mark.parametrize("op", [Op.SCAN, Op.EXSCAN])
def test_non_commutative_products_come_out_in_rank_order(algo: str, op: Op) -> None:
    for n in range(1, 18):
        for count in (1, 3):
            schedule = get_algorithm(algo).build(op, n, count)
            verify(schedule)
            buf = _run_ordered(schedule)
            for r in range(n):
                if op is Op.SCAN:
                    assert buf[r][:count] == [_product(range(r + 1))] * count, (n, r)
                elif r == 0:
                    # MPI leaves exscan's rank 0 output undefined: collbench never writes it.
                    assert buf[r][count:] == [None] * count
                else:
                    assert buf[r][count:] == [_product(range(r))] * count, (n, r)
                if op is Op.EXSCAN:
                    assert buf[r][:count] == [_x(r)] * count, "the input is left as it was"


def _swap_order(schedule: Schedule) -> Schedule:
    """Rank 1 sends its data to rank 0 and rank 0 combines it, the reverse of rank order."""
    steps = [list(s) for s in schedule.steps]
    steps[1] = [Step(sends=(Send(0, 0, schedule.count),))]
    steps[0] = [Step(recvs=(Recv(1, 0, schedule.count, True),))]
    return Schedule(Op.SCAN, "bad", 2, schedule.count, tuple(tuple(s) for s in steps))


def test_a_combination_out_of_rank_order_is_caught() -> None:
    # Ranks {1} put before {0}: the set is the right one, the order is not (for A @ B).
    with pytest.raises(ScheduleError, match="not a prefix in rank order"):
        verify(_swap_order(get_algorithm("linear").build(Op.SCAN, 2, 4)))


def test_a_gap_in_the_prefix_is_caught() -> None:
    # Rank 0 sends straight to rank 2: ranks {0} and {2} combined, skipping rank 1.
    steps = (
        (Step(sends=(Send(2, 0, 3),)), Step(sends=(Send(1, 0, 3),))),
        (Step(recvs=(Recv(0, 0, 3, True),)),),
        (Step(recvs=(Recv(0, 0, 3, True),)),),
    )
    with pytest.raises(ScheduleError, match="not a prefix in rank order"):
        verify(Schedule(Op.SCAN, "bad", 3, 3, steps))


def test_a_scan_that_stops_short_is_caught() -> None:
    schedule = get_algorithm("recursive-doubling").build(Op.SCAN, 5, 4)
    cut = tuple(steps[:1] for steps in schedule.steps)
    with pytest.raises(ScheduleError, match="needs the contributions of ranks"):
        verify(Schedule(Op.SCAN, "cut", 5, 4, cut))


def test_writing_exscans_rank_0_output_is_caught() -> None:
    # Rank 1 sends its input into rank 0's output: MPI leaves it undefined, collbench leaves it alone.
    good = get_algorithm("linear").build(Op.EXSCAN, 2, 2)
    steps = [list(s) for s in good.steps]
    steps[1].append(Step(sends=(Send(0, 0, 2),)))
    steps[0].append(Step(recvs=(Recv(1, 2, 4, False),)))
    with pytest.raises(ScheduleError, match="rank 0 element 2"):
        verify(Schedule(Op.EXSCAN, "bad", 2, 2, tuple(tuple(s) for s in steps)))


@pytest.mark.parametrize(
    ("algo", "n", "steps"),
    [
        ("linear", 8, 7),
        ("recursive-doubling", 8, 3),
        ("recursive-doubling", 9, 4),
        ("blelloch", 8, 5),  # 3 up, 2 down: 2 log2 n - 1
        ("blelloch", 16, 7),
    ],
)
def test_step_counts(algo: str, n: int, steps: int) -> None:
    assert get_algorithm(algo).build(Op.SCAN, n, 16).num_steps <= steps
    assert 1 + max(w for rank in step_waves(get_algorithm(algo).build(Op.SCAN, n, 16)) for w in rank) == steps


def test_blelloch_combines_less_than_doubling() -> None:
    """Blelloch's reason: fewer than 2n combinations in all, against doubling's about n log2 n."""

    def combinations(algo: str, n: int) -> int:
        schedule = get_algorithm(algo).build(Op.SCAN, n, 1)
        return sum(1 for steps in schedule.steps for step in steps for rcv in step.recvs if rcv.reduce)

    for n in (8, 16, 64, 100):
        assert combinations("blelloch", n) < 2 * n
    assert combinations("recursive-doubling", 64) == sum(64 - (1 << k) for k in range(6))
    assert combinations("blelloch", 64) * 2 < combinations("recursive-doubling", 64)


def test_every_scan_algorithm_is_registered() -> None:
    assert set(SCAN_ALGOS) <= set(algorithm_names())

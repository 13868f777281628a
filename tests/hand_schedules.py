"""Schedules of the newer ops written out by hand for the executor's tests, each proved by the verifier.

They exercise what the executor must do for those ops whatever builders the registry holds: a buffer
of input then output (all-to-all, send/recv), a transfer to oneself (a local copy, all-to-all's own
block and send/recv on one rank), rooted blocks (scatter, gather) and barrier's one-element tokens.
They are the plainest shapes (every transfer in one step; dissemination for barrier), not the
algorithms collbench measures, which live in ``collbench/schedules/algorithms``.
"""

from __future__ import annotations

from collbench.schedules.algorithms._common import RoundBuilder
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op, block_bounds
from collbench.schedules.verifier import verify

HAND_OPS = (Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER, Op.SENDRECV, Op.BARRIER)


def hand_schedule(op: Op, world_size: int, count: int, *, root: int = 0) -> Schedule:
    """The op's one-step (or, for barrier, dissemination) schedule on ``world_size`` ranks, verified."""
    n = world_size
    b = RoundBuilder(n)
    blocks = block_bounds(count, n)
    if op is Op.ALL_TO_ALL:
        for r in range(n):
            for j, (lo, hi) in enumerate(blocks):
                # Rank r's input block j goes to output block r of rank j (itself when j == r).
                b.transfer(0, r, j, lo, hi, reduce=False, label="exchange", dst_start=count + blocks[r][0])
    elif op is Op.SCATTER:
        for j, (lo, hi) in enumerate(blocks):
            if j != root:
                b.transfer(0, root, j, lo, hi, reduce=False, label="scatter")
    elif op is Op.GATHER:
        for j, (lo, hi) in enumerate(blocks):
            if j != root:
                b.transfer(0, j, root, lo, hi, reduce=False, label="gather")
    elif op is Op.SENDRECV:
        for r in range(n):
            b.transfer(0, r, (r + 1) % n, 0, count, reduce=False, label="shift", dst_start=count)
    elif op is Op.BARRIER:
        count = 0
        distance, rnd = 1, 0
        while distance < n:
            for r in range(n):
                b.transfer(rnd, r, (r + distance) % n, 0, 1, reduce=True, label="notify")
            distance, rnd = distance * 2, rnd + 1
    else:
        raise ValueError(f"no hand-written schedule for {op.value}")
    schedule = b.build(op, "hand", count, root=root)
    verify(schedule)
    return schedule


def corrupted_schedule(op: Op, world_size: int, count: int, *, root: int = 0) -> Schedule:
    """A wrong all-to-all or gather the data check must catch: every block lands at its sender's place
    rather than the receiver's (all-to-all), or the root files rank j's block under rank j+1 (gather).
    Not verified (the verifier refuses it); needs at least 2 ranks."""
    n = world_size
    b = RoundBuilder(n)
    blocks = block_bounds(count, n)
    if op is Op.ALL_TO_ALL:
        for r in range(n):
            for j, (lo, hi) in enumerate(blocks):
                b.transfer(0, r, j, lo, hi, reduce=False, label="exchange", dst_start=count + lo)
    elif op is Op.GATHER:
        for j, (lo, hi) in enumerate(blocks):
            if j != root:
                dst = blocks[(j + 1) % n][0]
                b.transfer(0, j, root, lo, hi, reduce=False, label="gather", dst_start=dst)
    else:
        raise ValueError(f"no corrupted schedule for {op.value}")
    return b.build(op, "corrupted", count, root=root)

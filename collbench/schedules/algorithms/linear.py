"""``linear``: every block straight to the rank that needs it, all in one step.

* all-to-all: every rank posts its n-1 sends and n-1 receives at once and copies its own block into
  its output, as NCCL's grouped ``ncclSend``/``ncclRecv`` (nccl-tests' ``alltoall.cu``), gloo's
  ``alltoall.cc`` and Open MPI's ``alltoall_intra_basic_linear`` do;
* scatter: the root sends block r to rank r; gather: rank r sends block r to the root (Open MPI's
  ``basic_linear``, gloo's ``scatter.cc``/``gather.cc``).

Scan and exscan: the chain of ``scan.py`` (Open MPI's ``scan_intra_linear``).

One step (the least latency), but n-1 messages through each port (the root's, for scatter and
gather). The name is Open MPI's and MPICH's for these; ``one-shot`` is the same idea for the five
reductions and gathers, whose data is not in blocks, and ``direct`` goes through a root, which an
all-to-all does not need.
"""

from __future__ import annotations

from collections.abc import Callable

from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, layout_name
from collbench.schedules.algorithms.one_shot import ONE_SHOT
from collbench.schedules.algorithms.scan import build_scan, chain_exscan_cost, chain_scan_cost
from collbench.schedules.cost import CostFormulas, CostTerms
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import SCAN_OPS, Op, block_bounds
from collbench.schedules.spec import AlgorithmSpec

Step = Callable[[RoundBuilder, int, int, list[tuple[int, int]]], None]
"""An op's one step: (builder, root, count, each rank's block)."""


def _all_to_all(b: RoundBuilder, root: int, count: int, blocks: list[tuple[int, int]]) -> None:
    # The pairs that touch a kept rank: 2n - 1 in a one-rank build, its own block's copy once.
    for src, dst in b.pairs(b.world_size):
        # src's input block dst becomes dst's output block src.
        label = "copy own block" if src == dst else "every block to its rank"
        b.transfer(0, src, dst, *blocks[dst], reduce=False, label=label, dst_start=count + blocks[src][0])


def _scatter(b: RoundBuilder, root: int, count: int, blocks: list[tuple[int, int]]) -> None:
    for r in b.spokes(root, range(b.world_size)):
        if r != root:
            b.transfer(0, root, r, *blocks[r], reduce=False, label="root sends each rank its block")


def _gather(b: RoundBuilder, root: int, count: int, blocks: list[tuple[int, int]]) -> None:
    for r in b.spokes(root, range(b.world_size)):
        if r != root:
            b.transfer(0, r, root, *blocks[r], reduce=False, label="every block to the root")


_STEPS: dict[Op, Step] = {Op.ALL_TO_ALL: _all_to_all, Op.SCATTER: _scatter, Op.GATHER: _gather}
"""The block ops linear does in one step; scan and exscan are ``scan.py``'s chain (their own builder)."""


def build_linear(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """One step: all-to-all's every pair (own block a local copy), or scatter's and gather's root to or
    from every rank. Any world size; a count that does not divide leaves its tail out (``op_count``).
    Scan and exscan: the chain of ``scan.py``."""
    check_count_and_segments(count, segments)
    step = _STEPS.get(op)
    if step is None:
        return build_scan("linear", op, world_size, count, layout, rank)
    b = RoundBuilder(world_size, rank)
    step(b, root, count, block_bounds(count, world_size))
    return b.build(op, "linear", count, root=root, layout=layout_name(layout))


# -- closed-form costs (p ranks, n bytes, k segments) ----------------------------------------------


def _blocks_at_once_cost(p: int, n: float, k: int) -> CostTerms:
    # One step; the busiest port (every rank's for all-to-all, the root's for scatter and gather) moves
    # p-1 blocks of n/p, one message each. The own block is a local copy, off the network.
    return CostTerms(1.0, (p - 1) / p * n, 0.0, float(p - 1))


LINEAR = AlgorithmSpec(
    name="linear",
    ops=frozenset(_STEPS) | SCAN_OPS,
    builder=build_linear,
    summary="every block straight to its rank in one step (grouped send/recv): n-1 messages per port; "
    "scan: a chain, n-1 steps",
    costs=CostFormulas(
        # The five reductions and gathers done "every pair at once" are one-shot's exchange.
        all_reduce=ONE_SHOT.costs.all_reduce,
        reduce_scatter=ONE_SHOT.costs.reduce_scatter,
        all_gather=ONE_SHOT.costs.all_gather,
        broadcast=ONE_SHOT.costs.broadcast,
        reduce=ONE_SHOT.costs.reduce,
        all_to_all=_blocks_at_once_cost,
        scatter=_blocks_at_once_cost,
        gather=_blocks_at_once_cost,
        scan=chain_scan_cost,
        exscan=chain_exscan_cost,
    ),
)

SPECS: tuple[AlgorithmSpec, ...] = (LINEAR,)

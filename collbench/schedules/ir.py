"""The schedule IR: what every rank does, step by step.

Every rank works on one buffer of ``count`` elements (see ``ops.py`` for what ``count`` means per op):

* all-reduce: starts as the rank's input, must end as the reduction over ranks, everywhere;
* reduce-scatter: starts as the full input; rank r's chunk ``chunk_bounds(count, n)[r]`` must end reduced;
* all-gather: rank r starts holding only its own chunk; every chunk must end present everywhere;
* broadcast: the root's buffer must end everywhere;
* reduce: the root's buffer must end as the reduction over ranks;
* scatter: the root holds ``n`` blocks (``ops.block_bounds``); rank r must end with block r of the root's
  buffer at the same place (nccl-tests' in-place scatter);
* gather: rank r starts with its block r; the root must end with every rank's block in place;
* all-to-all: the buffer is ``2 * count`` elements, the input at [0, count), the output after it; rank
  r's output block j must end as rank j's input block r;
* send/recv: the buffer is ``2 * count``, input then output; rank r's output must end as rank r-1's
  input (a ring shift, as nccl-tests' ``sendrecv.cu``);
* scan: rank r's buffer must end as ``x_0 op ... op x_r``, in that order (the op need not commute);
* exscan: the buffer is ``2 * count``, input then output; rank r >= 1's output must end as
  ``x_0 op ... op x_(r-1)``; rank 0's output is never written (MPI leaves it undefined); the input
  region is the schedule's to use (as bruck's all-to-all uses it);
* barrier: a one-element token (count 0, nothing checked); every rank's last step must come after
  every rank's first, which a transfer carries as "has heard from": a receive with ``reduce`` merges
  what the sender has heard, as a reduction would, but counts nobody twice.

A step is a set of transfers that a rank posts together and waits for together (one batched
isend/irecv). Semantics, which the verifier, the executor and the simulator all share:

* every send of a step reads the rank's buffer as it is when the step starts;
* every receive of a step lands in a scratch buffer and is applied (copied, or reduced into the buffer)
  when the step ends, in the order listed;
* the k-th send from rank a to rank b matches the k-th receive on b from a (FIFO per ordered pair),
  and both name the same number of elements.

For scan and exscan, a receive with ``reduce`` puts the incoming data first: the result is
``incoming op local``, the lower ranks' data before the higher ones'. The verifier holds every such
receive to bring the ranks just below the ones already there; for the commutative reductions the
executor runs (sum, prod, min, max, avg) the order changes nothing, but a schedule that passes holds
for any associative op.

A receive may place data at a different offset than the sender read it from (``Recv.start``), which
algorithms that pack chunks need; most keep the same offsets.

A rank may send to itself: a local copy (all-to-all's own block). Its send and receive are in the same
step, and it follows the same semantics (the data is read when the step starts, written at its end);
the executor copies, and the simulator charges no link for it.

A schedule is built whole (``rank`` None: every rank's steps, what the verifier, the simulators and
``explain`` read) or for one rank (``rank`` r: only rank r's steps, what the rank that runs it needs;
see ``algorithms/_common.py``). In a one-rank schedule every other rank's steps are absent: their
entries of ``steps`` are empty tuples that say nothing about that rank, so whatever reads more than
rank r's steps (the verifier, the simulators) refuses one. A rank's part of the whole build,
``whole.for_rank(r)``, equals the one-rank build for r, step for step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from collbench.schedules.ops import Op, buffer_elems


@dataclass(frozen=True, slots=True)
class _Transfer:
    """What a send and a receive share: the peer and the elements ``[start, stop)`` of the buffer."""

    peer: int
    start: int
    stop: int

    def __post_init__(self) -> None:
        assert 0 <= self.start <= self.stop, f"bad range [{self.start}, {self.stop})"

    @property
    def count(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True, slots=True)
class Send(_Transfer):
    """Send ``buffer[start:stop]`` to ``peer``."""


@dataclass(frozen=True, slots=True)
class Recv(_Transfer):
    """Receive ``stop - start`` elements from ``peer`` into ``buffer[start:stop]``.

    ``reduce`` True combines them with what is there (the op's reduction), False overwrites.
    """

    reduce: bool


@dataclass(frozen=True, slots=True)
class Step:
    sends: tuple[Send, ...] = ()
    recvs: tuple[Recv, ...] = ()
    label: str = ""
    """What the step does, for ``collbench explain`` (``reduce-scatter 1/3``)."""

    @property
    def is_empty(self) -> bool:
        return not self.sends and not self.recvs


@dataclass(frozen=True, slots=True)
class Schedule:
    """Steps per rank for one collective call. ``steps[r]`` is rank r's ordered list of steps."""

    op: Op
    algo: str
    world_size: int
    count: int
    steps: tuple[tuple[Step, ...], ...]
    root: int = 0
    layout: str = "rank-order"
    """The name of the layout the builder used (``rank-order``, ``topology``...)."""
    params: tuple[tuple[str, int], ...] = field(default=())
    """Builder parameters that shaped it (segments, channels)."""
    rank: int | None = None
    """None: every rank's steps (the whole build). A rank: only that rank's steps were built; the
    others' are absent (empty, see the module docstring)."""

    def __post_init__(self) -> None:
        assert len(self.steps) == self.world_size, "one list of steps per rank"
        assert 0 <= self.root < max(self.world_size, 1), "root must be a rank"
        assert self.rank is None or 0 <= self.rank < self.world_size, "a one-rank schedule's rank is a rank"

    def for_rank(self, rank: int) -> Schedule:
        """Rank ``rank``'s part of this schedule: its steps only, as the one-rank build gives them."""
        assert self.rank in (None, rank), f"built for rank {self.rank}, not {rank}"
        return dataclasses.replace(self, steps=only_steps(self.world_size, rank, self.steps[rank]), rank=rank)

    def require_whole(self, reader: str) -> None:
        """Raise ValueError when this is a one-rank schedule: ``reader`` needs every rank's steps."""
        if self.rank is not None:
            raise ValueError(f"{reader} needs every rank's steps; this {self.algo} schedule holds rank {self.rank}'s")

    @property
    def buffer_elems(self) -> int:
        """Elements of each rank's buffer: ``count``, twice that for the out-of-place ops, 1 for barrier."""
        return buffer_elems(self.op, self.count)

    @property
    def num_steps(self) -> int:
        """The longest rank's step count: the latency term (the rank's own in a one-rank schedule)."""
        return max((len(s) for s in self.steps), default=0)

    def elements_sent(self, rank: int) -> int:
        """Elements ``rank`` sends to other ranks (local copies excluded)."""
        return sum(send.count for step in self.steps[rank] for send in step.sends if send.peer != rank)

    def elements_received(self, rank: int) -> int:
        """Elements ``rank`` receives from other ranks (local copies excluded)."""
        return sum(recv.count for step in self.steps[rank] for recv in step.recvs if recv.peer != rank)


def only_steps(world_size: int, rank: int, steps: tuple[Step, ...]) -> tuple[tuple[Step, ...], ...]:
    """``Schedule.steps`` of a one-rank schedule: ``steps`` at ``rank``, nothing elsewhere (O(world) refs)."""
    empty: tuple[Step, ...] = ()
    return (empty,) * rank + (steps,) + (empty,) * (world_size - rank - 1)

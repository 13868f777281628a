"""Runs a schedule (collbench.schedules.ir) on torch.distributed point-to-point.

Per step, a rank posts its sends and receives as one batch (``batch_isend_irecv``), waits, then applies
the receives in the order listed: copied into its buffer, or reduced into it. Receives land in scratch
memory, except copies that nothing else in the step touches, which land in the buffer directly.

Large transfers are cut into segments of ``segment_bytes``, at most :data:`MAX_TRANSFER_SEGMENTS` per
transfer (a larger segment where more would be needed). When a step's receives write nowhere its
sends read (ring steps, for instance), all segments are posted at once and each is reduced as soon as
it lands, so the transport moves later segments while the CPU (or GPU) reduces earlier ones. Steps
whose receives overwrite what they send (recursive doubling exchanges) are posted whole: the IR says
sends read the buffer as it was when the step began, so nothing may be reduced before they are done.

A transfer a rank sends to itself (all-to-all's own block) is a local copy, never a torch.distributed
message: as the IR says, its source is read when the step starts and its destination written when the
step ends. It is copied when the step is posted, straight to its destination when, like a receive
landing in place, nothing else in the step reads or writes there, else into scratch that is applied
with the step's other receives, in their order.

A plan (which segments, which scratch) is compiled once per schedule and rank by ``ScheduleRunner``
and reused across iterations, so timed iterations allocate nothing.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.distributed as dist

from collbench.runtime.executor.reduce import divide_exactly, reduce_many
from collbench.runtime.executor.segments import DEFAULT_SEGMENT_BYTES
from collbench.schedules.contracts import contract
from collbench.schedules.ir import Schedule, Step
from collbench.schedules.ops import Op, buffer_elems

MAX_TRANSFER_SEGMENTS = 1024
"""The most segments one transfer is cut into: each is a posted message and a plan entry, so a tiny
``segment_bytes`` (4 bytes at 16 MiB would be 4 M of them) costs minutes and gigabytes to compile
and run. 1024 segments of the default 4 MiB reach 4 GiB transfers; beyond that segments grow."""


def transfer_segment_elems(longest_elems: int, segment_elems: int) -> int:
    """The segment (elements) a transfer of ``longest_elems`` is cut into: ``segment_elems``, or
    larger when that would make more than :data:`MAX_TRANSFER_SEGMENTS` segments."""
    return max(segment_elems, -(-longest_elems // MAX_TRANSFER_SEGMENTS), 1)


def default_segment_bytes(device: torch.device | str) -> int:
    """The executor's segment size for tensors on ``device``, in bytes."""
    return DEFAULT_SEGMENT_BYTES.get(torch.device(device).type, 1 << 20)


@dataclass(frozen=True, slots=True)
class _SendSeg:
    peer: int
    start: int
    stop: int


@dataclass(frozen=True, slots=True)
class _RecvSeg:
    peer: int
    start: int
    stop: int
    reduce: bool
    scratch: int
    """Offset in the scratch buffer, or -1 when the segment lands in the buffer itself."""
    source: int = -1
    """For a local copy (``peer`` is the rank itself): where in the buffer its data is read from when
    the step is posted; -1 for a receive from another rank."""


@dataclass(frozen=True, slots=True)
class _Round:
    sends: tuple[_SendSeg, ...]
    recvs: tuple[_RecvSeg, ...]


@dataclass(frozen=True, slots=True)
class _StepPlan:
    rounds: tuple[_Round, ...]
    pipelined: bool
    """True: rounds (one segment of each transfer) are applied one by one as they land. False: one round."""


def overlaps_another(ranges: Sequence[tuple[int, int]]) -> list[bool]:
    """For each of ``ranges`` (non-empty ``[start, stop)``): whether it overlaps another of them.

    O(k log k), not the O(k^2) of comparing every pair: a one-shot or bruck step at 16,384 ranks holds
    thousands of transfers (every pair was 12-133 s of compiling). Sorted by start, a range overlaps
    an earlier one when the furthest stop before it passes its start, and a later one when the next
    start falls before its stop.
    """
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    out = [False] * len(ranges)
    furthest = -1  # starts are >= 0
    for pos, i in enumerate(order):
        start, stop = ranges[i]
        later = pos + 1 < len(order) and ranges[order[pos + 1]][0] < stop
        out[i] = furthest > start or later
        furthest = max(furthest, stop)
    return out


def meets(xs: Sequence[tuple[int, int]], ys: Sequence[tuple[int, int]]) -> bool:
    """Whether a range of ``xs`` overlaps a range of ``ys`` (all non-empty), in O(k log k): in order of
    start, a range meets the other side when that side's furthest stop so far passes its start."""
    furthest = [-1, -1]
    for start, stop, side in sorted([(a, z, 0) for a, z in xs] + [(a, z, 1) for a, z in ys]):
        if furthest[1 - side] > start:
            return True
        furthest[side] = max(furthest[side], stop)
    return False


def _segments(start: int, stop: int, seg_elems: int) -> list[tuple[int, int]]:
    return [(s, min(s + seg_elems, stop)) for s in range(start, stop, seg_elems)]


def _lands_in_place(step: Step) -> list[bool]:
    """For each non-empty receive of ``step``: whether it lands in the buffer itself (no scratch).

    A copy that no send reads and no other receive writes can land in place: no scratch, no copy.
    """
    sends = [s for s in step.sends if s.count > 0]
    recvs = [r for r in step.recvs if r.count > 0]
    ranges = [(r.start, r.stop) for r in recvs] + [(s.start, s.stop) for s in sends]
    crossed = overlaps_another(ranges)
    return [not r.reduce and not crossed[i] for i, r in enumerate(recvs)]


def _run_steps(schedule: Schedule, rank: int) -> tuple[Step, ...]:
    """``rank``'s steps as the executor runs them. A barrier's token carries no data (nothing reads
    it): its receives that merge "has heard from" (``reduce``) land as plain copies, so a barrier
    reduces nothing (on GPUs it would load the reduction kernels for one meaningless element)."""
    steps = schedule.steps[rank]
    if schedule.op.spec.payload:
        return steps
    return tuple(
        dataclasses.replace(step, recvs=tuple(dataclasses.replace(r, reduce=False) for r in step.recvs))
        for step in steps
    )


def scratch_elems(schedule: Schedule, rank: int) -> int:
    """Elements of scratch ``rank`` of ``schedule`` allocates: what :class:`ScheduleRunner` compiles,
    found without cutting anything into segments (segments of a receive add up to its count), so
    its cost depends on the schedule's transfers, not on the message or segment size."""
    most = 0
    for step in _run_steps(schedule, rank):
        recvs = [r for r in step.recvs if r.count > 0]
        most = max(most, sum(r.count for r, direct in zip(recvs, _lands_in_place(step), strict=True) if not direct))
    return most


def _local_sources(step: Step, rank: int) -> list[int]:
    """For each non-empty receive of ``step``: where a local copy reads from (the k-th send to itself
    matches the k-th receive from itself, as any pair of ranks' transfers match), -1 for the others."""
    own_sends = [s for s in step.sends if s.count > 0 and s.peer == rank]
    recvs = [r for r in step.recvs if r.count > 0]
    own_recvs = [r for r in recvs if r.peer == rank]
    if len(own_sends) != len(own_recvs) or any(s.count != r.count for s, r in zip(own_sends, own_recvs, strict=True)):
        raise ValueError(
            f"rank {rank}'s local copies do not pair up: {len(own_sends)} sends, {len(own_recvs)} receives"
        )
    pending = iter(own_sends)
    return [next(pending).start if r.peer == rank else -1 for r in recvs]


def _compile_step(step: Step, seg_elems: int, rank: int) -> tuple[_StepPlan, int]:
    """The step's plan and the scratch elements it needs."""
    sends = [s for s in step.sends if s.count > 0]
    recvs = [r for r in step.recvs if r.count > 0]
    sources = _local_sources(step, rank)
    send_ranges = [(s.start, s.stop) for s in sends]
    recv_ranges = [(r.start, r.stop) for r in recvs]
    in_place = _lands_in_place(step)
    writes_what_it_sends = meets(recv_ranges, send_ranges)
    # Two receives into one place are ordered unless both reduce (a copy among them must land in turn).
    ordered_recvs = any(
        not r.reduce and crossed for r, crossed in zip(recvs, overlaps_another(recv_ranges), strict=True)
    )
    # Segmenting changes the order receives are applied in; only order-free steps are pipelined.
    pipelined = not writes_what_it_sends and not ordered_recvs
    longest = max([t.count for t in sends] + [t.count for t in recvs], default=0)
    seg_elems = transfer_segment_elems(longest, seg_elems)
    if not pipelined or longest <= seg_elems:
        seg_elems = max(longest, 1)
        pipelined = False

    scratch = 0
    recv_segs: list[list[_RecvSeg]] = []
    for r, direct, source in zip(recvs, in_place, sources, strict=True):
        segs: list[_RecvSeg] = []
        for a, b in _segments(r.start, r.stop, seg_elems):
            src = -1 if source < 0 else source + (a - r.start)
            segs.append(_RecvSeg(r.peer, a, b, r.reduce, -1 if direct else scratch, src))
            if not direct:
                scratch += b - a
        recv_segs.append(segs)
    # A send to itself is the local copy's read, made by its receive: no message.
    send_segs = [
        [_SendSeg(s.peer, a, b) for a, b in _segments(s.start, s.stop, seg_elems)] for s in sends if s.peer != rank
    ]
    n_rounds = max([len(x) for x in send_segs] + [len(x) for x in recv_segs], default=0)
    rounds = tuple(
        _Round(
            sends=tuple(x[k] for x in send_segs if k < len(x)),
            recvs=tuple(x[k] for x in recv_segs if k < len(x)),
        )
        for k in range(n_rounds)
    )
    return _StepPlan(rounds, pipelined), scratch


def _landing(r: _RecvSeg, buffer: torch.Tensor, scratch: torch.Tensor) -> torch.Tensor:
    """Where receive segment ``r`` lands: its place in the buffer, or its scratch."""
    return buffer[r.start : r.stop] if r.scratch < 0 else scratch[r.scratch : r.scratch + r.stop - r.start]


@dataclass(frozen=True, slots=True)
class CompiledPlan:
    """One rank's schedule compiled for buffers of one element size: which segments each step posts
    and where each lands. It holds no tensor and no group, so one plan serves any group of its size
    and any dtype of its element size (``plan_cache.py`` keeps plans for the life of the process)."""

    op: Op
    world_size: int
    count: int
    root: int
    rank: int
    steps: tuple[_StepPlan, ...]
    scratch_elems: int
    """Elements of scratch a runner of this plan allocates on its first run."""

    @property
    def buffer_elems(self) -> int:
        return buffer_elems(self.op, self.count)


def compile_plan(
    schedule: Schedule,
    *,
    rank: int,
    segment_bytes: int | None = None,
    elem_bytes: int,
    device: torch.device | str = "cpu",
) -> CompiledPlan:
    """``rank``'s steps of ``schedule`` (a whole or a one-rank build) compiled for ``elem_bytes``-byte
    elements cut in segments of ``segment_bytes`` (default: per device type). Raises ValueError for a
    rank outside the schedule or a segment smaller than one element."""
    if not 0 <= rank < schedule.world_size:
        raise ValueError(f"rank {rank} is not in a schedule for {schedule.world_size} ranks")
    if segment_bytes is None:
        segment_bytes = default_segment_bytes(device)
    if segment_bytes < elem_bytes:
        raise ValueError(f"segment of {segment_bytes} bytes is smaller than one element ({elem_bytes} bytes)")
    if schedule.rank not in (None, rank):
        raise ValueError(f"the schedule holds rank {schedule.rank}'s steps, not rank {rank}'s")
    seg_elems = segment_bytes // elem_bytes
    if schedule.op.spec.ordered:
        # A scan's step may send a range to one peer while reducing another's into it (Hillis-Steele,
        # Blelloch): that step is sent whole, and the peer it sends to, whose own step would pipeline,
        # must then receive it whole too. Each rank decides per step, so scans are never cut at all:
        # both ends of every transfer agree without looking at each other's steps.
        seg_elems = max(schedule.buffer_elems, 1)
    compiled = [_compile_step(step, seg_elems, rank) for step in _run_steps(schedule, rank)]
    return CompiledPlan(
        op=schedule.op,
        world_size=schedule.world_size,
        count=schedule.count,
        root=schedule.root,
        rank=rank,
        steps=tuple(p for p, _ in compiled),
        scratch_elems=max((s for _, s in compiled), default=0),
    )


# What a plan's Python objects take, for the cache's bound (plan_cache.py): an entry's own size and
# its fields' ints, counted as large ints (small ones are shared, so this errs towards too much).
_INT_BYTES = sys.getsizeof(1 << 40)
_SEND_BYTES = sys.getsizeof(_SendSeg(0, 0, 0)) + 3 * _INT_BYTES
_RECV_BYTES = sys.getsizeof(_RecvSeg(0, 0, 0, False, 0, 0)) + 5 * _INT_BYTES
_ROUND_BYTES = sys.getsizeof(_Round((), ()))
_STEP_BYTES = sys.getsizeof(_StepPlan((), False))


def _tuple_bytes(items: int) -> int:
    return sys.getsizeof(()) + 8 * items


def plan_bytes(plan: CompiledPlan) -> int:
    """Bytes of host memory ``plan``'s objects take (an estimate from above; O(its entries))."""
    total = sys.getsizeof(plan) + _tuple_bytes(len(plan.steps))
    for step in plan.steps:
        total += _STEP_BYTES + _tuple_bytes(len(step.rounds))
        for rnd in step.rounds:
            total += _ROUND_BYTES + _tuple_bytes(len(rnd.sends)) + _tuple_bytes(len(rnd.recvs))
            total += len(rnd.sends) * _SEND_BYTES + len(rnd.recvs) * _RECV_BYTES
    return total


class ScheduleRunner:
    """One rank's compiled schedule: call ``run(buffer, redop)`` once per collective call.

    ``rank`` is this process's rank in ``group`` (the schedule's ranks are ranks of ``group``;
    None is the default group). ``schedule`` is the whole build or this rank's one-rank build
    (ir.py), which is all a rank needs; one built for another rank is a ValueError. Scratch memory
    is allocated once, on the first run. A schedule compiles here; :meth:`of_plan` runs a plan
    compiled before (a cached one).
    """

    def __init__(
        self,
        schedule: Schedule,
        *,
        rank: int,
        group: Any = None,
        segment_bytes: int | None = None,
        elem_bytes: int,
        device: torch.device | str = "cpu",
    ) -> None:
        plan = compile_plan(schedule, rank=rank, segment_bytes=segment_bytes, elem_bytes=elem_bytes, device=device)
        self._start(plan, group)

    @classmethod
    def of_plan(cls, plan: CompiledPlan, group: Any = None) -> ScheduleRunner:
        """A runner of ``plan`` (compiled for this process's rank of ``group``): nothing compiles."""
        runner = cls.__new__(cls)
        runner._start(plan, group)
        return runner

    def _start(self, plan: CompiledPlan, group: Any) -> None:
        self.plan = plan
        self.rank = plan.rank
        self.group = group
        self._plans = plan.steps
        self._scratch_elems = plan.scratch_elems
        self._scratch: torch.Tensor | None = None
        self._global_ranks: list[int] | None = None

    @property
    def scratch_elems(self) -> int:
        """Elements of scratch this rank allocates on its first run (what the memory estimate counts)."""
        return self._scratch_elems

    def run(self, buffer: torch.Tensor, redop: str) -> None:
        """Run the schedule on ``buffer`` (1-D, ``schedule.buffer_elems`` elements: ``count``, input then
        output for all-to-all and send/recv, one token for barrier), in place.

        ``avg`` sums, then divides the rank's result by the world size (floating dtypes only).
        Raises ValueError for a buffer of the wrong shape; torch.distributed errors pass through.
        """
        elems = self.plan.buffer_elems
        if buffer.dim() != 1 or buffer.numel() != elems:
            raise ValueError(f"buffer must be 1-D with {elems} elements, got {tuple(buffer.shape)}")
        scratch = self._scratch
        if scratch is None or scratch.dtype != buffer.dtype or scratch.device != buffer.device:
            scratch = torch.empty(self._scratch_elems, dtype=buffer.dtype, device=buffer.device)
            self._scratch = scratch
        for plan in self._plans:
            if plan.pipelined:
                self._run_pipelined(plan, buffer, scratch, redop)
            elif plan.rounds:
                works = self._post(plan.rounds[0], buffer, scratch)
                for work in works:
                    work.wait()
                self._apply(plan.rounds[0], buffer, scratch, redop)
        if redop == "avg":
            finish_avg(self.plan, buffer, self.rank)

    def _run_pipelined(self, plan: _StepPlan, buffer: torch.Tensor, scratch: torch.Tensor, redop: str) -> None:
        # Every segment is posted up front and applied in order as it lands: while segment k is
        # reduced, segments k+1.. are in flight. Posting them all (rather than one ahead) matters on
        # a loaded CPU, where every blocking wait can cost a scheduler time slice to wake up from;
        # a segment that already landed costs no wait at all.
        posted = [self._post(rnd, buffer, scratch) for rnd in plan.rounds]
        for rnd, works in zip(plan.rounds, posted, strict=True):
            for work in works:
                work.wait()
            self._apply(rnd, buffer, scratch, redop)

    def _post(self, rnd: _Round, buffer: torch.Tensor, scratch: torch.Tensor) -> list[Any]:
        # Receives first: they are what the rank waits on before applying, and a send completes no
        # later than the receive its peer posted at the same time.
        ops: list[dist.P2POp] = []
        for r in rnd.recvs:
            if r.source < 0:
                ops.append(self._p2p(dist.irecv, _landing(r, buffer, scratch), r.peer))
        for s in rnd.sends:
            ops.append(self._p2p(dist.isend, buffer[s.start : s.stop], s.peer))
        works = [w for w in dist.batch_isend_irecv(ops) if w is not None] if ops else []
        # Local copies after posting, while the messages move: a copy writes where nothing in flight
        # reads or writes (its place, or its own scratch) and reads a range the step only sends, so
        # it still reads the buffer as the step found it. Applied with the receives if in scratch.
        for r in rnd.recvs:
            if r.source >= 0:
                _landing(r, buffer, scratch).copy_(buffer[r.source : r.source + r.stop - r.start])
        return works

    def _p2p(self, fn: Any, tensor: torch.Tensor, peer: int) -> dist.P2POp:
        if self.group is None:
            return dist.P2POp(fn, tensor, peer)
        # A subgroup's peer by its global rank: given group_peer, P2POp finds the global rank by scanning
        # the group's rank map (torch's get_global_rank), O(group size) per op: 127 us an op, 8.3 s of
        # CPU per ring all-reduce on a group of 16,384 ranks. The global ranks, ordered by group rank
        # (get_process_group_ranks), are read once per runner; a global peer is a lookup.
        ranks = self._global_ranks
        if ranks is None:
            ranks = self._global_ranks = dist.get_process_group_ranks(self.group)
        return dist.P2POp(fn, tensor, ranks[peer], group=self.group)

    def _apply(self, rnd: _Round, buffer: torch.Tensor, scratch: torch.Tensor, redop: str) -> None:
        recvs = rnd.recvs
        i = 0
        while i < len(recvs):
            r = recvs[i]
            if r.scratch < 0:
                i += 1
                continue
            if not r.reduce:
                buffer[r.start : r.stop].copy_(scratch[r.scratch : r.scratch + r.stop - r.start])
                i += 1
                continue
            # Consecutive reductions into the same range go to reduce_many together (one fused
            # kernel on GPUs: one-shot and direct reduce n-1 buffers into one).
            j = i
            sources = []
            while j < len(recvs) and recvs[j].reduce and (recvs[j].start, recvs[j].stop) == (r.start, r.stop):
                q = recvs[j]
                sources.append(scratch[q.scratch : q.scratch + q.stop - q.start])
                j += 1
            reduce_many(buffer[r.start : r.stop], sources, redop)
            i = j


class CallShape(Protocol):
    """What a call's result depends on beyond its steps: a :class:`Schedule` or a :class:`CompiledPlan`."""

    @property
    def op(self) -> Op: ...
    @property
    def world_size(self) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def root(self) -> int: ...


def result_range(schedule: CallShape, rank: int) -> tuple[int, int] | None:
    """The elements of ``rank``'s buffer that hold a reduction when the schedule ends, if any."""
    if not schedule.op.spec.reduces:
        return None
    needs = contract(schedule.op).requires(rank, schedule.world_size, schedule.count, schedule.root)
    return (needs[0][0], needs[-1][1]) if needs else None


def finish_avg(schedule: CallShape, buffer: torch.Tensor, rank: int) -> None:
    """Divide the rank's reduced elements by the world size: avg is a sum, then one division."""
    span = result_range(schedule, rank)
    if span is not None and schedule.world_size > 1:
        # Not div_(world_size): on CUDA that multiplies by the reciprocal (see divide_exactly).
        divide_exactly(buffer[span[0] : span[1]], schedule.world_size)


def run_schedule(
    schedule: Schedule,
    buffer: torch.Tensor,
    redop: str,
    *,
    group: Any = None,
    segment_bytes: int | None = None,
) -> None:
    """Run ``schedule`` on ``buffer`` in place, as this process's rank of ``group`` (default group if None).

    ``buffer`` follows ir.py's semantics for the op (1-D, ``schedule.count`` elements). ``redop`` is
    sum, prod, min, max or avg (avg: sum then divide by the world size; floating dtypes only).
    ``segment_bytes`` cuts large transfers into pipelined segments (default: per device type).
    To run the same schedule many times, build a ``ScheduleRunner`` once instead.

    Raises ValueError for a buffer that does not fit the schedule, or a world size that differs
    from the group's; torch.distributed errors (a dead peer, a timeout) pass through.
    """
    rank = dist.get_rank(group)
    size = dist.get_world_size(group)
    if size != schedule.world_size:
        raise ValueError(f"schedule is for {schedule.world_size} ranks, the group has {size}")
    if redop == "avg" and not buffer.dtype.is_floating_point:
        raise ValueError("avg is defined for floating dtypes only")
    runner = ScheduleRunner(
        schedule,
        rank=rank,
        group=group,
        segment_bytes=segment_bytes,
        elem_bytes=buffer.element_size(),
        device=buffer.device,
    )
    runner.run(buffer, redop)

"""Cost terms read off a schedule: how many steps (latency) and how many bytes where (bandwidth).

In the alpha-beta model a schedule costs about ``steps * alpha + bytes * beta``: steps count the waits
for the network; ``bytes`` is what the bottleneck carries: the busiest directed link between two ranks
when every pair has its own link, or the busiest rank's port when each rank has one port to a switch.
Local copies (a transfer to oneself) use no link and count nowhere; a barrier's token counts no bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.schedules.ir import Schedule
from collbench.schedules.verifier import step_waves


@dataclass(frozen=True, slots=True)
class ScheduleStats:
    """What a schedule moves, for elements of ``elem_bytes`` bytes."""

    steps: int
    """The critical path in steps: how many rendezvous rounds the slowest chain of dependent steps takes
    when every step starts as soon as it can (the latency term)."""
    bytes_sent_per_rank: tuple[int, ...]
    max_bytes_sent_per_rank: int
    busiest_link_bytes: int
    """The most bytes any one directed rank pair (a -> b) carries (the bandwidth term)."""
    total_bytes: int
    """Bytes sent by all ranks together."""
    max_steps_per_rank: int = 0
    """The most steps any one rank takes (``Schedule.num_steps``); below ``steps`` for pipelines."""
    busiest_link: tuple[int, int] | None = None
    """The (sender, receiver) pair carrying ``busiest_link_bytes``; None when nothing moves."""
    bytes_received_per_rank: tuple[int, ...] = ()

    @property
    def busiest_port_bytes(self) -> int:
        """The most bytes one rank sends or receives (whichever is more): the bandwidth term when every
        rank has one full-duplex port (a NIC into a switch), where a parameter server's root chokes."""
        return max(max(self.bytes_sent_per_rank, default=0), max(self.bytes_received_per_rank, default=0))


def schedule_stats(schedule: Schedule, elem_bytes: int) -> ScheduleStats:
    """Steps and bytes of ``schedule`` with elements of ``elem_bytes`` bytes (4 for float32).

    Raises ScheduleError (from the verifier's matching) if the schedule cannot run at all.
    """
    n = schedule.world_size
    if not schedule.op.spec.payload:
        # A barrier's token is no data: its transfers count as steps, never as bytes.
        elem_bytes = 0
    sent = [0] * n
    received = [0] * n
    links: dict[tuple[int, int], int] = {}
    for r in range(n):
        for step in schedule.steps[r]:
            for send in step.sends:
                if send.peer == r:
                    continue  # a local copy (ir.py): no link, no port
                size = send.count * elem_bytes
                sent[r] += size
                received[send.peer] += size
                links[(r, send.peer)] = links.get((r, send.peer), 0) + size
    waves = step_waves(schedule)
    # Steps that only copy locally (a world of one rank's all-to-all) wait for no network.
    networked = [
        wave
        for r in range(n)
        for wave, step in zip(waves[r], schedule.steps[r], strict=True)
        if any(t.peer != r for t in step.sends) or any(t.peer != r for t in step.recvs)
    ]
    steps = 1 + max(networked, default=-1)
    busiest = max(links.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]), default=None)
    return ScheduleStats(
        steps=steps,
        bytes_sent_per_rank=tuple(sent),
        max_bytes_sent_per_rank=max(sent, default=0),
        busiest_link_bytes=busiest[1] if busiest else 0,
        total_bytes=sum(sent),
        max_steps_per_rank=schedule.num_steps,
        busiest_link=busiest[0] if busiest else None,
        bytes_received_per_rank=tuple(received),
    )

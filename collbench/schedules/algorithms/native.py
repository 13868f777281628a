"""``native``: the backend's own collective (gloo's or NCCL's), which collbench runs but does not build.

It has no schedule, so it has no formula of its own either. It is priced by the ring formulas: NCCL
picks ring or tree per size and gloo mostly rings, and a fitted model absorbs the difference, its
parameters describing native's time as if it were a ring at the world size measured (predictions
at other world sizes price NCCL's with NCCL's own cost model instead, ``models/nccl_cost.py``). The
spec takes ring's table itself rather than a copy, so that the two can never drift apart.
"""

from __future__ import annotations

from collbench.schedules.algorithms.ring import RING
from collbench.schedules.ops import Op
from collbench.schedules.spec import AlgorithmSpec

NATIVE = AlgorithmSpec(
    name="native",
    ops=frozenset(Op),
    builder=None,
    summary="the backend's own collective (gloo's or NCCL's), which has no schedule",
    costs=RING.costs,
)

SPECS: tuple[AlgorithmSpec, ...] = (NATIVE,)

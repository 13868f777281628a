"""``native``: the backend's own collective (gloo's or NCCL's), which collbench runs but does not build.

It has no schedule, so it has no formula of its own either. The five reductions and gathers are priced
by the ring formulas: NCCL picks ring or tree per size and gloo mostly rings, and a fitted model absorbs
the difference, its parameters describing native's time as if it were a ring at the world size measured
(predictions at other world sizes price NCCL's with NCCL's own cost model instead,
``models/nccl_cost.py``). The others are priced by what the backends' sources say they run
(``models/native_structure.py``): all-to-all, scatter and gather by ``linear`` (NCCL's grouped
send/recv, gloo's ``alltoall.cc``, ``scatter.cc``, ``gather.cc``: every peer's message posted at once),
send/recv by ring's shift, barrier by ``dissemination`` (gloo's ``barrier.cc``). torch.distributed
has no scan: native scan and exscan exist only under ``--backend mpi`` (``MPI_Scan``, ``MPI_Exscan``),
priced by ``linear``'s chain, which Open MPI 4.1's coll/basic runs and coll/tuned's fixed decision
keeps. The table takes those
algorithms' formulas themselves rather than copies, so that they can never drift apart.
"""

from __future__ import annotations

from dataclasses import replace

from collbench.schedules.algorithms.barrier import DISSEMINATION
from collbench.schedules.algorithms.linear import LINEAR
from collbench.schedules.algorithms.ring import RING
from collbench.schedules.ops import Op
from collbench.schedules.spec import AlgorithmSpec

NATIVE = AlgorithmSpec(
    name="native",
    ops=frozenset(Op),
    builder=None,
    summary="the backend's own collective (gloo's or NCCL's), which has no schedule",
    costs=replace(
        RING.costs,
        all_to_all=LINEAR.costs.all_to_all,
        scatter=LINEAR.costs.scatter,
        gather=LINEAR.costs.gather,
        barrier=DISSEMINATION.costs.barrier,
        scan=LINEAR.costs.scan,
        exscan=LINEAR.costs.exscan,
    ),
)

SPECS: tuple[AlgorithmSpec, ...] = (NATIVE,)

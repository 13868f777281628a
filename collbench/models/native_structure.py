"""What the backends' own collectives do for the ops they do not tune, where their source says it.

``native`` is the backend's own choice, so its fit describes it only at the shape measured, unless
what the backend runs is known. For these it is, from the backend's source:

* gloo's all-to-all (``gloo/alltoall.cc``, what ``ProcessGroupGloo::alltoall_base`` calls) copies its
  own block, posts its n-1 sends and n-1 receives at once (peer ``rank + i`` and ``rank - i``), then
  waits for them all: the linear exchange, n-1 messages through each port.
* gloo's scatter and gather (``gloo/scatter.cc``, ``gloo/gather.cc``) post the root's n-1 sends (or
  receives) at once and copy its own block: linear, n-1 messages through the root's port.
* gloo's barrier (``gloo/barrier.cc``, what ``ProcessGroupGloo::barrier`` calls) is a dissemination
  barrier (Hensgen, Finkel and Manber, 1988): ceil(log2 n) rounds of one message.
* NCCL's all-to-all, scatter, gather and send/recv are grouped ``ncclSend``/``ncclRecv`` (nccl-tests'
  ``alltoall.cu``, ``scatter.cu``, ``gather.cu``, ``sendrecv.cu``; ``ProcessGroupNCCL`` does the same):
  every peer's message posted in one group, so n-1 messages through each port for all-to-all, n-1
  through the root's for scatter and gather, one for the ring shift. How NCCL spreads those peers over
  its channels is not modelled.
* NCCL's barrier through ``torch.distributed`` is an all-reduce of one element
  (``ProcessGroupNCCL::barrier``: "All reduce to achieve the barrier"): ``predict_native.py`` prices it
  with NCCL's own model of a one-byte all-reduce.

A native fit is priced at another world size by native's own formula (``costs.py``), and only where
that formula has the structure above at every world size checked: a formula that disagrees would price
something the backend does not run, so the fit is then refused at other shapes, saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from collbench.backends.gloo import GLOO
from collbench.backends.nccl import NCCL
from collbench.errors import UserError
from collbench.models.costs import cost_terms
from collbench.schedules.cost import ceil_log2
from collbench.schedules.ops import Op

_CHECKED_WORLD_SIZES = (2, 3, 5, 8, 13, 64, 1000)


@dataclass(frozen=True, slots=True)
class NativeStructure:
    """What a backend's native runs for one op, and where that is said."""

    what: str
    """The structure in a few words, with its source."""
    messages: Callable[[int], int]
    """Messages through the busiest port along the critical path at ``p`` ranks."""


NATIVE_STRUCTURES: dict[tuple[str, Op], NativeStructure] = {
    (GLOO.name, Op.ALL_TO_ALL): NativeStructure(
        "gloo's all-to-all posts its n-1 sends and receives at once, then waits (gloo/alltoall.cc): "
        "the linear exchange",
        lambda p: p - 1,
    ),
    (GLOO.name, Op.SCATTER): NativeStructure(
        "gloo's scatter posts the root's n-1 sends at once (gloo/scatter.cc): linear", lambda p: p - 1
    ),
    (GLOO.name, Op.GATHER): NativeStructure(
        "gloo's gather posts the root's n-1 receives at once (gloo/gather.cc): linear", lambda p: p - 1
    ),
    (GLOO.name, Op.BARRIER): NativeStructure(
        "gloo's barrier is a dissemination barrier, ceil(log2 n) rounds (gloo/barrier.cc)", ceil_log2
    ),
    (NCCL.name, Op.ALL_TO_ALL): NativeStructure(
        "NCCL runs all-to-all as grouped send/recv, n-1 peers posted at once (its tuning model, tuning.cc, "
        "does not price it)",
        lambda p: p - 1,
    ),
    (NCCL.name, Op.SCATTER): NativeStructure(
        "NCCL runs scatter as grouped send/recv, the root's n-1 sends posted at once (its tuning model, "
        "tuning.cc, does not price it)",
        lambda p: p - 1,
    ),
    (NCCL.name, Op.GATHER): NativeStructure(
        "NCCL runs gather as grouped send/recv, the root's n-1 receives posted at once (its tuning model, "
        "tuning.cc, does not price it)",
        lambda p: p - 1,
    ),
    (NCCL.name, Op.SENDRECV): NativeStructure(
        "NCCL runs send/recv as one grouped ncclSend/ncclRecv pair per rank (its tuning model, tuning.cc, "
        "does not price it)",
        lambda p: 1,
    ),
}


def native_structure(backend: str, op: str) -> NativeStructure | None:
    """The known structure of ``backend``'s native ``op``, or None where it is not known here."""
    try:
        the_op = Op.parse(op)
    except UserError:
        return None
    return NATIVE_STRUCTURES.get((backend, the_op))


def formula_disagreement(backend: str, op: str) -> str:
    """Why native's formula for ``op`` does not have ``backend``'s known structure (empty when it does,
    or when nothing is known): the messages it counts at a world size where the structure says others."""
    known = native_structure(backend, op)
    if known is None:
        return ""
    for p in _CHECKED_WORLD_SIZES:
        try:
            counted = cost_terms(op, "native", p, 1.0).message_count
        except UserError as exc:
            return str(exc)
        if counted != known.messages(p):
            return (
                f"native's formula counts {counted:g} messages at {p} ranks where {known.what} takes "
                f"{known.messages(p)}"
            )
    return ""

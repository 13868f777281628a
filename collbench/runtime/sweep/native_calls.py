"""The backend's own collective for a sweep point (``native``), through ``torch.distributed``.

Split from worker.py, which times the calls. One function per op, each taking the point's buffers
(``executor.buffers.PointBuffers``: the shapes nccl-tests uses) and returning a call of no arguments:

* all-reduce, reduce-scatter, all-gather, broadcast, reduce: ``dist.all_reduce``,
  ``reduce_scatter_tensor``, ``all_gather_into_tensor``, ``broadcast``, ``reduce``;
* all-to-all: ``dist.all_to_all_single(output, input)``, out of place, equal blocks (``count`` is a
  multiple of the world size: the sweep rounds it as nccl-tests' ``AlltoAllGetCollByteCount``);
* scatter and gather: ``dist.scatter`` / ``dist.gather`` with the root's list of block views, so
  nothing is copied around the call; in place the rank's block is a view of the root's buffer;
* send/recv: one ``dist.batch_isend_irecv`` of a send to rank ``r + 1`` and a receive from ``r - 1``
  (the ring shift of nccl-tests' ``sendrecv.cu``). torch refuses a send to oneself, so on one rank the
  shift is the copy it amounts to (``ncclSend``/``ncclRecv`` to oneself is a copy in NCCL too);
* barrier: ``dist.barrier`` on gloo. On NCCL, torch's documentation of ``dist.barrier``
  (torch/distributed/distributed_c10d.py, torch 2.13) says "``ProcessGroupNCCL`` implements barrier as
  an all_reduce of a 1-element tensor. A device must be chosen for allocating this tensor" (by
  ``device_ids``, the device bound at init, the last one used, or rank mod device count: a guess that
  can hang) and "now blocks the cpu thread till the completion of the barrier collective". So on NCCL
  the point runs what that barrier runs, a one-element all-reduce, on the rank's own device, and
  leaves out the host wait: CUDA events time the collective (a host wait between events would time
  the launch gaps too) and a CUDA graph can capture it (``collbench.backends.nccl.BARRIER_NOTE`` says
  so in the run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from collbench.backends import for_torch
from collbench.runtime.executor.buffers import PointBuffers
from collbench.schedules.contracts import contract
from collbench.schedules.ops import Op, block_bounds

_REDUCE_OPS = {
    "sum": "SUM",
    "prod": "PRODUCT",
    "min": "MIN",
    "max": "MAX",
    "avg": "AVG",
}


def all_gather_single(output: torch.Tensor, tensor: torch.Tensor, group: Any = None) -> Any:
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return gather(output, tensor, group=group)


def reduce_scatter_single(output: torch.Tensor, tensor: torch.Tensor, op: Any, group: Any = None) -> Any:
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return scatter(output, tensor, op=op, group=group)


def native_call(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    """One call of the backend's own ``bufs.op`` on ``bufs`` (input to output), on ``group`` (None:
    the default group). The root is ``bufs.root``; the world size ``bufs.world_size``."""
    return NATIVE_CALLS[bufs.op](bufs, redop, group)


def _all_to_all(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    out, inp = bufs.output, bufs.input
    whole = block_bounds(bufs.count, bufs.world_size)[-1][1]
    if whole != bufs.count:
        # all_to_all_single splits evenly; a count the sweep did not round is moved in whole blocks.
        out, inp = out[:whole], inp[:whole]
    return lambda: dist.all_to_all_single(out, inp, group=group)


def _blocks(tensor: torch.Tensor, bufs: PointBuffers) -> list[torch.Tensor]:
    return [tensor[lo:hi] for lo, hi in block_bounds(bufs.count, bufs.world_size)]


def _scatter(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    root, out = bufs.root, bufs.output
    if bufs.rank != root:
        return lambda: dist.scatter(out, None, src=root, group=group)
    parts = _blocks(bufs.input, bufs)
    return lambda: dist.scatter(out, parts, src=root, group=group)


def _gather(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    root, inp = bufs.root, bufs.input
    if bufs.rank != root:
        return lambda: dist.gather(inp, None, dst=root, group=group)
    parts = _blocks(bufs.output, bufs)
    return lambda: dist.gather(inp, parts, dst=root, group=group)


def _sendrecv(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    n, rank, inp, out = bufs.world_size, bufs.rank, bufs.input, bufs.output
    if n == 1:

        def copy() -> None:
            out.copy_(inp)

        return copy
    nxt, prev = (rank + 1) % n, (rank - 1) % n

    def p2p(fn: Any, tensor: torch.Tensor, peer: int) -> dist.P2POp:
        if group is None:
            return dist.P2POp(fn, tensor, peer)
        return dist.P2POp(fn, tensor, group=group, group_peer=peer)

    ops = [p2p(dist.irecv, out, prev), p2p(dist.isend, inp, nxt)]

    def shift() -> None:
        for work in dist.batch_isend_irecv(ops):
            if work is not None:
                work.wait()

    return shift


def _barrier(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    backend = for_torch(str(dist.get_backend(group)))
    if backend is not None and backend.barrier_as_all_reduce:
        # What ProcessGroupNCCL's barrier runs, on the rank's own device (the token's), minus its host wait.
        flag = bufs.whole.new_zeros(1, dtype=torch.uint8)
        return lambda: dist.all_reduce(flag, group=group)
    return lambda: dist.barrier(group=group)


def _same(bufs: PointBuffers) -> bool:
    return bufs.input.data_ptr() == bufs.output.data_ptr() and bufs.input.numel() == bufs.output.numel()


def _reduce_op(redop: str) -> Any:
    return getattr(dist.ReduceOp, _REDUCE_OPS[redop])


def _all_reduce(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    inp, out, reduce_op = bufs.input, bufs.output, _reduce_op(redop)
    if _same(bufs):
        return lambda: dist.all_reduce(out, op=reduce_op, group=group)

    def all_reduce() -> None:
        out.copy_(inp)
        dist.all_reduce(out, op=reduce_op, group=group)

    return all_reduce


def _reduce_scatter(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    inp, out, reduce_op = bufs.input, bufs.output, _reduce_op(redop)
    return lambda: reduce_scatter_single(out, inp, reduce_op, group)


def _all_gather(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    inp, out = bufs.input, bufs.output
    return lambda: all_gather_single(out, inp, group)


def _rooted(bufs: PointBuffers, collective: Callable[[], Any]) -> Callable[[], None]:
    # Out of place the call works in the output: the rank's own data is copied there first where it has
    # any (every rank of a reduce, a broadcast's root only: the op's contract).
    held = contract(bufs.op).holds(bufs.rank, bufs.world_size, bufs.count, bufs.root)
    copies = not _same(bufs) and bool(held)
    inp, out = bufs.input, bufs.output

    def rooted() -> None:
        if copies:
            out.copy_(inp)
        collective()

    return rooted


def _broadcast(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    out, root = bufs.output, bufs.root
    return _rooted(bufs, lambda: dist.broadcast(out, src=root, group=group))


def _reduce(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    out, root, reduce_op = bufs.output, bufs.root, _reduce_op(redop)
    return _rooted(bufs, lambda: dist.reduce(out, dst=root, op=reduce_op, group=group))


def _no_call(bufs: PointBuffers, redop: str, group: Any) -> Callable[[], None]:
    # torch.distributed has no scan: a sweep refuses native scan on gloo and NCCL before any rank starts
    # (backends.base.own_algos), so reaching here is a bug.
    raise ValueError(
        f"torch.distributed has no {bufs.op.value}: native {bufs.op.value} runs under --backend mpi or mpich only"
    )


NativeCall = Callable[[PointBuffers, str, Any], Callable[[], None]]
"""``(buffers, reduction, group) -> call``: one op's torch.distributed call (nccl-tests' table of run functions)."""
NATIVE_CALLS: dict[Op, NativeCall] = {
    Op.ALL_REDUCE: _all_reduce,
    Op.REDUCE_SCATTER: _reduce_scatter,
    Op.ALL_GATHER: _all_gather,
    Op.BROADCAST: _broadcast,
    Op.REDUCE: _reduce,
    Op.ALL_TO_ALL: _all_to_all,
    Op.SCATTER: _scatter,
    Op.GATHER: _gather,
    Op.SENDRECV: _sendrecv,
    Op.BARRIER: _barrier,
    Op.SCAN: _no_call,
    Op.EXSCAN: _no_call,
}
"""Every op's own call, through torch.distributed (tests/unit/test_contracts.py checks every op has one)."""

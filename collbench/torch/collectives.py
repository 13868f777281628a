"""The calls of the Python API: each runs the profile's rule for its op at its size, torch.distributed's own
collective where the rule is native, collbench's schedule otherwise.

Native is torch.distributed's own call; a schedule runs on one buffer, a copy of the arguments, laid out as
the schedule says (all-to-all and the ring shift: input then output; scatter and gather: the n blocks in
rank order; barrier: one token element): those calls are not in place. All-reduce and scan work in place.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from collbench.errors import ConfigError
from collbench.nccl.variants import is_native
from collbench.profile.document import Profile
from collbench.profile.rules import Rule
from collbench.runtime.ddp import group_device
from collbench.runtime.executor.reduce import NATIVE_REDOPS, redop_name
from collbench.schedules.ops import Op
from collbench.torch.rules import Runners, check_initialised, choose, run_schedule


@torch.no_grad()
def _all_reduce(tensor: torch.Tensor, profile: Profile, group: Any, op: object, runners: Runners) -> Rule:
    redop = redop_name(op)
    rule_set, rule = choose(profile, group, Op.ALL_REDUCE, tensor.numel() * tensor.element_size())
    # native:ALGO variants were NCCL forced through NCCL_ALGO, which a communicator reads when it is
    # created: inside a job that is the job's setting, so the call is the backend's all_reduce.
    if is_native(rule.algo) or tensor.numel() == 0:
        if redop == "avg":
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
            tensor.div_(dist.get_world_size(group))
        else:
            dist.all_reduce(tensor, op=NATIVE_REDOPS[redop], group=group)
        return rule
    # The executor works on one flat buffer; a contiguous tensor's view shares its memory.
    flat = tensor.view(-1) if tensor.is_contiguous() else tensor.contiguous().view(-1)
    runners.runner(rule_set, rule, flat.numel(), flat, group).run(flat, redop)
    if flat.data_ptr() != tensor.data_ptr():
        tensor.copy_(flat.view_as(tensor))
    return rule


def all_reduce(tensor: torch.Tensor, profile: Profile, group: Any = None, *, op: object = "sum") -> Rule:
    """All-reduce ``tensor`` in place across ``group`` with the algorithm the profile picks for its size.

    The rule comes from the profile's rule set for the group's size on the nodes its ranks run on (the
    host name and boot id each reports, gathered once per group; the measured set where the profile has
    that shape both measured and predicted), so one profile serves every group of a job:
    tensor-parallel, data-parallel, the world. ``op`` is sum, prod, min, max or avg, or torch.distributed's
    ``ReduceOp`` of one (``dist.ReduceOp.MAX``), as ``dist.all_reduce`` takes it. Returns the rule
    that was applied. Raises ConfigError when torch.distributed is not initialised; UserError when the
    profile has no rule set for the group's shape or no all-reduce rules; torch.distributed errors
    pass through.
    """
    return _all_reduce(tensor, profile, group, op, Runners(profile))


def _group_rank(group: Any, global_rank: int) -> int:
    """``global_rank``'s rank in ``group`` (torch's ``src``/``dst`` are global ranks)."""
    return global_rank if group is None else dist.get_group_rank(group, global_rank)


@torch.no_grad()
def all_to_all_single(output: torch.Tensor, input: torch.Tensor, profile: Profile, group: Any = None) -> Rule:
    """All-to-all with equal splits, as ``dist.all_to_all_single(output, input)``: block ``j`` of this
    rank's ``input`` goes to rank ``j``, and block ``j`` of ``output`` comes from rank ``j``.

    The rule is the profile's for all-to-all at the whole buffer's size in bytes (nccl-tests' count).
    Returns it. Raises ConfigError when the buffers differ in size or do not split into equal blocks, or
    torch.distributed is not initialised; UserError when the profile has no rule for the group's shape.
    """
    world = dist.get_world_size(group) if dist.is_initialized() else 1
    count = input.numel()
    if output.numel() != count or count % world:
        raise ConfigError(
            f"all_to_all_single needs input and output of one size in {world} equal blocks, got {input.numel()} "
            f"and {output.numel()} elements"
        )
    rule_set, rule = choose(profile, group, Op.ALL_TO_ALL, count * input.element_size())
    if is_native(rule.algo) or count == 0:
        dist.all_to_all_single(output, input, group=group)
        return rule
    buffer = torch.empty(2 * count, dtype=input.dtype, device=input.device)
    buffer[:count].copy_(input.reshape(-1))
    run_schedule(profile, rule_set, rule, Op.ALL_TO_ALL, count, buffer, group)
    output.copy_(buffer[count:].view_as(output))
    return rule


@torch.no_grad()
def ring_shift(output: torch.Tensor, input: torch.Tensor, profile: Profile, group: Any = None) -> Rule:
    """Send ``input`` to the next rank of the group and receive the previous rank's into ``output`` (the
    ring shift nccl-tests' ``sendrecv_perf`` measures). Returns the profile's rule for sendrecv at the
    buffer's size. Raises ConfigError for buffers of different sizes."""
    if output.numel() != input.numel():
        raise ConfigError(f"ring_shift needs input and output of one size, got {input.numel()} and {output.numel()}")
    count = input.numel()
    rule_set, rule = choose(profile, group, Op.SENDRECV, count * input.element_size())
    world = dist.get_world_size(group)
    if is_native(rule.algo) or count == 0 or world == 1:
        if world == 1:
            output.copy_(input)  # a send to oneself: torch refuses it, NCCL copies
            return rule
        rank = dist.get_rank(group)
        peer = (rank + 1) % world if group is None else dist.get_global_rank(group, (rank + 1) % world)
        prev = (rank - 1) % world if group is None else dist.get_global_rank(group, (rank - 1) % world)
        received = output if output.is_contiguous() else torch.empty_like(output)
        works = dist.batch_isend_irecv(
            [dist.P2POp(dist.isend, input.contiguous(), peer, group), dist.P2POp(dist.irecv, received, prev, group)]
        )
        for work in works:
            work.wait()
        if received is not output:
            output.copy_(received)
        return rule
    buffer = torch.empty(2 * count, dtype=input.dtype, device=input.device)
    buffer[:count].copy_(input.reshape(-1))
    run_schedule(profile, rule_set, rule, Op.SENDRECV, count, buffer, group)
    output.copy_(buffer[count:].view_as(output))
    return rule


def _check_root_list(tensors: list[torch.Tensor] | None, world: int, block: int, root: str) -> None:
    """ConfigError unless ``tensors`` (the ``root``'s list: "scatter's source") holds one tensor per rank of
    the group, each of ``block`` elements: the root alone holds it, so the root alone checks it."""
    if tensors is None or len(tensors) != world or any(t.numel() != block for t in tensors):
        raise ConfigError(f"{root} needs a list of {world} tensors of {block} elements each")


@torch.no_grad()
def scatter(
    tensor: torch.Tensor,
    scatter_list: list[torch.Tensor] | None,
    profile: Profile,
    src: int = 0,
    group: Any = None,
) -> Rule:
    """Scatter, as ``dist.scatter(tensor, scatter_list, src)``: rank ``j`` of the group receives
    ``scatter_list[j]`` of rank ``src`` (a global rank) into ``tensor``; ``scatter_list`` is read on the
    source only. The rule is the profile's for scatter at the source's whole input (n blocks). Returns it.
    Raises ConfigError for a source without a list of one block per rank, each of ``tensor``'s size."""
    check_initialised()
    world, root = dist.get_world_size(group), _group_rank(group, src)
    block = tensor.numel()
    mine = dist.get_rank(group) == root
    if mine:
        _check_root_list(scatter_list, world, block, "scatter's source")
    rule_set, rule = choose(profile, group, Op.SCATTER, world * block * tensor.element_size())
    if is_native(rule.algo) or block == 0:
        dist.scatter(tensor, scatter_list if mine else None, src=src, group=group)
        return rule
    buffer = torch.empty(world * block, dtype=tensor.dtype, device=tensor.device)
    if mine:
        assert scatter_list is not None  # checked above
        torch.cat([t.reshape(-1) for t in scatter_list], out=buffer)
    run_schedule(profile, rule_set, rule, Op.SCATTER, world * block, buffer, group, root)
    rank = dist.get_rank(group)
    tensor.copy_(buffer[rank * block : (rank + 1) * block].view_as(tensor))
    return rule


@torch.no_grad()
def gather(
    tensor: torch.Tensor,
    gather_list: list[torch.Tensor] | None,
    profile: Profile,
    dst: int = 0,
    group: Any = None,
) -> Rule:
    """Gather, as ``dist.gather(tensor, gather_list, dst)``: rank ``dst`` (a global rank) receives every
    rank's ``tensor`` into ``gather_list`` (one tensor per rank, on the destination only). The rule is
    the profile's for gather at the destination's whole output (n blocks). Returns it. Raises
    ConfigError for a destination without a list of one tensor per rank of ``tensor``'s size."""
    check_initialised()
    world, root = dist.get_world_size(group), _group_rank(group, dst)
    block = tensor.numel()
    rank = dist.get_rank(group)
    mine = rank == root
    if mine:
        _check_root_list(gather_list, world, block, "gather's destination")
    rule_set, rule = choose(profile, group, Op.GATHER, world * block * tensor.element_size())
    if is_native(rule.algo) or block == 0:
        dist.gather(tensor, gather_list if mine else None, dst=dst, group=group)
        return rule
    buffer = torch.zeros(world * block, dtype=tensor.dtype, device=tensor.device)
    buffer[rank * block : (rank + 1) * block].copy_(tensor.reshape(-1))
    run_schedule(profile, rule_set, rule, Op.GATHER, world * block, buffer, group, root)
    if mine:
        assert gather_list is not None  # checked above
        for j, out in enumerate(gather_list):
            out.copy_(buffer[j * block : (j + 1) * block].view_as(out))
    return rule


def barrier(profile: Profile, group: Any = None, *, device: torch.device | str | None = None) -> Rule:
    """Wait until every rank of the group has reached this call, by the profile's barrier rule: native is
    ``dist.barrier``; collbench's (dissemination, tree) pass a one-element token on ``device`` (default:
    the current CUDA device on NCCL, else the CPU). Returns the rule."""
    rule_set, rule = choose(profile, group, Op.BARRIER, 0)
    if is_native(rule.algo):
        dist.barrier(group=group)
        return rule
    token = torch.zeros(1, dtype=torch.float32, device=group_device(group) if device is None else device)
    run_schedule(profile, rule_set, rule, Op.BARRIER, 0, token, group)
    return rule


@torch.no_grad()
def scan(
    tensor: torch.Tensor, profile: Profile, group: Any = None, *, op: object = "sum", exclusive: bool = False
) -> Rule:
    """Prefix reduction in place, as ``MPI_Scan``: rank r's ``tensor`` becomes ``x_0 op ... op x_r``
    over the group's ranks in order (``x_i`` is rank i's tensor); with ``exclusive`` (``MPI_Exscan``)
    ``x_0 op ... op x_(r-1)``, and rank 0's tensor, which has no prefix (MPI leaves it undefined), is
    left as it was.

    ``op`` is a reduction as collbench or torch names it (sum, prod, min, max; avg has no prefix form).
    The rule is the profile's for scan (or exscan) at the tensor's size in bytes; returns it. Raises
    ConfigError for avg, for a native rule (torch.distributed has no scan to run), or when
    torch.distributed is not initialised; UserError when the profile has no rule for the group's shape.
    """
    redop = redop_name(op)
    if redop == "avg":
        raise ConfigError("avg has no prefix form (MPI_Scan takes no average); use sum and divide by rank + 1")
    the_op = Op.EXSCAN if exclusive else Op.SCAN
    count = tensor.numel()
    rule_set, rule = choose(profile, group, the_op, count * tensor.element_size())
    if is_native(rule.algo):
        raise ConfigError(
            f"the profile's {the_op.value} rule at {rule.min_bytes} bytes is native, but torch.distributed has no "
            "scan (native scan is MPI_Scan, measured under --backend mpi or mpich); tune scan over gloo or nccl for "
            "one of collbench's schedules"
        )
    world = dist.get_world_size(group)
    if count == 0 or world == 1:
        return rule  # one rank's prefix is its own tensor; exscan's rank 0 keeps it
    flat = tensor.reshape(-1).contiguous()
    # Exscan's buffer is input then output (ops.py); its output starts as the input, so rank 0's is
    # left as it was.
    buffer = torch.cat([flat, flat]) if the_op.spec.out_of_place else flat
    Runners(profile).runner(rule_set, rule, count, buffer, group, the_op).run(buffer, redop)
    result = buffer[count:] if the_op.spec.out_of_place else buffer
    if result.data_ptr() != tensor.data_ptr():
        tensor.copy_(result.view_as(tensor))
    return rule

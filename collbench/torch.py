"""The API for training jobs: run the profile's choice inside a user's torch.distributed job.

::

    import collbench, collbench.torch
    profile = collbench.Profile.load("collbench-profile.yaml")
    collbench.torch.all_reduce(tensor, profile=profile)            # in place, like dist.all_reduce
    ddp_model.register_comm_hook(None, collbench.torch.ddp_comm_hook(profile))
    collbench.torch.all_to_all_single(output, input, profile=profile)  # as dist.all_to_all_single
    collbench.torch.scatter(tensor, scatter_list, profile=profile, src=0)  # as dist.scatter
    collbench.torch.gather(tensor, gather_list, profile=profile, dst=0)    # as dist.gather
    collbench.torch.ring_shift(output, input, profile=profile)  # to the next rank, from the previous
    collbench.torch.barrier(profile=profile)
    collbench.torch.scan(tensor, profile=profile, op="sum", exclusive=False)  # a prefix, in place

Per call, the profile's rule for all-reduce at the tensor's size in bytes, in the rule set of the
process group's shape (its size, on the nodes its ranks report), says what runs: ``native``
is ``torch.distributed.all_reduce`` (the backend's own collective); any other algorithm is
collbench's schedule for it, built for the group's size and run by collbench's executor over the
group's point-to-point transport, on the layout (ring orders, trees) the profile recorded. The other
ops do the same with their own rules (all-to-all, scatter, gather, sendrecv, barrier), sized as
nccl-tests counts them: the whole per-rank buffer, the root's n blocks, 0 bytes for barrier. Scan and
exscan have no ``native`` here: torch.distributed has no scan (native scan is ``MPI_Scan``, measured
under ``--backend mpi``), so their rules name collbench's schedules, and a native rule is refused.

The DDP hook overlaps with backward as DDP's default hook does: it hands the bucket's all-reduce off
and returns a future that completes when it is done. A native rule is torch's own ``allreduce_hook``
(``torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py``: the backend's asynchronous work's
future, no copy); collbench's schedules run on one worker thread per hook, bucket after bucket in the
order DDP hands them over. Once that thread exists, on a backend whose operations must come from one
thread (NCCL: its user guide, "Thread Safety", forbids issuing one communicator's operations from
several threads in parallel, and calls it unsafe for two communicators of one device too), native
buckets go to it as well, in the same queue: one thread issuing them in DDP's bucket order keeps every
rank's order alike, where a separate group for the schedules would not. On gloo they stay torch's own
hook (``Backend.serial_issue``). Where the profile is native at every size, :func:`ddp_comm_hook` is
torch's ``allreduce_hook`` itself, and :func:`register_comm_hook` registers nothing where it is native
at every size the model's buckets have; both say so once. The hook decides once per bucket shape
(elements, dtype, device, group); compiled plans are the process's (``runtime/executor/plan_cache.py``):
a shape met before by any hook or call builds nothing.

Every call runs outside autograd, as c10d's collectives do: a parameter (a leaf that requires grad) is
written in place and stays a leaf, as after ``dist.all_reduce(param)``, and no output takes a gradient from an
input. (gloo's own gather into parameters raises, its copy running under autograd; collbench's writes them.)
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from collbench.backends import for_torch
from collbench.errors import ConfigError
from collbench.layouts.model import Layout
from collbench.nccl.variants import is_native
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.runtime.ddp import ScheduleWorker, bucket_bytes, group_device, group_nodes, other_backend
from collbench.runtime.executor.plan_cache import PLANS, PlanKey
from collbench.runtime.executor.reduce import NATIVE_REDOPS, redop_name
from collbench.runtime.executor.schedule_runner import ScheduleRunner, default_segment_bytes
from collbench.schedules.ops import Op
from collbench.schedules.spec import MAX_SEGMENTS
from collbench.units import format_bytes, ranks_on_nodes

CommHook = Callable[[Any, dist.GradBucket], torch.futures.Future[torch.Tensor]]
"""What ``DistributedDataParallel.register_comm_hook`` takes: (state, bucket) -> future of the bucket."""


@dataclass
class _Runners:
    """Runners of one profile's schedules, per (rule, count, dtype, device, group), of the process's
    compiled plans (``plan_cache.PLANS``): a runner adds its group and scratch to a plan."""

    profile: Profile
    cache: dict[tuple[Any, ...], ScheduleRunner] = field(default_factory=dict)

    def runner(
        self,
        rule_set: RuleSet,
        rule: Rule,
        count: int,
        tensor: torch.Tensor,
        group: Any,
        op: Op = Op.ALL_REDUCE,
        root: int = 0,
    ) -> ScheduleRunner:
        world = dist.get_world_size(group)
        key = (op, root, rule.min_bytes, rule.algo, count, tensor.dtype, tensor.device, world, id(group))
        found = self.cache.get(key)
        if found is None:
            elem_bytes, rank = tensor.element_size(), dist.get_rank(group)
            plan_key = _plan_key(rule_set, rule, world, count, elem_bytes, op, root, rank, tensor.device)
            plan = PLANS.plan(plan_key)  # built for this rank alone on a miss (plan_cache.build_schedule)
            found = self.cache[key] = ScheduleRunner.of_plan(plan, group)
        return found


def _layout(rule_set: RuleSet, rule: Rule, world: int) -> Layout | None:
    """The layout the rule was measured with, when its rule set recorded one for this world size."""
    name = rule.params.get("layout")
    saved = rule_set.layout
    if saved is None or name != saved.name or world != rule_set.world_size:
        if name not in (None, "", "rank-order") and world == rule_set.world_size:
            # Profiles of earlier tunes (and tunes replayed from rows) name the layout their rows ran
            # without holding it: the rule runs in rank order, which the user is told once.
            held = "no layout" if saved is None else f"layout {saved.name!r}"
            if not dist.is_initialized() or dist.get_rank() == 0:
                warnings.warn(
                    f"collbench: the profile's {rule.op.value} rule from {rule.min_bytes} bytes was measured on "
                    f"layout {name!r}, and its rule set holds {held}: it runs in rank order",
                    LayoutNotHeld,
                    stacklevel=2,
                )
        return None
    return saved.as_layout()


def _plan_key(
    rule_set: RuleSet, rule: Rule, world: int, count: int, elem_bytes: int, op: Op, root: int, rank: int, device: Any
) -> PlanKey:
    """What the rule's schedule and plan are built with, as the plan cache's key. Raises ConfigError for
    segments a schedule cannot take."""
    from collbench.schedules.registry import get_algorithm

    spec = get_algorithm(rule.algo)
    segments = int(rule.params.get("segments") or 1)
    seg_bytes = rule.params.get("segment_bytes")
    # Every rank has the same profile, tensor size and dtype: each refuses alike, before any message.
    where = f"the profile's {op.value} rule at {rule.min_bytes} bytes"
    if not 1 <= segments <= MAX_SEGMENTS:
        raise ConfigError(f"{where} cuts the message in {segments} segments; a schedule takes 1 to {MAX_SEGMENTS}")
    if seg_bytes is not None and seg_bytes < elem_bytes:
        raise ConfigError(f"{where} has segments of {seg_bytes} bytes, less than one {elem_bytes}-byte element")
    if seg_bytes and "segments" not in rule.params:
        # The sweep pipelined segmented schedules (trees) this way; build what was measured.
        segments = spec.segments_for(count * elem_bytes, int(seg_bytes))
    layout = _layout(rule_set, rule, world)
    seg = int(seg_bytes) if seg_bytes else default_segment_bytes(device)
    return PlanKey(spec.name, op, world, count, rank, root, segments, layout, elem_bytes, seg)


def _check_profile(profile: object) -> None:
    """ConfigError unless ``profile`` is a loaded :class:`Profile`: its path, given as the profile, was an
    AttributeError ('str' object has no attribute 'rule_set') from deep inside the call."""
    if not isinstance(profile, Profile):
        shown = f" {str(profile)[:80]!r}" if isinstance(profile, (str, PurePath)) else ""
        raise ConfigError(
            f"profile is a {type(profile).__name__}{shown}, not a collbench.Profile: load the file once with "
            "collbench.Profile.load(path) and pass what it returns"
        )


def _rule_set(profile: Profile, group: Any) -> RuleSet:
    """The profile's rule set for the group's size on the nodes its ranks report (:func:`group_nodes`), said
    once per group (rank 0); UserError naming the profile's shapes when it has not that one."""
    _check_profile(profile)
    world = dist.get_world_size(group)
    nodes, gathered = group_nodes(group)
    rule_set = profile.rule_set(world, nodes)
    if gathered and (not dist.is_initialized() or dist.get_rank() == 0):
        warnings.warn(
            f"collbench: this group is {ranks_on_nodes(world, nodes)} (by the host name and boot id each rank "
            f"reports): it runs the profile's rules for {rule_set.shape_label}",
            GroupShape,
            stacklevel=_user_stacklevel(),
        )
        if other := other_backend(profile.backend, group):
            warnings.warn(other, OtherBackend, stacklevel=_user_stacklevel())
    return rule_set


def _user_stacklevel() -> int:
    """The warning's stack level of the first caller outside this module and torch's (no_grad, backward) frames."""
    frame, level = sys._getframe(2), 2  # the caller's caller: level 1 is the frame that warns
    while frame.f_back is not None and f"{frame.f_globals.get('__name__')}.".startswith((f"{__name__}.", "torch.")):
        frame, level = frame.f_back, level + 1
    return level


def _check_initialised() -> None:
    if not dist.is_initialized():
        raise ConfigError("torch.distributed is not initialised: call dist.init_process_group first")


@torch.no_grad()
def _all_reduce(tensor: torch.Tensor, profile: Profile, group: Any, op: object, runners: _Runners) -> Rule:
    redop = redop_name(op)
    _check_initialised()
    nbytes = tensor.numel() * tensor.element_size()
    rule_set = _rule_set(profile, group)
    rule = rule_set.select(Op.ALL_REDUCE, nbytes)
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
    return _all_reduce(tensor, profile, group, op, _Runners(profile))


def _native_all_reduce(group: Any) -> Callable[[torch.Tensor], None]:
    """The backend's own sum all-reduce of a bucket on ``group``, for the worker thread.

    ``work.wait()`` blocks until done on CPU backends; on NCCL it makes the current stream (the
    bucket's, set by the worker) wait for the collective's, without blocking the thread.
    """

    def reduce(buffer: torch.Tensor) -> None:
        work = dist.all_reduce(buffer, group=group, async_op=True)
        assert work is not None  # async_op=True always returns the work
        work.wait()

    return reduce


@dataclass(frozen=True, slots=True)
class _BucketPlan:
    """What the hook does with buckets of one shape: divide by ``world_size``, then run ``runner``
    (None: the backend's own all-reduce, on the worker's thread once it runs where ``serial``)."""

    world_size: int
    rule: Rule
    runner: ScheduleRunner | None
    serial: bool
    """Whether the group's backend takes its operations from one thread only (``Backend.serial_issue``)."""


def _serial_issue(group: Any) -> bool:
    """Whether the group's backend must be issued every operation from one thread (unknown ones: yes)."""
    backend = for_torch(str(dist.get_backend(group)))
    return backend is None or backend.serial_issue


class _BucketAllReduce:
    """The DDP hook's state: one plan per bucket shape, and the worker thread (started on first use)."""

    def __init__(self, profile: Profile) -> None:
        self._profile = profile
        self._runners = _Runners(profile)
        self._plans: dict[tuple[int, torch.dtype, torch.device, Any], _BucketPlan] = {}
        self._worker: ScheduleWorker | None = None

    def _plan(self, buffer: torch.Tensor, group: Any) -> _BucketPlan:
        _check_initialised()
        world = dist.get_world_size(group)
        rule_set = _rule_set(self._profile, group)
        rule = rule_set.select(Op.ALL_REDUCE, buffer.numel() * buffer.element_size())
        serial = _serial_issue(group)
        if is_native(rule.algo) or buffer.numel() == 0:
            return _BucketPlan(world, rule, None, serial)
        return _BucketPlan(world, rule, self._runners.runner(rule_set, rule, buffer.numel(), buffer, group), serial)

    def __call__(self, group: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        buffer: torch.Tensor = bucket.buffer()
        # The group object itself, not None, in the key: a job that re-creates its default group gets
        # new plans, and the key keeps the group alive so its id is never reused.
        key = (buffer.numel(), buffer.dtype, buffer.device, group if group is not None else dist.group.WORLD)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._plan(buffer, group)
        if plan.runner is None and not (plan.serial and self._worker is not None):
            # DDP's own path for a bucket, as torch's hook runs it: divide, then the backend's
            # asynchronous all-reduce, its future handed back (no copy, no thread in between).
            return allreduce_hook(group, bucket)
        # Divide first, as the default hook does, so sums of large gradients stay in range.
        buffer.div_(plan.world_size)
        if self._worker is None:
            self._worker = ScheduleWorker()
        # On a backend issued from one thread, every bucket goes through the worker's queue from now
        # on, native ones too: one communicator, one thread issuing its operations, in the order DDP
        # hands the buckets over on every rank.
        runner = plan.runner
        reduce = _native_all_reduce(group) if runner is None else (lambda b: runner.run(b, "sum"))
        return self._worker.submit(reduce, buffer)


class LayoutNotHeld(UserWarning):
    """Said once where a rule names a layout its rule set does not hold, and runs in rank order."""


class GroupShape(UserWarning):
    """Said once per process group: the shape whose rules it runs, on the nodes its ranks report."""


class OtherBackend(UserWarning):
    """Said once per process group where it runs another backend than the profile was measured over."""


class DDPDefaultPath(UserWarning):
    """Said once where collbench leaves DDP its own all-reduce: the profile is native where it matters."""


def _say_once(text: str) -> None:
    """Tell the user, once per job (rank 0) and per place in their code (Python's default warning filter)."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        warnings.warn(text, DDPDefaultPath, stacklevel=3)


def _native_everywhere(profile: Profile) -> bool:
    """Whether the profile has all-reduce rules and every one, in every rule set, is native."""
    _check_profile(profile)
    algos = [r.algo for rs in profile.rule_sets if Op.ALL_REDUCE.value in rs.ops for r in rs.rules_for(Op.ALL_REDUCE)]
    return bool(algos) and all(is_native(a) for a in algos)


def ddp_comm_hook(profile: Profile) -> CommHook:
    """A DistributedDataParallel communication hook that all-reduces buckets as the profile says.

    Use ``model.register_comm_hook(state, hook)`` with ``state`` a process group or None (the default
    group). Like DDP's default hook it averages gradients: each bucket is divided by the world size,
    then summed across ranks, and the hook returns a future at once, completed when the bucket's
    all-reduce is done, so communication overlaps with the rest of backward. Where the profile's
    all-reduce is native at every size, the hook returned is torch's own ``allreduce_hook`` (said once,
    as a :class:`DDPDefaultPath` warning on rank 0). Otherwise a bucket whose size the profile gives to
    ``native`` runs torch's ``allreduce_hook`` too (on NCCL, once a schedule has run, on the hook's
    worker thread, see the module's notes); other buckets run collbench's schedule on that thread,
    one bucket after the other. Each bucket shape's rule and schedule are chosen and compiled on its
    first call and kept for the life of the hook; the first call on a group also reads its nodes (one
    all-gather, so it returns once every rank's hook has come; :func:`register_comm_hook` reads them at
    registration). Errors of a bucket's all-reduce reach DDP through the future (raised in backward).
    """
    if _native_everywhere(profile):
        _say_once(
            "collbench: the profile's all-reduce is native at every size: the DDP hook is torch's own "
            "allreduce_hook (register_comm_hook registers none: DDP's built-in all-reduce)"
        )
        return allreduce_hook
    state = _BucketAllReduce(profile)

    def hook(group: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        return state(group, bucket)

    # DDP compares the hook's annotations with the real objects; this module's annotations are strings
    # (postponed evaluation), so state them as objects.
    hook.__annotations__ = {"group": Any, "bucket": dist.GradBucket, "return": torch.futures.Future[torch.Tensor]}
    return hook


def register_comm_hook(model: torch.nn.Module, profile: Profile, group: Any = None) -> CommHook | None:
    """Make ``model`` (a DistributedDataParallel) all-reduce its buckets as the profile says.

    Registers :func:`ddp_comm_hook` on ``model`` with ``group`` as its state, unless the profile's
    rules for the group's shape are native at every size this model's buckets have
    (``collbench.runtime.ddp.bucket_bytes``: computed as DDP computes them, for its first backward and
    for the buckets it rebuilds after it): then nothing is registered, DDP keeps its built-in
    all-reduce, which runs without Python per bucket (any Python hook, torch's own ``allreduce_hook``
    included, adds a call and a callback under the GIL to each bucket), and rank 0 says so once
    (a :class:`DDPDefaultPath` warning naming the sizes). Returns the hook registered, or None.
    Raises ConfigError when torch.distributed is not initialised; UserError when the profile has no
    all-reduce rules for the group's shape.
    """
    _check_initialised()
    if not isinstance(model, DistributedDataParallel):
        raise ConfigError(f"register_comm_hook needs a DistributedDataParallel model, got {type(model).__name__}")
    rule_set = _rule_set(profile, group)
    sizes = bucket_bytes(model)
    if all(is_native(rule_set.select(Op.ALL_REDUCE, n).algo) for n in sizes):
        shown = ", ".join(format_bytes(n) for n in sizes) or "none"
        _say_once(
            f"collbench: the profile's all-reduce is native at every size of this model's buckets ({shown}): "
            "no hook registered, DDP keeps its built-in all-reduce"
        )
        return None
    hook = ddp_comm_hook(profile)
    model.register_comm_hook(group, hook)
    return hook


# --- the ops that move data without reducing it, and barrier ------------------------------------------
#
# Native is torch.distributed's own call; a schedule runs on one buffer, a copy of the arguments, laid out as
# the schedule says (all-to-all and the ring shift: input then output; scatter and gather: the n blocks in
# rank order; barrier: one token element): these calls are not in place.


def _group_rank(group: Any, global_rank: int) -> int:
    """``global_rank``'s rank in ``group`` (torch's ``src``/``dst`` are global ranks)."""
    return global_rank if group is None else dist.get_group_rank(group, global_rank)


def _choose(profile: Profile, group: Any, op: Op, nbytes: int) -> tuple[RuleSet, Rule]:
    _check_initialised()
    rule_set = _rule_set(profile, group)
    return rule_set, rule_set.select(op, nbytes)


def _run_schedule(
    profile: Profile, rule_set: RuleSet, rule: Rule, op: Op, count: int, buffer: torch.Tensor, group: Any, root: int = 0
) -> None:
    _Runners(profile).runner(rule_set, rule, count, buffer, group, op, root).run(buffer, "sum")


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
    rule_set, rule = _choose(profile, group, Op.ALL_TO_ALL, count * input.element_size())
    if is_native(rule.algo) or count == 0:
        dist.all_to_all_single(output, input, group=group)
        return rule
    buffer = torch.empty(2 * count, dtype=input.dtype, device=input.device)
    buffer[:count].copy_(input.reshape(-1))
    _run_schedule(profile, rule_set, rule, Op.ALL_TO_ALL, count, buffer, group)
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
    rule_set, rule = _choose(profile, group, Op.SENDRECV, count * input.element_size())
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
    _run_schedule(profile, rule_set, rule, Op.SENDRECV, count, buffer, group)
    output.copy_(buffer[count:].view_as(output))
    return rule


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
    _check_initialised()
    world, root = dist.get_world_size(group), _group_rank(group, src)
    block = tensor.numel()
    mine = dist.get_rank(group) == root
    if mine and (scatter_list is None or len(scatter_list) != world or any(t.numel() != block for t in scatter_list)):
        raise ConfigError(f"scatter's source needs a list of {world} tensors of {block} elements each")
    rule_set, rule = _choose(profile, group, Op.SCATTER, world * block * tensor.element_size())
    if is_native(rule.algo) or block == 0:
        dist.scatter(tensor, scatter_list if mine else None, src=src, group=group)
        return rule
    buffer = torch.empty(world * block, dtype=tensor.dtype, device=tensor.device)
    if mine:
        assert scatter_list is not None  # checked above
        torch.cat([t.reshape(-1) for t in scatter_list], out=buffer)
    _run_schedule(profile, rule_set, rule, Op.SCATTER, world * block, buffer, group, root)
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
    _check_initialised()
    world, root = dist.get_world_size(group), _group_rank(group, dst)
    block = tensor.numel()
    rank = dist.get_rank(group)
    mine = rank == root
    if mine and (gather_list is None or len(gather_list) != world or any(t.numel() != block for t in gather_list)):
        raise ConfigError(f"gather's destination needs a list of {world} tensors of {block} elements each")
    rule_set, rule = _choose(profile, group, Op.GATHER, world * block * tensor.element_size())
    if is_native(rule.algo) or block == 0:
        dist.gather(tensor, gather_list if mine else None, dst=dst, group=group)
        return rule
    buffer = torch.zeros(world * block, dtype=tensor.dtype, device=tensor.device)
    buffer[rank * block : (rank + 1) * block].copy_(tensor.reshape(-1))
    _run_schedule(profile, rule_set, rule, Op.GATHER, world * block, buffer, group, root)
    if mine:
        assert gather_list is not None  # checked above
        for j, out in enumerate(gather_list):
            out.copy_(buffer[j * block : (j + 1) * block].view_as(out))
    return rule


def barrier(profile: Profile, group: Any = None, *, device: torch.device | str | None = None) -> Rule:
    """Wait until every rank of the group has reached this call, by the profile's barrier rule: native is
    ``dist.barrier``; collbench's (dissemination, tree) pass a one-element token on ``device`` (default:
    the current CUDA device on NCCL, else the CPU). Returns the rule."""
    rule_set, rule = _choose(profile, group, Op.BARRIER, 0)
    if is_native(rule.algo):
        dist.barrier(group=group)
        return rule
    token = torch.zeros(1, dtype=torch.float32, device=group_device(group) if device is None else device)
    _run_schedule(profile, rule_set, rule, Op.BARRIER, 0, token, group)
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
    rule_set, rule = _choose(profile, group, the_op, count * tensor.element_size())
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
    _Runners(profile).runner(rule_set, rule, count, buffer, group, the_op).run(buffer, redop)
    result = buffer[count:] if the_op.spec.out_of_place else buffer
    if result.data_ptr() != tensor.data_ptr():
        tensor.copy_(result.view_as(tensor))
    return rule

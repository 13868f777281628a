"""The API for training jobs: run the profile's choice inside a user's torch.distributed job.

::

    import collbench, collbench.torch
    profile = collbench.Profile.load("collbench-profile.yaml")
    collbench.torch.all_reduce(tensor, profile=profile)            # in place, like dist.all_reduce
    ddp_model.register_comm_hook(None, collbench.torch.ddp_comm_hook(profile))

Per call, the profile's rule for all-reduce at the tensor's size in bytes, in the rule set of the
process group's size, says what runs: ``native``
is ``torch.distributed.all_reduce`` (the backend's own collective); any other algorithm is
collbench's schedule for it, built for the group's size and run by collbench's executor over the
group's point-to-point transport, on the layout (ring orders, trees) the profile recorded.

The DDP hook overlaps with backward as DDP's default hook does: it hands the bucket's all-reduce off
and returns a future that completes when it is done. A native rule returns the backend's own
asynchronous work's future (``dist.all_reduce(..., async_op=True).get_future()``, as
``torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py`` does); collbench's schedules run on
one worker thread per hook, bucket after bucket in the order DDP hands them over. The hook decides
and compiles once per bucket shape (elements, dtype, device, group) and reuses both; ``all_reduce``
builds per call.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from collbench.errors import ConfigError
from collbench.layouts.model import Layout
from collbench.nccl.variants import is_native
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.runtime.executor.schedule_runner import ScheduleRunner
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op

_REDOPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN, "prod": dist.ReduceOp.PRODUCT}

CommHook = Callable[[Any, dist.GradBucket], torch.futures.Future[torch.Tensor]]
"""What ``DistributedDataParallel.register_comm_hook`` takes: (state, bucket) -> future of the bucket."""


@dataclass
class _Runners:
    """Compiled schedules of one profile, per (rule, count, dtype, device): built on first use."""

    profile: Profile
    cache: dict[tuple[Any, ...], ScheduleRunner] = field(default_factory=dict)

    def runner(self, rule_set: RuleSet, rule: Rule, count: int, tensor: torch.Tensor, group: Any) -> ScheduleRunner:
        world = dist.get_world_size(group)
        key = (rule.min_bytes, rule.algo, count, tensor.dtype, tensor.device, world, id(group))
        found = self.cache.get(key)
        if found is None:
            schedule = _build(rule_set, rule, world, count, tensor.element_size())
            found = ScheduleRunner(
                schedule,
                rank=dist.get_rank(group),
                group=group,
                segment_bytes=rule.params.get("segment_bytes"),
                elem_bytes=tensor.element_size(),
                device=tensor.device,
            )
            self.cache[key] = found
        return found


def _layout(rule_set: RuleSet, rule: Rule, world: int) -> Layout | None:
    """The layout the rule was measured with, when its rule set recorded one for this world size."""
    name = rule.params.get("layout")
    saved = rule_set.layout
    if saved is None or name != saved.name or world != rule_set.world_size:
        return None
    return Layout(rings=saved.rings, trees=saved.trees, name=saved.name)


def _build(rule_set: RuleSet, rule: Rule, world: int, count: int, elem_bytes: int) -> Schedule:
    from collbench.schedules.registry import get_algorithm

    spec = get_algorithm(rule.algo)
    segments = int(rule.params.get("segments") or 1)
    seg_bytes = rule.params.get("segment_bytes")
    if seg_bytes and "segments" not in rule.params:
        # The sweep pipelined segmented schedules (trees) this way; build what was measured.
        segments = spec.segments_for(count * elem_bytes, int(seg_bytes))
    return spec.build(Op.ALL_REDUCE, world, count, layout=_layout(rule_set, rule, world), segments=segments)


def _rule_set(profile: Profile, group: Any) -> RuleSet:
    """The profile's rule set for the group's size (UserError naming the sizes it has otherwise)."""
    return profile.rule_set(dist.get_world_size(group))


def _check_initialised() -> None:
    if not dist.is_initialized():
        raise ConfigError("torch.distributed is not initialised: call dist.init_process_group first")


def _all_reduce(tensor: torch.Tensor, profile: Profile, group: Any, redop: str, runners: _Runners) -> Rule:
    _check_initialised()
    if redop not in (*_REDOPS, "avg"):
        raise ConfigError(f"unknown reduction {redop!r}; known: {', '.join([*_REDOPS, 'avg'])}")
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
            dist.all_reduce(tensor, op=_REDOPS[redop], group=group)
        return rule
    # The executor works on one flat buffer; a contiguous tensor's view shares its memory.
    flat = tensor.view(-1) if tensor.is_contiguous() else tensor.contiguous().view(-1)
    runners.runner(rule_set, rule, flat.numel(), flat, group).run(flat, redop)
    if flat.data_ptr() != tensor.data_ptr():
        tensor.copy_(flat.view_as(tensor))
    return rule


def all_reduce(tensor: torch.Tensor, profile: Profile, group: Any = None, *, op: str = "sum") -> Rule:
    """All-reduce ``tensor`` in place across ``group`` with the algorithm the profile picks for its size.

    The rule comes from the profile's rule set for the group's size (its measured one where the
    profile has that size both measured and predicted), so one profile serves every group of a job:
    tensor-parallel, data-parallel, the world. ``op`` is sum, prod, min, max or avg. Returns the rule
    that was applied. Raises ConfigError when torch.distributed is not initialised; UserError when the
    profile has no rule set for the group's size or no all-reduce rules; torch.distributed errors
    pass through.
    """
    return _all_reduce(tensor, profile, group, op, _Runners(profile))


_Job = tuple[ScheduleRunner, torch.Tensor, "torch.futures.Future[torch.Tensor]", Any]
"""One bucket for the worker: its compiled schedule, its buffer, the future to complete, and the
CUDA stream the buffer was written on (None on CPU)."""


def _run_schedules(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """The worker thread's loop: run each bucket's schedule in turn and complete its future.

    After one schedule fails, every later bucket fails with that error too: the peers' point-to-point
    messages no longer line up with this rank's, so running the next schedule could only hang or
    pair the wrong data.
    """
    failure: BaseException | None = None
    while (job := jobs.get()) is not None:
        runner, buffer, future, stream = job
        if failure is not None:
            # torch annotates set_exception's argument as the future's value type; it takes an exception.
            future.set_exception(RuntimeError(f"an earlier bucket's all-reduce failed: {failure}"))  # type: ignore[arg-type]
            continue
        try:
            # A thread's current CUDA device and stream are its own: run where the bucket was written,
            # so the schedule's kernels follow the backward's writes into the bucket.
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                runner.run(buffer, "sum")
        except BaseException as exc:
            # Handed to DDP through the future, which raises it in backward on this rank.
            failure = exc
            future.set_exception(exc)  # type: ignore[arg-type]
        else:
            future.set_result(buffer)


class _ScheduleWorker:
    """One daemon thread that runs collbench's schedules for the buckets a hook hands it, in order.

    Every rank's DDP hands buckets to its hook in the same order (bucket index order), so one thread
    per hook runs the same sequence of schedules on every rank: their point-to-point messages pair up
    as they do in a sweep. The thread stops when the hook is garbage-collected; it is a daemon so a
    schedule blocked on a dead peer never holds the interpreter's exit.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        thread = threading.Thread(target=_run_schedules, args=(self._jobs,), name="collbench-ddp-hook", daemon=True)
        thread.start()
        weakref.finalize(self, self._jobs.put, None)

    def submit(self, runner: ScheduleRunner, buffer: torch.Tensor) -> torch.futures.Future[torch.Tensor]:
        future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        stream = torch.cuda.current_stream(buffer.device) if buffer.device.type == "cuda" else None
        self._jobs.put((runner, buffer, future, stream))
        return future


@dataclass(frozen=True, slots=True)
class _BucketPlan:
    """What the hook does with buckets of one shape: divide by ``world_size``, then run ``runner``
    (None: the backend's own all-reduce)."""

    world_size: int
    rule: Rule
    runner: ScheduleRunner | None


def _first(future: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
    """The all-reduced tensor of a work's future, whose value is the list of tensors it reduced."""
    return future.value()[0]


class _BucketAllReduce:
    """The DDP hook's state: one plan per bucket shape, and the worker thread (started on first use)."""

    def __init__(self, profile: Profile) -> None:
        self._profile = profile
        self._runners = _Runners(profile)
        self._plans: dict[tuple[int, torch.dtype, torch.device, Any], _BucketPlan] = {}
        self._worker: _ScheduleWorker | None = None

    def _plan(self, buffer: torch.Tensor, group: Any) -> _BucketPlan:
        _check_initialised()
        world = dist.get_world_size(group)
        rule_set = _rule_set(self._profile, group)
        rule = rule_set.select(Op.ALL_REDUCE, buffer.numel() * buffer.element_size())
        if is_native(rule.algo) or buffer.numel() == 0:
            return _BucketPlan(world, rule, None)
        return _BucketPlan(world, rule, self._runners.runner(rule_set, rule, buffer.numel(), buffer, group))

    def __call__(self, group: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        buffer: torch.Tensor = bucket.buffer()
        # The group object itself, not None, in the key: a job that re-creates its default group gets
        # new plans, and the key keeps the group alive so its id is never reused.
        key = (buffer.numel(), buffer.dtype, buffer.device, group if group is not None else dist.group.WORLD)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._plan(buffer, group)
        # Divide first, as the default hook does, so sums of large gradients stay in range.
        buffer.div_(plan.world_size)
        if plan.runner is None:
            work = dist.all_reduce(buffer, group=group, async_op=True)
            assert work is not None  # async_op=True always returns the work
            return work.get_future().then(_first)
        if self._worker is None:
            self._worker = _ScheduleWorker()
        return self._worker.submit(plan.runner, buffer)


def ddp_comm_hook(profile: Profile) -> CommHook:
    """A DistributedDataParallel communication hook that all-reduces buckets as the profile says.

    Use ``model.register_comm_hook(state, hook)`` with ``state`` a process group or None (the default
    group). Like DDP's default hook it averages gradients: each bucket is divided by the world size,
    then summed across ranks, and the hook returns a future at once, completed when the bucket's
    all-reduce is done, so communication overlaps with the rest of backward. A bucket whose size the
    profile gives to ``native`` is the backend's asynchronous all-reduce; other buckets run
    collbench's schedule on a worker thread, one bucket after the other. Each bucket shape's rule and
    schedule are chosen and compiled on its first call and kept for the life of the hook. Errors of a
    bucket's all-reduce reach DDP through the future (DDP raises them in backward).
    """
    state = _BucketAllReduce(profile)

    def hook(group: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        return state(group, bucket)

    # DDP compares the hook's annotations with the real objects; this module's annotations are strings
    # (postponed evaluation), so state them as objects.
    hook.__annotations__ = {"group": Any, "bucket": dist.GradBucket, "return": torch.futures.Future[torch.Tensor]}
    return hook


def _native_throughout(rule_set: RuleSet, smallest_bytes: int, largest_bytes: int) -> bool:
    """Whether every all-reduce rule that meets ``[smallest_bytes, largest_bytes]`` is native."""
    return all(
        is_native(r.algo)
        for r in rule_set.rules_for(Op.ALL_REDUCE)
        if r.min_bytes <= largest_bytes and (r.max_bytes is None or r.max_bytes >= smallest_bytes)
    )


def register_comm_hook(model: torch.nn.Module, profile: Profile, group: Any = None) -> CommHook | None:
    """Make ``model`` (a DistributedDataParallel) all-reduce its buckets as the profile says.

    Registers :func:`ddp_comm_hook` on ``model`` with ``group`` as its state, unless the profile's
    rules for the group's size are native at every size a bucket of this model can have: then nothing
    is registered and DDP keeps its built-in all-reduce, which runs without Python per bucket (any
    Python hook, torch's own ``allreduce_hook`` included, adds a call and a callback under the GIL to
    each bucket). DDP never splits a parameter across buckets, so a bucket holds between the smallest
    parameter's gradient and all of them. Returns the hook registered, or None. Raises ConfigError
    when torch.distributed is not initialised; UserError when the profile has no all-reduce rules
    for the group's size.
    """
    _check_initialised()
    if not isinstance(model, DistributedDataParallel):
        raise ConfigError(f"register_comm_hook needs a DistributedDataParallel model, got {type(model).__name__}")
    grads = [p.numel() * p.element_size() for p in model.parameters() if p.requires_grad]
    if not grads or _native_throughout(_rule_set(profile, group), min(grads), sum(grads)):
        return None
    hook = ddp_comm_hook(profile)
    model.register_comm_hook(group, hook)
    return hook

"""The DDP communication hook that all-reduces a model's buckets as a profile says (the package's notes
say how it overlaps with backward and which thread issues what)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from collbench.backends import for_torch
from collbench.errors import ConfigError
from collbench.nccl.variants import is_native
from collbench.profile.document import Profile
from collbench.profile.rules import Rule
from collbench.runtime.ddp import ScheduleWorker, bucket_bytes
from collbench.runtime.executor.schedule_runner import ScheduleRunner
from collbench.schedules.ops import Op
from collbench.torch.rules import Runners, check_initialised, check_profile, choose, group_rule_set
from collbench.units import format_bytes

CommHook = Callable[[Any, dist.GradBucket], torch.futures.Future[torch.Tensor]]
"""What ``DistributedDataParallel.register_comm_hook`` takes: (state, bucket) -> future of the bucket."""


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
        self._runners = Runners(profile)
        self._plans: dict[tuple[int, torch.dtype, torch.device, Any], _BucketPlan] = {}
        self._worker: ScheduleWorker | None = None

    def _plan(self, buffer: torch.Tensor, group: Any) -> _BucketPlan:
        rule_set, rule = choose(self._profile, group, Op.ALL_REDUCE, buffer.numel() * buffer.element_size())
        world = dist.get_world_size(group)
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


class DDPDefaultPath(UserWarning):
    """Said once where collbench leaves DDP its own all-reduce: the profile is native where it matters."""


def _say_once(text: str) -> None:
    """Tell the user, once per job (rank 0) and per place in their code (Python's default warning filter)."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        warnings.warn(text, DDPDefaultPath, stacklevel=3)


def _native_everywhere(profile: Profile) -> bool:
    """Whether the profile has all-reduce rules and every one, in every rule set, is native."""
    check_profile(profile)
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
    check_initialised()
    if not isinstance(model, DistributedDataParallel):
        raise ConfigError(f"register_comm_hook needs a DistributedDataParallel model, got {type(model).__name__}")
    rule_set = group_rule_set(profile, group)
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

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
group's point-to-point transport, on the layout (ring orders, trees) the profile recorded. The DDP
hook compiles each bucket size's schedule once and reuses it; ``all_reduce`` builds per call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from collbench.errors import ConfigError
from collbench.layouts.model import Layout
from collbench.nccl.variants import is_native
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.schedules.ops import Op

_REDOPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN, "prod": dist.ReduceOp.PRODUCT}


@dataclass
class _Runners:
    """Compiled schedules of one profile, per (rule, count, dtype, device): built on first use."""

    profile: Profile
    cache: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    def runner(self, rule_set: RuleSet, rule: Rule, count: int, tensor: torch.Tensor, group: Any) -> Any:
        from collbench.runtime.executor.schedule_runner import ScheduleRunner

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


def _build(rule_set: RuleSet, rule: Rule, world: int, count: int, elem_bytes: int) -> Any:
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


def _all_reduce(tensor: torch.Tensor, profile: Profile, group: Any, redop: str, runners: _Runners) -> Rule:
    if not dist.is_initialized():
        raise ConfigError("torch.distributed is not initialised: call dist.init_process_group first")
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


def ddp_comm_hook(profile: Profile) -> Callable[[Any, Any], torch.futures.Future[torch.Tensor]]:
    """A DistributedDataParallel communication hook that all-reduces buckets as the profile says.

    Use ``model.register_comm_hook(state, hook)`` with ``state`` a process group or None (the default
    group). Like DDP's default hook it averages gradients: each bucket is divided by the world size,
    then summed across ranks. The returned future is already complete (the all-reduce runs in the
    hook); compiled schedules are kept per bucket size for the life of the hook.
    """
    runners = _Runners(profile)

    def hook(state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        group = state if state is not None else None
        buffer: torch.Tensor = bucket.buffer()
        # Divide first, as the default hook does, so sums of large gradients stay in range.
        buffer.div_(dist.get_world_size(group))
        _all_reduce(buffer, profile, group, "sum", runners)
        future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        future.set_result(buffer)
        return future

    # DDP compares the hook's annotations with the real objects; this module's annotations are strings
    # (postponed evaluation), so state them as objects.
    hook.__annotations__ = {"state": Any, "bucket": dist.GradBucket, "return": torch.futures.Future[torch.Tensor]}
    return hook

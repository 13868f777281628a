"""Which rule of a profile a call of the Python API runs, and the runner of its schedule.

Shared by the calls (:mod:`collbench.torch.collectives`) and the DDP hook (:mod:`collbench.torch.ddp`):
the group's rule set, chosen by the nodes its ranks report; the plan a rule's schedule is compiled to
(the process's plan cache); the warnings said once where a rule cannot run as it was measured.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import torch
import torch.distributed as dist

from collbench.errors import ConfigError
from collbench.layouts.model import Layout
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.runtime.ddp import group_nodes, other_backend
from collbench.runtime.executor.plan_cache import PLANS, PlanKey
from collbench.runtime.executor.schedule_runner import ScheduleRunner
from collbench.schedules.ops import Op
from collbench.schedules.spec import MAX_SEGMENTS
from collbench.units import ranks_on_nodes


@dataclass
class Runners:
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
            wanted = plan_key(rule_set, rule, world, count, elem_bytes, op, root, rank, tensor.device)
            plan = PLANS.plan(wanted)  # built for this rank alone on a miss (plan_cache.build_schedule)
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


def plan_key(
    rule_set: RuleSet, rule: Rule, world: int, count: int, elem_bytes: int, op: Op, root: int, rank: int, device: Any
) -> PlanKey:
    """What the rule's schedule and plan are built with, as the plan cache's key. Raises ConfigError for
    segments a schedule cannot take."""
    segments = int(rule.params.get("segments") or 1)
    seg_bytes = rule.params.get("segment_bytes")
    # Every rank has the same profile, tensor size and dtype: each refuses alike, before any message.
    where = f"the profile's {op.value} rule at {rule.min_bytes} bytes"
    if not 1 <= segments <= MAX_SEGMENTS:
        raise ConfigError(f"{where} cuts the message in {segments} segments; a schedule takes 1 to {MAX_SEGMENTS}")
    if seg_bytes is not None and seg_bytes < elem_bytes:
        raise ConfigError(f"{where} has segments of {seg_bytes} bytes, less than one {elem_bytes}-byte element")
    # Without segments of its own the rule is pipelined as the sweep that measured it was (as_measured).
    given = segments if "segments" in rule.params else None
    layout = _layout(rule_set, rule, world)
    seg = int(seg_bytes) if seg_bytes else None
    return PlanKey.as_measured(rule.algo, op, world, count, rank, root, layout, elem_bytes, seg, device, given)


def check_profile(profile: object) -> None:
    """ConfigError unless ``profile`` is a loaded :class:`Profile`: its path, given as the profile, was an
    AttributeError ('str' object has no attribute 'rule_set') from deep inside the call."""
    if not isinstance(profile, Profile):
        shown = f" {str(profile)[:80]!r}" if isinstance(profile, (str, PurePath)) else ""
        raise ConfigError(
            f"profile is a {type(profile).__name__}{shown}, not a collbench.Profile: load the file once with "
            "collbench.Profile.load(path) and pass what it returns"
        )


def group_rule_set(profile: Profile, group: Any) -> RuleSet:
    """The profile's rule set for the group's size on the nodes its ranks report (:func:`group_nodes`), said
    once per group (rank 0); UserError naming the profile's shapes when it has not that one."""
    check_profile(profile)
    world = dist.get_world_size(group)
    nodes, gathered = group_nodes(group)
    rule_set = profile.rule_set(world, nodes)
    if gathered and (not dist.is_initialized() or dist.get_rank() == 0):
        warnings.warn(
            f"collbench: this group is {ranks_on_nodes(world, nodes)} (by the host name and boot id each rank "
            f"reports): it runs the profile's rules for {rule_set.shape_label}",
            GroupShape,
            stacklevel=user_stacklevel(),
        )
        if other := other_backend(profile.backend, group):
            warnings.warn(other, OtherBackend, stacklevel=user_stacklevel())
    return rule_set


def user_stacklevel() -> int:
    """The warning's stack level of the first caller outside this package and torch's (no_grad, backward) frames."""
    frame, level = sys._getframe(2), 2  # the caller's caller: level 1 is the frame that warns
    while frame.f_back is not None and f"{frame.f_globals.get('__name__')}.".startswith((f"{__package__}.", "torch.")):
        frame, level = frame.f_back, level + 1
    return level


def check_initialised() -> None:
    """ConfigError, before any rule is read, when the job has no process group yet."""
    if not dist.is_initialized():
        raise ConfigError("torch.distributed is not initialised: call dist.init_process_group first")


class LayoutNotHeld(UserWarning):
    """Said once where a rule names a layout its rule set does not hold, and runs in rank order."""


class GroupShape(UserWarning):
    """Said once per process group: the shape whose rules it runs, on the nodes its ranks report."""


class OtherBackend(UserWarning):
    """Said once per process group where it runs another backend than the profile was measured over."""


def choose(profile: Profile, group: Any, op: Op, nbytes: int) -> tuple[RuleSet, Rule]:
    """The group's rule set and its rule for ``op`` at ``nbytes``; ConfigError when torch.distributed is not
    initialised, UserError when the profile has no rule for the group's shape."""
    check_initialised()
    rule_set = group_rule_set(profile, group)
    return rule_set, rule_set.select(op, nbytes)


def run_schedule(
    profile: Profile, rule_set: RuleSet, rule: Rule, op: Op, count: int, buffer: torch.Tensor, group: Any, root: int = 0
) -> None:
    """Run ``rule``'s schedule of ``op`` over ``count`` elements on ``buffer`` (laid out as the op's schedule
    lays it out), as a sum."""
    Runners(profile).runner(rule_set, rule, count, buffer, group, op, root).run(buffer, "sum")

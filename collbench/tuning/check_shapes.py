"""``collbench tune --check PROFILE`` over every communicator shape of the profile.

Each rule set this machine can run is re-measured (tuning/check.py). A set it cannot run is reported
as skipped, with why, in one line:

- a predicted set: its rules come from the fitted models, not from a choice between measurements;
  ``collbench tune --ranks N`` measures that shape;
- a set of several nodes, locally (this machine is one node), or, under a launcher, any shape other
  than the job's (the launcher fixed the world);
- locally, a set with more ranks than this machine starts at once: one per GPU with NCCL; with CPU
  ranks ``max(4, usable cores)`` (tune's own default is at most 4; past the cores ranks share them,
  which ``tune --ranks 2,4`` on two cores does, and is allowed);
- a set whose world size ``--ranks`` did not name, when it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from collbench.backends import backend_named
from collbench.errors import ConfigError
from collbench.profile.document import Profile, RuleSet
from collbench.runtime.here import HERE
from collbench.tuning.check import RuleCheck
from collbench.tuning.sweeps import Progress
from collbench.units import counted, ranks_on_nodes


@dataclass(frozen=True, slots=True)
class ShapeCheck:
    """One rule set: its re-measured rules, or why it was not re-measured here."""

    rule_set: RuleSet
    checks: tuple[RuleCheck, ...] = ()
    skipped: str = ""
    """Why this shape was not re-measured ("" when it was)."""


@dataclass(frozen=True, slots=True)
class Machine:
    """What shapes this run can make: the launcher's job, or local ranks up to ``max_ranks``."""

    job_shape: tuple[int, int] | None
    """(world size, nodes) of the launcher's job this process is a rank of; None locally."""
    max_ranks: int
    why_max: str
    """What ``max_ranks`` comes from, for the skip line."""


def this_machine(backend: str) -> Machine:
    """The shapes this process can run with ``backend``: its launcher's job, else local GPUs or cores."""
    from collbench.runtime.host.affinity import DEFAULT_MAX_RANKS, cgroup_cpu_limit, usable_cores
    from collbench.runtime.launch.ranks import joined_job

    job = joined_job()
    if job is not None:
        shape = HERE.job_shape(None)  # the nodes its ranks report, not world // local size
        return Machine(shape, job.world_size, f"the {job.launcher} job's world")
    named = backend_named(backend)
    if named is not None and named.on_gpu:
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return Machine(None, gpus, f"{counted(gpus, 'GPU')} here, one rank each")
    cores = usable_cores(quota=cgroup_cpu_limit())
    return Machine(None, max(DEFAULT_MAX_RANKS, cores), f"CPU ranks here: at most max(4, {cores} usable cores)")


def why_skipped(rule_set: RuleSet, machine: Machine, asked: Sequence[int] | None) -> str:
    """Why ``rule_set`` is not re-measured on ``machine`` ("" when it is); ``asked`` is ``--ranks``."""
    shape = rule_set.shape_label
    if rule_set.predicted:
        return f"{shape}: predicted from the fitted models, not chosen by measuring; `tune --ranks N` measures it"
    if asked is not None and rule_set.world_size not in asked:
        return f"{shape}: not asked for (--ranks {','.join(map(str, asked))})"
    if machine.job_shape is not None:
        world, nodes = machine.job_shape
        if rule_set.shape != machine.job_shape:
            return f"{shape}: this job is {ranks_on_nodes(world, nodes)}; check that shape under a launcher of it"
        return ""
    if rule_set.nodes > 1:
        return f"{shape}: this machine is one node; check it under a launcher (torchrun, mpirun, srun) of that shape"
    if rule_set.world_size > machine.max_ranks and asked is None:
        n = rule_set.world_size
        return f"{shape}: more ranks than this machine starts ({machine.why_max}); --ranks {n} asks anyway"
    return ""


def run_check_shapes(
    profile: Profile,
    *,
    ranks: Sequence[int] | None,
    backend: str,
    stream_dir: Path,
    progress: Progress | None = None,
    machine: Machine | None = None,
    timeout_s: float = 300.0,
) -> list[ShapeCheck]:
    """Re-measure every rule set of ``profile`` this machine can run; the others come back skipped, with why.

    ``ranks`` (``--ranks``) restricts the check to those world sizes, and lets a shape past this
    machine's usual rank count run. The sets are measured on the profile's own backend
    (``check.check_backend``: ``backend`` is ``auto`` or that one). Raises ConfigError for a
    ``--ranks`` value the profile has no measured rule set for, and when no set at all can be
    re-measured here (naming why for each). ``timeout_s`` (``--timeout``) bounds each step's collectives.
    """
    from collbench.tuning import check

    backend = check.check_backend(profile, backend)
    machine = machine or this_machine(backend)
    measured = {s.world_size for s in profile.rule_sets if not s.predicted}
    missing = [n for n in ranks or () if n not in measured]
    if missing:
        raise ConfigError(
            f"--ranks {','.join(map(str, missing))}: the profile has no measured rules for that; "
            f"it has: {profile.shapes_label()}"
        )
    plan = [(s, why_skipped(s, machine, ranks)) for s in profile.rule_sets]
    if all(why for _, why in plan):
        raise ConfigError(
            "--check: no rule set of the profile can be re-measured here: " + "; ".join(w for _, w in plan)
        )
    out: list[ShapeCheck] = []
    for rule_set, why in plan:
        if why:
            out.append(ShapeCheck(rule_set, skipped=why))
            continue
        world = None if machine.job_shape is not None else rule_set.world_size
        checks = check.run_check(
            profile,
            world_size=world,
            backend=backend,
            rounds=check.CHECK_ROUNDS,
            point_budget_s=check.CHECK_BUDGET_S,
            timeout_s=timeout_s,
            stream_dir=stream_dir,
            progress=progress,
            rule_set=rule_set,
        )
        out.append(ShapeCheck(rule_set, tuple(checks)))
    return out

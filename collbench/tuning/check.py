"""``collbench tune --check PROFILE``: re-measure a profile's choices against the alternatives.

For every rule, at its ``at_bytes`` (the measured size the rule was decided at; the middle of its range
when it has none), every algorithm the profile's own backend chose among for the op is measured again,
on that backend, in rounds that alternate the algorithms' order: a profile of ``tune --backend mpi``
re-measures Open MPI's own algorithms under mpirun, never collbench's schedules over gloo (its rules
are not a choice among those). The *regret* of the rule is the time of its chosen algorithm over the time of the
fastest one there (1.0: the choice was the best), with its uncertainty: the two points' relative noise
(``selection.Point.noise``: within-point spread, and the gap between the two best rounds) added in
quadrature.
A rule is *beaten* where the fastest algorithm would win against its choice in a tune
(``selection.beaten_by``): faster beyond the pair's noise bar and ahead round by round over the check's
rounds (Student's t, as the tune's own test). The regret's uncertainty alone took the noise as known
and normal, and the fastest of several tied algorithms is the one luck favoured most: a rule whose
choice was as fast as the best was beaten in up to 5.2% of checks (3 or 5 rounds, simulated), where
2 standard errors claim 2.3%; the tune's test says so in 0.2-1.7% (benchmarks/
bench_selection_confidence.py; tests/unit/test_selection_confidence.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from collbench.backends import get_backend
from collbench.errors import ConfigError
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule, Variant
from collbench.results.row import ResultRow
from collbench.runtime.here import HERE
from collbench.schedules.ops import Op
from collbench.tuning.config import TUNE_ELEMENT_BYTES
from collbench.tuning.selection import (
    Point,
    SelectionSettings,
    beaten_by,
    in_round,
    measured_points,
    ratio_error,
)
from collbench.tuning.sweeps import IN_PLACE, OUT_OF_PLACE, Progress, algorithm_order

CHECK_ROUNDS = 3
CHECK_BUDGET_S = 0.1
"""Timed seconds per point and round."""


@dataclass(frozen=True, slots=True)
class RuleCheck:
    """One rule re-measured: the chosen algorithm's time against the fastest one's, at one size."""

    rule: Rule
    size_bytes: int
    chosen_us: float | None
    """The time the regret divides, every round at the fastest round's speed (``Point.time_us``); None
    when the chosen algorithm could not be measured here (it needs a layout or variant not run)."""
    best_algo: str
    best_us: float
    """The fastest algorithm's time, at that same speed: ``regret`` is ``chosen_us / best_us``."""
    regret: float | None
    """chosen / best (>= 1); None when the chosen algorithm was not measured."""
    regret_err: float | None
    """Absolute uncertainty of the regret (one standard error, from the two points' noise)."""
    faulted: bool
    """Whether the re-measurement shows a faster algorithm beyond the noise, as a tune asks of a winner
    (``selection.beaten_by``); False when the chosen algorithm was not measured."""


def check_sizes(profile: Profile, rule_set: RuleSet | None = None) -> list[tuple[Rule, int]]:
    """Each rule of ``rule_set`` (default: the profile's default shape), with the size it is checked at."""
    out = []
    target = rule_set or profile.default_set
    for rule in target.rules:
        spec = Op.parse(rule.op).spec
        if not spec.payload:
            out.append((rule, 0))  # barrier: its one point, at 0 bytes
            continue
        if rule.at_bytes is not None:
            size = rule.at_bytes
        elif rule.max_bytes is None:
            size = max(rule.min_bytes, 1)
        else:
            size = int(math.sqrt(max(rule.min_bytes, 1) * max(rule.max_bytes, 1)))
        # Whole float32 elements; for the block ops whole blocks, as the sweep measures them (op_count).
        unit = 4 * target.world_size if spec.blocks else 4
        out.append((rule, max(size - size % unit, unit)))
    return out


def check_backend(profile: Profile, asked: str) -> str:
    """The backend the profile's rules were chosen on, which its check re-measures on.

    ``asked`` (``--backend``) may be ``auto`` or that same backend; another one is refused in one line:
    its candidates are not the ones the rules were chosen among.
    """
    own = profile.backend.strip().lower()
    wanted = asked.strip().lower()
    if wanted in ("", "auto") or wanted == own:
        return own
    raise ConfigError(
        f"the profile's rules were chosen over {own}; --check re-measures them there: "
        f"use --backend {own} or leave --backend out (not {asked})"
    )


def check_candidates(backend: str, op: str, rule_set: RuleSet) -> tuple[str, ...]:
    """What the check measures for ``op`` on ``backend``: what a tune there chooses among.

    mpi: Open MPI's fixed decision (``native``) and every algorithm this Open MPI can be forced to run
    for the op; nccl: collbench's algorithms, ``native`` and NCCL's own algorithm x protocol x channel
    variants for the rule set's shape; gloo: collbench's algorithms and ``native``.
    """
    chosen = get_backend(backend)
    shape = chosen.comm_shape(rule_set.world_size, rule_set.nodes, HERE)
    return chosen.tune_candidates((op,), algorithm_order((op,)), shape, HERE)


def regrets(profile: Profile, rows: list[ResultRow], rule_set: RuleSet | None = None) -> list[RuleCheck]:
    """The regret of every rule of ``rule_set`` (default: the default shape's) from re-measured rows
    (several rounds of every algorithm at its size)."""
    points = measured_points(rows)
    settings = SelectionSettings()  # what a tune decides with (no option changes it)
    out = []
    for rule, size in check_sizes(profile, rule_set):
        here: dict[Variant, Point] = {v: pts[size] for v, pts in points.get(rule.op, {}).items() if size in pts}
        if not here:
            raise ConfigError(f"{rule.op} at {size} bytes: nothing was measured to check the rule against")
        best = min(here, key=lambda v: here[v].time_us)
        mine = [v for v in here if v.algo == rule.algo]
        if not mine:
            out.append(RuleCheck(rule, size, None, best.algo, here[best].time_us, None, None, faulted=False))
            continue
        chosen = min(mine, key=lambda v: here[v].time_us)
        if chosen == best:
            others = [v for v in here if v != chosen]
            rival = min(others, key=lambda v: here[v].time_us) if others else chosen
        else:
            rival = best
        regret = here[chosen].time_us / here[best].time_us
        err = ratio_error(regret, here[chosen], here[rival])
        # The times shown are the ones the regret divides, at the fastest round's speed: each point's
        # smallest time as measured (``shown_us``) can come from rounds of other speeds than its rival's,
        # and showed the chosen one faster than the one named fastest beside a regret above 1.
        beaten = chosen != best and beaten_by(here[chosen], here[best], settings)
        out.append(RuleCheck(rule, size, here[chosen].time_us, best.algo, here[best].time_us, regret, err, beaten))
    return out


def run_check(
    profile: Profile,
    *,
    world_size: int | None,
    backend: str = "auto",
    rounds: int = CHECK_ROUNDS,
    point_budget_s: float = CHECK_BUDGET_S,
    timeout_s: float = 300.0,
    stream_dir: Path,
    progress: Progress | None = None,
    rule_set: RuleSet | None = None,
) -> list[RuleCheck]:
    """Measure every applicable algorithm at each rule's size, ``rounds`` times, and return the regrets
    (none on a launcher's ranks other than 0: rank 0 alone holds the rows).

    ``rule_set`` is the shape to check (default: the profile's default shape). The measuring runs on the
    profile's own backend (:func:`check_backend`), among what it chose from there (:func:`check_candidates`).
    Raises ConfigError when ``world_size`` differs from that shape's (its choices are for that shape),
    and when ``backend`` names a backend other than the profile's.
    """
    from collbench.runtime.launch.pool import local_group
    from collbench.runtime.launch.ranks import job_rank

    target = rule_set or profile.default_set
    if target.world_size < 2:
        # One rank moves no data: its "collectives" are copies, and a check would fault rules on them.
        raise ConfigError(
            f"the profile's rules for {target.shape_label}: nothing to check, a collective needs at least 2 ranks"
        )
    if world_size is not None and world_size != target.world_size:
        raise ConfigError(f"the profile is for {target.world_size} ranks; check it with --ranks {target.world_size}")
    if rounds < 1:
        raise ConfigError(f"--check needs at least 1 round, got {rounds}")
    backend = check_backend(profile, backend)
    sizes = sorted({(rule.op, size) for rule, size in check_sizes(profile, target)})
    # Every sweep of the check (a round at each rule's size) on one set of local ranks, as a tune's.
    with local_group(world_size, backend, timeout_s):
        rows = _measure(target, backend, sizes, world_size, rounds, point_budget_s, timeout_s, stream_dir, progress)
    if job_rank() != 0:
        # Under a launcher rank 0 alone gets the rows (as in a sweep): the others measured their part,
        # and have nothing to judge (they ended with 'nothing was measured', exit 2, after rank 0's table).
        return []
    return regrets(profile, rows, target)


def _measure(
    target: RuleSet,
    backend: str,
    sizes: list[tuple[Op, int]],
    world_size: int | None,
    rounds: int,
    point_budget_s: float,
    timeout_s: float,
    stream_dir: Path,
    progress: Progress | None,
) -> list[ResultRow]:
    from collbench.runtime.sweep.plan import SweepConfig
    from collbench.runtime.sweep.run import run_sweep

    rows: list[ResultRow] = []
    for i in range(rounds):
        for op, size in sizes:
            names = check_candidates(backend, op, target)
            spec = Op.parse(op).spec
            # As the tune measured: all-to-all and send/recv out of place (Open MPI's harness runs both
            # modes' calls); barrier's one point at 0 bytes, which a sweep measures whatever size it asks.
            mode = OUT_OF_PLACE if spec.out_of_place and not get_backend(backend).in_place_every_op else IN_PLACE
            asked = size if spec.payload else TUNE_ELEMENT_BYTES
            config = SweepConfig(
                world_size=world_size if world_size is not None else None,
                backend=backend,
                ops=(op,),
                algos=names if i % 2 == 0 else tuple(reversed(names)),
                min_bytes=asked,
                max_bytes=asked,
                warmup=1,
                point_budget_s=point_budget_s,
                in_place=mode,
                timeout_s=timeout_s,
                stream=stream_dir / f"check-{target.world_size}x{target.nodes}-{i}-{op}-{size}.jsonl",
            )
            rows.extend(in_round(run_sweep(config, progress), i))
    return rows


def geomean_regret(checks: list[RuleCheck]) -> float | None:
    """Geometric mean of the measured regrets (None when none was measured)."""
    values = [c.regret for c in checks if c.regret is not None and c.regret > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))

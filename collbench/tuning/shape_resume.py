"""``collbench tune --ranks 2,4 --resume``: which shapes of an interrupted several-shape tune to resume.

A several-shape tune runs its shapes in ``--ranks`` order, and each finished shape removes its partial
rows and is saved in the profile at once (tuning/shapes.py). So the last shape with partial rows is
where the run stopped: the shapes before it finished (their rule sets are in the profile, their rows in
their results files), it is resumed, and the shapes after it never started and are measured afresh.
A finished shape is taken from those files, not measured again; where one of them is missing or holds
no rules for it, it is measured again and a note says why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from collbench.errors import UserError
from collbench.profile.document import Profile
from collbench.results.io import read_rows
from collbench.tuning.config import TuneConfig, partial_paths
from collbench.tuning.pipeline import TuneOutcome
from collbench.tuning.resume import check_partials


@dataclass(frozen=True, slots=True)
class ShapePlan:
    """One shape of a several-shape tune: its config (``resume`` set to what it does), or its saved outcome."""

    config: TuneConfig
    finished: TuneOutcome | None = None
    """The outcome rebuilt from the files of a shape that finished before the interruption (not run again)."""


def plan_shapes(configs: Sequence[TuneConfig]) -> tuple[list[ShapePlan], list[str]]:
    """The shapes to run (each resuming or not) or take as finished, and a note per shape measured again.

    Without ``--resume`` every config runs as it is. Raises ConfigError (via ``check_partials``) for
    ``--resume`` when no shape kept partial rows, and without it when any shape did.
    """
    if not configs or not configs[0].resume:
        # Rows an interrupted run kept in any shape are named first: --resume is the way on, even where
        # the shapes it finished also left a profile or results that a fresh tune would refuse to replace.
        for c in configs:
            check_partials(partial_paths(c), resume=False)
        return [ShapePlan(c) for c in configs], []
    kept = [_kept(partial_paths(c)) for c in configs]
    if not any(kept):
        check_partials([p for c in configs for p in partial_paths(c)], resume=True)
    stopped = max(i for i, k in enumerate(kept) if k)
    plans: list[ShapePlan] = []
    notes: list[str] = []
    for i, c in enumerate(configs):
        if kept[i]:
            plans.append(ShapePlan(c))
            continue
        if i > stopped:
            plans.append(ShapePlan(_afresh(c)))  # never started
            continue
        outcome, why = _finished(c)
        if outcome is None:
            notes.append(f"{c.ranks} ranks: {why}; measured again")
            plans.append(ShapePlan(_afresh(c)))
        else:
            plans.append(ShapePlan(c, outcome))
    return plans, notes


def _afresh(config: TuneConfig) -> TuneConfig:
    """A shape of the resumed run measured from the start. It replaces what is at its outputs: the
    interrupted run was let start over them (its check refused files there without --overwrite), and
    the profile there is the one it was writing, the shapes it finished."""
    return dataclasses.replace(config, resume=False, overwrite=True)


def _kept(paths: Sequence[Path]) -> bool:
    return any(p.is_file() and p.stat().st_size > 0 for p in paths)


def _finished(config: TuneConfig) -> tuple[TuneOutcome | None, str]:
    """The outcome of a shape that finished before the interruption, from the profile and its results file."""
    if not config.output.is_file():
        return None, f"finished before the interruption, but {config.output} is gone"
    if not config.rows_path.is_file():
        return None, f"finished before the interruption, but {config.rows_path} is gone"
    try:
        saved = Profile.load(config.output)
        rows = read_rows(config.rows_path)
    except UserError as exc:
        return None, f"finished before the interruption, but its files cannot be read ({exc})"
    sets = [s for s in saved.rule_sets if not s.predicted and s.world_size == config.ranks]
    if not sets or any(r.world_size != config.ranks for r in rows):
        return None, f"{config.output} or {config.rows_path} does not hold its measurements"
    profile = dataclasses.replace(
        saved,
        rule_sets=(sets[0],),
        fits=tuple(f for f in saved.fits if f.world_size == config.ranks),
    )
    png = config.png_path
    outcome = TuneOutcome(
        profile=profile,
        rows=rows,
        fits=[],
        notes=[
            f"{config.ranks} ranks: finished before the interruption; its rules are taken from {config.output} "
            f"and its rows from {config.rows_path}, not measured again"
        ],
        profile_path=config.output,
        results_path=config.rows_path,
        plot_path=png if png.is_file() else None,
        elapsed_s=0.0,
        resumed_whole=True,
    )
    return outcome, ""

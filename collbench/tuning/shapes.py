"""Tuning several communicator shapes into one profile.

``collbench tune --ranks 2,4`` runs the whole tune pipeline (:func:`~collbench.tuning.pipeline.run_tune`)
once per rank count, each with its own results and plot files (``NAME-2ranks-results.jsonl``, ...),
and joins the measured rule sets into the one profile asked for. ``--predict-ranks 8,16`` then adds
rule sets for shapes nobody measured (tuning/predicted_shapes.py, which needs no torch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.errors import ConfigError
from collbench.profile.document import Profile
from collbench.profile.merge import join_shapes
from collbench.tuning.config import TuneConfig, check_config, check_fresh, shape_configs
from collbench.tuning.pipeline import TuneOutcome, check_backend_runs, run_tune
from collbench.tuning.predicted_shapes import assumed_nodes, prediction_notes, with_predictions
from collbench.tuning.shape_args import Shape
from collbench.tuning.shape_resume import ShapePlan, plan_shapes
from collbench.tuning.sweeps import Progress

if TYPE_CHECKING:
    from collbench.models.nccl_graph import NodeFacts


@dataclass(frozen=True, slots=True)
class TunePlan:
    """The shapes a tune runs, their configs checked, or taken whole from an interrupted run's files."""

    shapes: tuple[ShapePlan, ...]
    notes: tuple[str, ...] = ()
    """One line per shape that finished before an interruption but has to be measured again."""


def check_shapes(config: TuneConfig, ranks: Sequence[int] | None) -> TunePlan:
    """Check the config of every shape that will be measured, before anything is: what ``check_config`` raises.

    With ``--resume``, the shapes an interrupted run finished are taken from its files instead, and
    the others resume or start afresh (tuning/shape_resume.py).
    """
    configs = shape_configs(config, ranks)
    for c in configs:
        check_backend_runs(c)
    from collbench.runtime.launch.ranks import joined_job

    job = joined_job()
    if job is None or job.world_size == 1:
        return _plan(configs)
    # A launcher's job: every rank checks the options, rank 0 alone its files (only it writes or
    # resumes), and every rank learns rank 0's verdict, so that all of them stop, or start, together.
    for c in configs:
        check_config(c, files=False)
    from collbench.errors import UserError
    from collbench.runtime.launch.session import agree

    if job.rank != 0:
        refused = agree("checking rank 0's files", lambda: None, timeout_s=config.timeout_s)
        if refused is not None:
            raise ConfigError(f"rank 0: {refused}")
        return TunePlan(tuple(ShapePlan(c) for c in configs))
    try:
        plan = _plan(configs)
    except UserError as exc:
        refusal = str(exc)
        agree("checking rank 0's files", lambda: refusal, timeout_s=config.timeout_s)
        raise
    agree("checking rank 0's files", lambda: None, timeout_s=config.timeout_s)
    return plan


def _plan(configs: Sequence[TuneConfig]) -> TunePlan:
    if not configs[0].resume:
        check_fresh(configs)
        return TunePlan(tuple(ShapePlan(c) for c in configs))
    # The options first: the partial rows are named after -O and --results, which must be file names
    # ('tune -O .' ended in pathlib's "PosixPath('.') has an empty name" while naming them).
    for c in configs:
        check_config(c, files=False)
    plans, notes = plan_shapes(configs)
    for plan in plans:
        if plan.finished is None:
            check_config(plan.config)
    return TunePlan(tuple(plans), tuple(notes))


@dataclass(frozen=True, slots=True)
class ShapesOutcome:
    profile: Profile
    outcomes: list[TuneOutcome]
    """One TuneOutcome per measured shape, in --ranks order."""
    profile_path: Path
    report_path: Path | None = None
    """The HTML report beside the profile, of every shape (None when it could not be written)."""
    notes: list[str] = dataclasses.field(default_factory=list)
    """Fits the predictions left out, and why, one line each."""
    assumed: list[str] = dataclasses.field(default_factory=list)
    """The nodes of each predicted shape that named none, one line each (:func:`assumed_nodes`)."""


def run_tune_shapes(
    config: TuneConfig,
    plan: TunePlan,
    predict: Sequence[Shape] = (),
    stage: Callable[[str], None] | None = None,
    sweep_progress: Progress | None = None,
    facts: NodeFacts | None = None,
) -> ShapesOutcome | None:
    """Tune each shape of ``plan`` (``check_shapes``) in turn, join the rule sets (and fits) into
    ``config.output``, add predictions.

    Every shape's profile is written to ``config.output`` as soon as it is measured, joined with the
    shapes before it, so an interrupted run keeps the shapes it finished; ``facts`` go to the predictions
    (:func:`with_predictions`). Raises what ``run_tune``
    raises; ConfigError for a predicted shape that is measured too. Under a launcher, ranks other
    than 0 return None (rank 0 alone writes).
    """
    measured = {p.config.ranks for p in plan.shapes}
    for shape in predict:
        if shape.world_size in measured and shape.nodes is None:
            raise ConfigError(f"--predict-ranks {shape.world_size}: it is measured too (--ranks)")
    outcomes: list[TuneOutcome] = []
    joined: Profile | None = None

    def save(profile: Profile) -> None:
        nonlocal joined
        joined = profile if joined is None else _join(joined, profile, config.command)
        joined.save(config.output)

    for shape_plan in plan.shapes:
        c = shape_plan.config
        say = (lambda text, r=c.ranks: stage(f"{r} ranks: {text}")) if stage and len(plan.shapes) > 1 else stage
        if shape_plan.finished is not None:
            outcome: TuneOutcome | None = shape_plan.finished
            save(shape_plan.finished.profile)
        else:
            outcome = run_tune(c, say, sweep_progress, checked=True, save=save)
        if outcome is None:
            return None  # a rank other than 0 of a launcher's job (one shape there)
        outcomes.append(outcome)
    assert joined is not None  # at least one config ran
    try:
        final = with_predictions(joined, predict, facts=facts)
    except ConfigError as exc:
        raise ConfigError(f"{exc}; the measured shapes are saved in {config.output}, without predictions") from None
    if final is not joined:
        final.save(config.output)
    report_path = outcomes[-1].report_path
    if len(outcomes) > 1 or final is not joined:
        # Each shape's tune wrote a report of its own shape; the page beside the joined profile shows all.
        from collbench.report.page import write_beside_profile

        rows = [r for o in outcomes for r in o.rows]
        # The files each shape's rows went to: config.rows_path names none of them when shapes split it.
        results = [o.results_path for o in outcomes]
        report_path, why = write_beside_profile(config.output, rows, final, outcomes[-1].topology, results)
        outcomes[-1].notes.extend([why] if why else [])
    notes = prediction_notes(final, predict, facts=facts) if predict else []
    notes = list(plan.notes) + notes
    return ShapesOutcome(final, outcomes, config.output, report_path, notes, assumed_nodes(joined, predict))


def _join(first: Profile, other: Profile, command: str) -> Profile:
    """Two tunes of this machine: the rule sets and fits of both (a shape measured twice keeps the later)."""
    joined = join_shapes([("", first), ("", other)], prefer="later")
    return dataclasses.replace(first, rule_sets=joined.rule_sets, fits=joined.fits, command=command)

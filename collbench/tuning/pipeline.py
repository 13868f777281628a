"""``collbench tune``: measure every applicable algorithm on this machine, fit, select, write a profile.

A tune plans where its ranks run once (tuning/placement.py: the topology and the layout on it), then
sweeps every algorithm that does the asked ops at every size of its depth (tuning/config.py: quick or
thorough), in rounds (tuning/sweeps.py). Rounds matter on a shared machine: its load drifts during a
sweep, and measured once, that drift would turn into differences between algorithms. So every round
measures all the algorithms at a size before the next size, odd rounds in reverse order, and sizes
whose winner is still within the noise of another are measured again, only those algorithms there,
until separated or out of rounds (tuning/rounds.py). From the rows it fits the cost models
(models/fit.py), selects the rules (tuning/selection/), and writes the profile (tuning/build_profile.py),
then the results, the plot and the report beside it.

Nothing here imports typer or rich: the CLI builds a :class:`TuneConfig` and renders the outcome.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.errors import CollbenchError, ConfigError, InputFileError, UserError
from collbench.profile.document import Profile
from collbench.profile.rules import Rule
from collbench.results.io import write_rows
from collbench.results.journal import held_for_life
from collbench.results.row import ResultRow
from collbench.tuning.build_profile import build_profile
from collbench.tuning.config import TuneConfig, check_config, depth_label, partial_paths, tune_backend
from collbench.tuning.placement import layout_ran, plan_placement
from collbench.tuning.resume import (
    keep_depth,
    keep_topology,
    kept_rows_hint,
    partial_depth_path,
    partial_topology_path,
    with_hint,
)
from collbench.tuning.selection import REACH_FACTOR, PointsByOp, select_rules
from collbench.tuning.sweeps import Progress, extra_rounds, fixed_rounds
from collbench.units import counted

if TYPE_CHECKING:
    from collbench.layouts.model import Layout
    from collbench.models.fitted import Fit
    from collbench.topology.model import Topology

StageCallback = Callable[[str], None]
SaveProfile = Callable[[Profile], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class TuneOutcome:
    profile: Profile
    rows: list[ResultRow]
    fits: list[Fit]
    notes: list[str]
    """What the run could not do or skipped (fits not made, layout not planned), one line each."""
    profile_path: Path
    results_path: Path
    plot_path: Path | None
    elapsed_s: float
    report_path: Path | None = None
    """The HTML report beside the profile (None when it could not be written: see ``notes``)."""
    topology: Topology | None = None
    """The topology measured on (for the report of several shapes)."""
    resumed_whole: bool = False
    """True for a shape ``tune --resume`` took whole from an interrupted run's files (nothing measured now)."""


def check_backend_runs(config: TuneConfig) -> None:
    """Raise BackendUnavailableError (one line) where the tune's backend cannot run here (nccl with no
    GPU, mpi without Open MPI's tools), before anything is planned or written."""
    tune_backend(config, check=True)


def run_tune(
    config: TuneConfig,
    stage: StageCallback | None = None,
    sweep_progress: Progress | None = None,
    *,
    checked: bool = False,
    save: SaveProfile | None = None,
) -> TuneOutcome | None:
    """Plan, sweep, fit, select, and save the profile with its results, plot and report.

    ``check_config`` runs first unless the caller ran it (``checked``). ``save`` writes the profile
    (default: to ``config.output``; a tune of several shapes joins it with the shapes before it).
    Under a launcher (torchrun, mpirun, srun) every rank measures and rank 0 alone returns the
    outcome and writes; the other ranks return None.

    Raises UserError subclasses for bad options (before measuring), RankError when a rank fails.
    """
    from collbench.runtime.launch.ranks import job_rank

    if not checked:
        check_config(config)
    # Before the topology is kept beside the results: a tune refused here leaves no file behind.
    check_backend_runs(config)
    started = time.monotonic()
    notes: list[str] = []
    # The partial files are this tune's for its whole life (a sweep --resume into one mid-tune would
    # add rows the tune then deletes): rank 0, which writes them, locks them until it returns.
    lock = held_for_life(list(partial_paths(config))) if job_rank() == 0 else contextlib.nullcontext()
    with lock:
        return _run_locked(config, stage, sweep_progress, save, started, notes)


def _run_locked(
    config: TuneConfig,
    stage: StageCallback | None,
    sweep_progress: Progress | None,
    save: SaveProfile | None,
    started: float,
    notes: list[str],
) -> TuneOutcome | None:
    from collbench.runtime.launch.pool import local_group
    from collbench.runtime.launch.ranks import job_rank

    say = stage or (lambda _text: None)
    say("topology")
    placement = plan_placement(config, notes)
    if placement.ranks_topology is not None and job_rank() == 0:
        # Beside the results, not in /tmp: an interrupted, failed or killed tune keeps it with its rows.
        keep_topology(placement.ranks_topology, config.rows_path)
    if job_rank() == 0:
        keep_depth(depth_label(config), config.rows_path, resume=config.resume)
    say("sweep")
    try:
        # Run on its own, every round's sweep runs on one set of ranks, started by the first and
        # stopped after the last (under a launcher, its job's ranks and one_process_group do that).
        with local_group(config.ranks, config.backend, config.timeout_s):
            rows = fixed_rounds(config, placement, sweep_progress, notes)
            # Under a launcher every rank takes part in these rounds too: rank 0 decides which (it holds the rows).
            extra, points = extra_rounds(config, placement, sweep_progress, rows, notes)
        rows += extra
        if job_rank() != 0:
            # Under a launcher only rank 0 gets the rows: it alone fits, selects and writes.
            return None
        if not rows:
            raise ConfigError("the sweep measured nothing (no rows): nothing to tune from")
        write_rows(config.rows_path, rows)
        notes.extend(cut_short_note(rows))
    except CollbenchError as exc:
        hint = kept_rows_hint(partial_paths(config))
        if not hint and job_rank() == 0:
            # Refused before any row was kept (a sweep's own check): the topology kept for --resume
            # has nothing to resume, and a refused command leaves nothing behind.
            partial_topology_path(config.rows_path).unlink(missing_ok=True)
            partial_depth_path(config.rows_path).unlink(missing_ok=True)
        raise with_hint(exc, hint) from None

    decided = decide(
        config, rows, topology=placement.topology, layout=placement.layout, notes=notes, stage=say, points=points
    )
    profile = decided.profile
    try:
        if save is None:
            profile.save(config.output)
        else:
            save(profile)
    except CollbenchError as exc:
        raise with_hint(exc, kept_rows_hint(partial_paths(config))) from None
    # Only now, with the results and the profile on disk: a tune stopped before this point (SIGTERM,
    # a failed save) still has its partial rows for --resume.
    kept_beside = (partial_topology_path(config.rows_path), partial_depth_path(config.rows_path))
    for part in (*partial_paths(config), *kept_beside):
        part.unlink(missing_ok=True)

    say("plot")
    plot_path = _plot(rows, decided.fits, profile, config.png_path, notes)
    say("report")
    from collbench.report.page import write_beside_profile

    report_path, why = write_beside_profile(config.output, rows, profile, placement.topology, [config.rows_path])
    notes += [why] if why else []
    return TuneOutcome(
        profile=profile,
        rows=rows,
        fits=decided.fits,
        notes=notes,
        profile_path=config.output,
        results_path=config.rows_path,
        plot_path=plot_path,
        elapsed_s=time.monotonic() - started,
        report_path=report_path,
        topology=placement.topology,
    )


def cut_short_note(rows: Sequence[ResultRow]) -> list[str]:
    """The closing note on the points the rounds cut short (runtime/sweep/timed.py); none if none was."""
    cut = [row for row in rows if row.cut_short is not None]
    if not cut:
        return []
    return [
        f"{counted(len(cut), 'point')} cut short after one timed iteration (it and the data check's call "
        f"over {REACH_FACTOR:g}x the slowest iteration of a point measured in full at their size, and "
        f"the full iterations over the point's time budget): their rows keep the iterations timed and "
        f"why (cut_short); selection never chooses them"
    ]


@dataclass(frozen=True, slots=True)
class Decision:
    """What a tune decides from its measured rows: the fits, the rules, and the profile holding both."""

    fits: list[Fit]
    rules: list[Rule]
    profile: Profile


def decide(
    config: TuneConfig,
    rows: list[ResultRow],
    *,
    topology: Topology | None,
    layout: Layout | None,
    notes: list[str],
    stage: StageCallback | None = None,
    points: PointsByOp | None = None,
) -> Decision:
    """Fit, select and build the profile from ``rows`` (nothing is measured or written here).

    ``layout`` is the one the ranks were given: the profile records it where the rows were measured
    with it. ``points`` are the rows already folded by ``selection.measured_points``, when they are.
    """
    from collbench.models.fit import fit_results
    from collbench.models.stored import with_rows

    say = stage or (lambda _text: None)
    say("fit")
    try:
        report = fit_results(rows, crossovers=False)
    except UserError as exc:
        # No algorithm measured has a cost formula for its op (a new op's native, say): the rules are
        # chosen from the measured times alone, with boundaries in the middle of the gaps.
        notes.append(f"fit skipped: {exc}")
        fits: list[Fit] = []
    else:
        notes.extend(f"fit skipped: {line}" for line in report.skipped)
        # The profile's copy says what its rows say of each fit (nodes, device, source), as fit's files do.
        fits = with_rows(report.fits, rows)
    say("select")
    # Fits that do not explain their data place no boundary and predict no time (Fit.distrust).
    trusted = [f for f in fits if not f.distrust()]
    rules = select_rules(rows, trusted, settings=config.selection, points=points)
    profile = build_profile(config, rows, fits, rules, topology=topology, layout=layout_ran(rows, layout))
    return Decision(fits, rules, profile)


def _plot(
    rows: Sequence[ResultRow], fits: Sequence[Fit], profile: Profile, path: Path, notes: list[str]
) -> Path | None:
    """Write the tune's plot to ``path``; None, with a note, when it could not be (the profile is saved)."""
    try:
        from collbench.report.plots import plot_tune

        plot_tune(rows, fits, profile, path)
    except ImportError as exc:  # matplotlib is a dependency; a broken install is reported, not fatal
        notes.append(f"no plot: {exc}")
        return None
    except OSError as exc:
        notes.append(f"no plot: cannot write {path}: {exc.strerror or exc}")
        return None
    except InputFileError as exc:
        notes.append(f"no plot: {exc}")
        return None
    return path

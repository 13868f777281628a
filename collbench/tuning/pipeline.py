"""``collbench tune``'s core: topology, layout, sweep, fits, selection, profile, in one call.

Nothing here imports typer or rich: the CLI builds a :class:`TuneConfig` and renders the outcome.

Depth. ``quick`` measures every applicable algorithm at 512 B .. 2 MiB in x2 steps (13 sizes) with a
short time budget per point, twice (the second time in reverse algorithm order), then up to two
more rounds of the tied algorithms at the tied sizes only (tuning/rounds.py): 21-23 s with the
default 2 gloo ranks on the quiet 2-core development machine. x2 rather than x4 steps: with 7 sizes
a cache cliff (recursive doubling's time triples from 512 KiB to 1 MiB) has no size of its own, one
line through it misses, and a fit's median error reached 13.4% (issue 10's replicate benchmark, pair
7) against at most 5.4% in x2 steps (pairs 9 and 10; 16-17 s against 19-21 s there). The default (thorough) run measures
256 B .. 16 MiB in x2 steps, three times (up to six), and sweeps a second segment size for the
pipelined algorithms at the sizes where segments matter, so the rules choose the segment size too.
Repeating rounds matters on a shared machine: its load drifts during a sweep, and one round would
turn that drift into differences between algorithms.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.errors import CollbenchError, ConfigError, InputFileError
from collbench.fileio import check_writable
from collbench.profile.document import Profile, ProfileLayout, RuleSet
from collbench.results.io import write_rows
from collbench.results.row import ResultRow
from collbench.tuning.resume import check_partials, kept_rows_hint, partial_topology_path, with_hint
from collbench.tuning.selection import SelectionSettings, in_round, select_rules
from collbench.version import __version__

DEFAULT_PROFILE = Path("collbench-profile.yaml")
SEGMENTED = ("ring", "tree", "two-tree")
"""Algorithms whose schedule or execution pipelines in segments: a second segment size is swept."""

IN_PLACE = (True,)
"""Tune measures in place only: that is how jobs call all-reduce (DDP buckets, collbench.torch)."""

if TYPE_CHECKING:
    from collbench.runtime.sweep.plan import SweepConfig

StageCallback = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Depth:
    """How much a tune measures."""

    min_bytes: int
    max_bytes: int
    step_factor: float
    point_budget_s: float
    warmup: int
    extra_segment_bytes: int | None
    """A second executor segment size swept for SEGMENTED algorithms from ``extra_from_bytes`` up."""
    extra_from_bytes: int = 1 << 20
    rounds: int = 2
    """Sweeps of every point; odd rounds run the algorithms in reverse order, so a load that drifts
    during a run does not favour the algorithms measured first, and the rounds' spread is noise."""
    max_rounds: int = 4
    """Rounds in all: after ``rounds``, sizes whose winner is tied are measured again (tuning/rounds.py)."""


QUICK = Depth(512, 2 << 20, 2.0, 0.05, 1, None, rounds=2, max_rounds=4)
THOROUGH = Depth(256, 16 << 20, 2.0, 0.2, 2, 256 << 10, rounds=3, max_rounds=6)


@dataclass(frozen=True, slots=True, kw_only=True)
class TuneConfig:
    """Everything one ``collbench tune`` does."""

    ranks: int | None = 4
    """Local ranks to start; None under torchrun."""
    backend: str = "auto"
    ops: tuple[str, ...] = ("all-reduce",)
    """Op names, or ``all``."""
    topology_path: Path | None = None
    """A saved topology instead of discovering this machine's."""
    quick: bool = False
    output: Path = DEFAULT_PROFILE
    results_path: Path | None = None
    """Where the measured rows go (JSONL, CSV or Parquet); default beside the profile."""
    plot_path: Path | None = None
    """The plot (PNG); default beside the profile."""
    command: str = "collbench tune"
    timeout_s: float = 300.0
    selection: SelectionSettings = field(default_factory=SelectionSettings)
    resume: bool = False
    """Continue an interrupted tune from the partial rows it left (see tuning/resume.py)."""

    @property
    def depth(self) -> Depth:
        return QUICK if self.quick else THOROUGH

    @property
    def rows_path(self) -> Path:
        if self.results_path is not None:
            return self.results_path
        return self.output.with_name(self.output.stem + "-results.jsonl")

    @property
    def png_path(self) -> Path:
        return self.plot_path if self.plot_path is not None else self.output.with_suffix(".png")


@dataclass(frozen=True, slots=True)
class TuneOutcome:
    profile: Profile
    rows: list[ResultRow]
    fits: list[Any]
    notes: list[str]
    """What the run could not do or skipped (fits not made, layout not planned), one line each."""
    profile_path: Path
    results_path: Path
    plot_path: Path | None
    elapsed_s: float
    report_path: Path | None = None
    """The HTML report beside the profile (None when it could not be written: see ``notes``)."""
    topology: Any = None
    """The topology measured on (for the report of several shapes)."""
    resumed_whole: bool = False
    """True for a shape ``tune --resume`` took whole from an interrupted run's files (nothing measured now)."""


def check_config(config: TuneConfig) -> None:
    """Raise ConfigError for options that cannot work, before anything is measured."""
    if config.ranks is not None and config.ranks < 2:
        raise ConfigError(f"--ranks must be at least 2 to tune a collective, got {config.ranks}")
    if not config.timeout_s > 0 or config.timeout_s == float("inf"):
        raise ConfigError(f"--timeout must be a positive number of seconds, got {config.timeout_s}")
    if config.output.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError(f"-o {config.output}: a profile is YAML; use a .yaml name")
    if config.rows_path.suffix.lower() not in (".jsonl", ".csv", ".parquet"):
        raise ConfigError(f"--results {config.rows_path}: use a .jsonl, .csv or .parquet name")
    if config.png_path.suffix.lower() != ".png":
        raise ConfigError(f"--plot {config.png_path}: use a .png name")
    if config.output.exists() and config.output.is_dir():
        raise ConfigError(f"-o {config.output} is a directory; give a file name")
    # Every output is checked now: a place that cannot be written must not cost the whole run.
    for path in (config.output, config.rows_path, config.png_path, *partial_paths(config)):
        check_writable(path)
    check_partials(partial_paths(config), config.resume)


def partial_paths(config: TuneConfig) -> tuple[Path, ...]:
    """The JSONL files rows stream into while tune measures, beside the results file.

    They are the measurements of a run that was interrupted or failed; a finished run removes them
    once the results file is written.
    """
    rows = config.rows_path
    names = []
    for i in range(max(config.depth.rounds, config.depth.max_rounds)):
        names.append(rows.with_name(f"{rows.stem}.partial-{i}.jsonl"))
        names.append(rows.with_name(f"{rows.stem}.partial-segments-{i}.jsonl"))
    return tuple(names)


def _joined_rank() -> int:
    from collbench.runtime.launch.ranks import job_rank

    return job_rank()


def _under_launcher() -> bool:
    from collbench.runtime.launch.ranks import under_launcher

    return under_launcher()


def run_tune(
    config: TuneConfig, stage: StageCallback | None = None, sweep_progress: Callable[[Any], None] | None = None
) -> TuneOutcome | None:
    """Discover, plan, sweep, fit, select, and save the profile (atomically) with its results and plot.

    Under a launcher (torchrun, mpirun, srun) every rank measures and rank 0 alone returns the
    outcome and writes; the other ranks return None.

    Raises UserError subclasses for bad options (before measuring), RankError when a rank fails.
    """
    check_config(config)
    started = time.monotonic()
    say = stage or (lambda _text: None)
    notes: list[str] = []

    say("topology")
    topology = _topology(config)
    layout = _layout(topology, config, notes)

    # The topology and the rows stream beside the results file, not into /tmp: an interrupted,
    # failed or killed tune keeps what it measured there, for --resume, and leaves nothing in /tmp.
    topo_file: Path | None = None
    if topology is not None and layout is not None:
        from collbench.topology.io import save_topology

        topo_file = partial_topology_path(config.rows_path)
        save_topology(topology, topo_file)
    say("sweep")
    try:
        rows = _sweep(config, topo_file, sweep_progress)
        if not rows and _joined_rank() != 0:
            # Under a launcher only rank 0 gets the rows: it alone fits, selects and writes.
            return None
        if _under_launcher():
            # The extra rounds are chosen from rank 0's rows, which the other ranks do not have: they
            # could not agree on what to run, and would leave rank 0 waiting in a collective.
            notes.append("under a launcher the extra rounds that re-measure tied sizes are not run: ties stay ties")
        else:
            rows += _extra_rounds(config, topo_file, sweep_progress, rows, notes)
        if not rows:
            raise ConfigError("the sweep measured nothing (no rows): nothing to tune from")
        write_rows(config.rows_path, rows)
    except CollbenchError as exc:
        raise with_hint(exc, kept_rows_hint(partial_paths(config))) from None
    for part in (*partial_paths(config), partial_topology_path(config.rows_path)):
        part.unlink(missing_ok=True)

    decided = decide(config, rows, topology=topology, layout=layout, notes=notes, stage=say)
    fits, profile = decided.fits, decided.profile
    profile.save(config.output)

    say("plot")
    plot_path: Path | None = config.png_path
    try:
        from collbench.report.plots import plot_tune

        plot_tune(rows, fits, profile, config.png_path)
    except ImportError as exc:  # matplotlib is a dependency; a broken install is reported, not fatal
        notes.append(f"no plot: {exc}")
        plot_path = None
    except OSError as exc:  # the profile is saved already: a plot that cannot be written is a note
        notes.append(f"no plot: cannot write {config.png_path}: {exc.strerror or exc}")
        plot_path = None
    except InputFileError as exc:
        notes.append(f"no plot: {exc}")
        plot_path = None
    say("report")
    from collbench.report.page import write_beside_profile

    report_path, why = write_beside_profile(config.output, rows, profile, topology, config.rows_path)
    notes += [why] if why else []
    return TuneOutcome(
        profile=profile,
        rows=rows,
        fits=fits,
        notes=notes,
        profile_path=config.output,
        results_path=config.rows_path,
        plot_path=plot_path,
        elapsed_s=time.monotonic() - started,
        report_path=report_path,
        topology=topology,
    )


@dataclass(frozen=True, slots=True)
class Decision:
    """What a tune decides from its measured rows: the fits, the rules, and the profile holding both."""

    fits: list[Any]
    rules: list[Any]
    profile: Profile


def decide(
    config: TuneConfig,
    rows: list[ResultRow],
    *,
    topology: Any,
    layout: Any,
    notes: list[str],
    stage: StageCallback | None = None,
) -> Decision:
    """Fit, select and build the profile from ``rows`` (nothing is measured or written here)."""
    say = stage or (lambda _text: None)
    say("fit")
    fits = _fits(rows, notes)
    say("select")
    # Fits that do not explain their data place no boundary and predict no time (Fit.distrust).
    rules = select_rules(rows, [f for f in fits if not f.distrust()], settings=config.selection)
    return Decision(fits, rules, _profile(config, rows, fits, rules, topology, layout))


def _topology(config: TuneConfig) -> Any:
    if config.topology_path is not None:
        from collbench.topology.io import load_topology

        return load_topology(config.topology_path)
    from collbench.topology.sources import discover_topology

    return discover_topology(ranks=config.ranks)


def _layout(topology: Any, config: TuneConfig, notes: list[str]) -> Any:
    """The planned layout, or None (rank order) with a note saying why."""
    if topology is None or config.ranks is None:
        return None
    from collbench.layouts.plan import plan_layout

    try:
        return plan_layout(topology, config.ranks)
    except CollbenchError as exc:
        notes.append(f"layout not planned ({exc}); rank order used")
        return None


def _round_sweep(
    config: TuneConfig,
    topo_file: Path | None,
    stream_name: str,
    *,
    ops: tuple[str, ...],
    algos: tuple[str, ...],
    min_bytes: int,
    max_bytes: int,
) -> SweepConfig:
    """One round's SweepConfig at the tune's depth, streaming into ``stream_name`` beside the results.

    It resumes only when asked to and that round's stream exists: a round the interrupted run never
    started is measured afresh.
    """
    from collbench.runtime.sweep.plan import SweepConfig

    depth = config.depth
    sweep = SweepConfig(
        world_size=config.ranks,
        backend=config.backend,
        ops=ops,
        algos=algos,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        step_factor=depth.step_factor,
        warmup=depth.warmup,
        point_budget_s=depth.point_budget_s,
        in_place=IN_PLACE,
        topology_path=topo_file,
        timeout_s=config.timeout_s,
        interleave=True,
        stream=config.rows_path.with_name(stream_name),
    )
    return dataclasses.replace(sweep, resume=config.resume and sweep.stream_path.exists())


def _sweep(config: TuneConfig, topo_file: Path | None, progress: Callable[[Any], None] | None) -> list[ResultRow]:
    from collbench.runtime.sweep.run import run_sweep

    depth = config.depth
    names = _algorithm_order(config.ops)
    rows: list[ResultRow] = []
    stem = config.rows_path.stem
    for i in range(depth.rounds):
        order = names if i % 2 == 0 else tuple(reversed(names))
        base = _round_sweep(
            config,
            topo_file,
            f"{stem}.partial-{i}.jsonl",
            ops=config.ops,
            algos=order,
            min_bytes=depth.min_bytes,
            max_bytes=depth.max_bytes,
        )
        rows.extend(in_round(run_sweep(base, progress), i))
        if depth.extra_segment_bytes is None or depth.extra_from_bytes > depth.max_bytes:
            continue
        measured = {r.algo for r in rows}
        pipelined = tuple(a for a in order if a in SEGMENTED and a in measured)
        if pipelined:
            second = dataclasses.replace(
                base,
                algos=pipelined,
                min_bytes=depth.extra_from_bytes,
                segment_bytes=depth.extra_segment_bytes,
                stream=config.rows_path.with_name(f"{stem}.partial-segments-{i}.jsonl"),
            )
            second = dataclasses.replace(second, resume=config.resume and second.stream_path.exists())
            rows.extend(in_round(run_sweep(second, progress), i))
    return rows


def _extra_rounds(
    config: TuneConfig,
    topo_file: Path | None,
    progress: Callable[[Any], None] | None,
    rows: list[ResultRow],
    notes: list[str],
) -> list[ResultRow]:
    """Rounds after the fixed ones, of the tied algorithms over the tied sizes, until none is tied."""
    from collbench.runtime.sweep.run import run_sweep
    from collbench.tuning.rounds import settled_fraction, unsettled

    depth = config.depth
    extra: list[ResultRow] = []
    ran = 0
    for i in range(depth.rounds, depth.max_rounds):
        todo = unsettled(rows + extra, config.selection)
        if not todo:
            break
        algos = tuple(dict.fromkeys(a for item in todo for a in item.algos))
        sweep = _round_sweep(
            config,
            topo_file,
            f"{config.rows_path.stem}.partial-{i}.jsonl",
            ops=tuple(item.op for item in todo),
            algos=algos if i % 2 == 0 else tuple(reversed(algos)),
            min_bytes=min(min(item.sizes) for item in todo),
            max_bytes=max(max(item.sizes) for item in todo),
        )
        extra.extend(in_round(run_sweep(sweep, progress), i))
        ran += 1
    settled, total = settled_fraction(rows + extra, config.selection)
    if ran or settled < total:
        notes.append(
            f"{depth.rounds + ran} rounds ({ran} of them re-measuring tied sizes only): the winner is separated "
            f"from the runner-up beyond the measured noise at {settled} of {total} sizes; the others are ties, "
            "which go to the simpler choice (native when it is in the tie, else the algorithm in use below), "
            "written in the rules' tie_with"
        )
    return extra


def _algorithm_order(ops: tuple[str, ...]) -> tuple[str, ...]:
    """Every registered algorithm that does one of ``ops``, and native, in the registry's order."""
    from collbench.schedules.ops import Op
    from collbench.schedules.registry import algorithms_for

    chosen = list(Op) if any(o.strip().lower() == "all" for o in ops) else [Op.parse(o) for o in ops]
    names: list[str] = []
    for op in chosen:
        for spec in algorithms_for(op):
            if spec.name not in names:
                names.append(spec.name)
    if "native" not in names:
        names.append("native")
    return tuple(names)


def _fits(rows: list[ResultRow], notes: list[str]) -> list[Any]:
    from collbench.models.fit import fit_results

    report = fit_results(rows)
    notes.extend(f"fit skipped: {line}" for line in report.skipped)
    return list(report.fits)


def _profile(
    config: TuneConfig,
    rows: list[ResultRow],
    fits: list[Any],
    rules: list[Any],
    topology: Any,
    layout: Any,
) -> Profile:
    first = rows[0]
    fingerprint = first.topology_fingerprint or (topology.fingerprint if topology is not None else "")
    versions = {
        "collbench": __version__,
        "python": platform.python_version(),
        "torch": first.torch_version,
        "backend": first.backend_version,
        "cuda": first.cuda_version,
        "driver": first.driver_version,
    }
    return Profile(
        fingerprint=str(fingerprint),
        host=first.host,
        backend=first.backend,
        rule_sets=(
            RuleSet(
                world_size=first.world_size,
                nodes=max(r.nodes for r in rows),
                rules=tuple(rules),
                layout=None
                if layout is None
                else ProfileLayout(name=layout.name, rings=tuple(layout.rings), trees=tuple(layout.trees)),
            ),
        ),
        fits=tuple(f.as_stored() for f in fits),
        versions={k: v for k, v in versions.items() if v},
        command=config.command,
        created=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        selection={
            "min_gain": config.selection.min_gain,
            "max_threshold": config.selection.max_threshold,
            "sigmas": config.selection.sigmas,
            "noise": "time: each row's p25, each round put at the fastest round's speed (median ratio over "
            "shared variants), smallest over rounds; per point noise hypot((t - min) / t / sqrt(iters), "
            "(second-smallest - smallest) / smallest of the rounds' times); variants within "
            "max(min_gain, sigmas * hypot(noise_a, noise_b)) (capped at max_threshold where rounds agree "
            "within it) of the fastest, or not ahead of it round by round (mean log ratio - sigmas * its "
            "standard error > log(1 + min_gain), over 3 or more shared rounds), are tied, and a tie goes to "
            "native, else the variant in use",
        },
    )

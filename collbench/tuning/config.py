"""What one ``collbench tune`` does (:class:`TuneConfig`) and how much it measures (:class:`Depth`),
checked before anything is measured. Nothing here imports typer or rich: the CLI builds the config.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from collbench.backends import AUTO, Backend
from collbench.errors import CommandLineError, ConfigError
from collbench.fileio import check_writable
from collbench.filekinds import holds_content, replacing_refused
from collbench.results.journal import count_lines
from collbench.schedules.ops import Op
from collbench.tuning.resume import DEPTH_LABELS, PartialPlan, check_partials, partial_depth_path
from collbench.tuning.selection import SelectionSettings
from collbench.units import MIN_TIMEOUT_S, check_ranks, check_seconds

DEFAULT_PROFILE = Path("collbench-profile.yaml")
TUNE_ELEMENT_BYTES = 4
"""Tune measures float32 (the sweep's default dtype), as DDP's gradients are."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Depth:
    """How much a tune measures."""

    min_bytes: int
    max_bytes: int
    step_factor: float
    """Each size is the one before times this (nccl-tests' ``-f``)."""
    point_budget_s: float
    """Timed seconds per point and round."""
    warmup: int
    """Untimed calls before each point's timed ones, beyond its first call (the one its data check
    reads)."""
    extra_segment_bytes: int | None
    """A second executor segment size swept for the pipelined (segmented) algorithms from
    ``extra_from_bytes`` up; None: one segment size."""
    extra_from_bytes: int = 1 << 20
    rounds: int = 2
    """Sweeps of every point; odd rounds run the algorithms in reverse order, so a load that drifts
    during a run does not favour the algorithms measured first, and the rounds' spread is noise."""
    max_rounds: int = 4
    """Rounds in all: after ``rounds``, the (size, algorithm) pairs in a tie are measured again
    (tuning/rounds.py). Bounded here, with the depth, because two algorithms that really take the same
    time stay tied however often they are measured: where their rounds scatter too much to show them
    equal (``selection.equal_round_by_round``), only a budget ends those rounds, and a tie left is no
    loss (it goes to the simpler choice, within the noise of the fastest)."""


QUICK = Depth(
    min_bytes=512,
    max_bytes=2 << 20,
    step_factor=2.0,
    point_budget_s=0.05,
    warmup=0,
    extra_segment_bytes=None,
    rounds=2,
    max_rounds=4,
)
"""``tune --quick``: 512 B .. 2 MiB in x2 steps (13 sizes), twice, up to two more rounds of the ties.
x2 rather than x4 steps: a cache cliff (a time that triples between two sizes) then has sizes of its
own; between x4 steps one fitted line runs through the cliff and misses the sizes on both sides.
No warm-up call beyond each point's first, whose output the data check reads after the timing
(``runtime/sweep/worker.py``): that call comes right before the timed ones, as the warm-up did. While
the check of that call came between it and the timing, a warm-up call after it was needed: without
one, on the namespace cluster the slowest iteration of a point timed in full was over 1.8x its median
in 1 point of 10 (1.43x with it) and 7-10% of those points stalled (3%) (benchmarks/README.md, "A
quick tune without its warm-up call"; "The data check after the timing" for the figures since)."""
THOROUGH = Depth(
    min_bytes=256,
    max_bytes=16 << 20,
    step_factor=2.0,
    point_budget_s=0.2,
    warmup=2,
    extra_segment_bytes=256 << 10,
    rounds=3,
    max_rounds=6,
)
"""The default: 256 B .. 16 MiB in x2 steps, three rounds (up to six), and a second segment size for
the pipelined algorithms where segments matter, so the rules choose the segment size too."""
MOST_ROUNDS = max(max(d.rounds, d.max_rounds) for d in (QUICK, THOROUGH))
"""The most rounds any depth streams into partial files."""


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
    """The command line recorded in the profile."""
    timeout_s: float = 300.0
    selection: SelectionSettings = field(default_factory=SelectionSettings)
    resume: bool = False
    """Continue an interrupted tune from the partial rows it left (see tuning/resume.py)."""
    overwrite: bool = False
    """Replace a profile or results file already at the outputs; without it (or ``resume``) such a
    tune is refused: measured rows are never replaced silently."""
    min_bytes: int | None = None
    """The smallest size measured (``-b``); None: the depth's."""
    max_bytes: int | None = None
    """The largest size measured (``-e``); None: the depth's."""

    @property
    def depth(self) -> Depth:
        """Quick or thorough, over the sizes ``-b``/``-e`` chose where they were given."""
        depth = QUICK if self.quick else THOROUGH
        if self.min_bytes is None and self.max_bytes is None:
            return depth
        return dataclasses.replace(
            depth,
            min_bytes=depth.min_bytes if self.min_bytes is None else self.min_bytes,
            max_bytes=depth.max_bytes if self.max_bytes is None else self.max_bytes,
        )

    @property
    def rows_path(self) -> Path:
        if self.results_path is not None:
            return self.results_path
        return self.output.with_name(self.output.stem + "-results.jsonl")

    @property
    def png_path(self) -> Path:
        return self.plot_path if self.plot_path is not None else self.output.with_suffix(".png")


def check_config(config: TuneConfig, *, files: bool = True) -> None:
    """Raise ConfigError for options that cannot work, before anything is measured; with ``files``,
    also for outputs that cannot be written and partial rows in the way (``check_files``). Those the
    command line alone decides are CommandLineErrors: under a launcher rank 0 alone says them."""
    if config.ranks is not None:
        check_ranks(config.ranks, 2, "tune")
    depth = config.depth
    for flag, size in (("-b/--min-bytes", depth.min_bytes), ("-e/--max-bytes", depth.max_bytes)):
        if size < TUNE_ELEMENT_BYTES or size % TUNE_ELEMENT_BYTES:
            raise CommandLineError(
                f"{flag} {size}: tune measures float32 elements, so sizes are multiples of {TUNE_ELEMENT_BYTES} bytes"
            )
    if depth.min_bytes > depth.max_bytes:
        raise CommandLineError(f"-b/--min-bytes {depth.min_bytes} is above -e/--max-bytes {depth.max_bytes}")
    if depth.min_bytes * depth.step_factor > depth.max_bytes:
        # Known now, not after the whole measurement: the models are fitted over sizes.
        raise CommandLineError(
            f"-b/--min-bytes {depth.min_bytes} and -e/--max-bytes {depth.max_bytes} give one size; tune fits "
            f"its models over sizes: give at least two (sizes grow x{depth.step_factor:g})"
        )
    check_seconds(config.timeout_s, "--timeout", MIN_TIMEOUT_S)
    from collbench.runtime.sweep.plan import check_backend_name

    check_backend_name(config.backend)
    if config.output.suffix.lower() not in (".yaml", ".yml"):
        raise CommandLineError(f"-O/--output {config.output}: a profile is YAML; use a .yaml name")
    if config.rows_path.suffix.lower() not in (".jsonl", ".csv", ".parquet"):
        raise CommandLineError(f"--results {config.rows_path}: use a .jsonl, .csv or .parquet name")
    if config.rows_path.suffix.lower() == ".parquet":
        from collbench.results.io import parquet_problem

        if problem := parquet_problem():
            # Said before a rank starts, as sweep says it: the rows are written once every round is measured.
            raise ConfigError(f"--results {config.rows_path}: {problem}")
    if config.png_path.suffix.lower() != ".png":
        raise CommandLineError(f"--plot {config.png_path}: use a .png name")
    if config.resume and config.overwrite:
        raise CommandLineError("--resume continues an interrupted tune and --overwrite starts over: give one of them")
    for name in config.ops:
        # Checked here, with the other options and before the files: an unknown op is its own error,
        # not "pass --overwrite".
        if name.strip().lower() != "all":
            Op.parse(name)
    if files:
        check_files(config)


def check_fresh(configs: Sequence[TuneConfig]) -> None:
    """What a tune that does not resume refuses of its shapes' ``configs``, in the order it says it: the
    options first (the partial rows are named after -O and --results, which must be file names: 'tune -O .'
    ended in pathlib's "PosixPath('.') has an empty name" while naming them), then rows an interrupted run
    kept in any shape (--resume is the way on, even where the shapes it finished left a profile or results
    a fresh tune would refuse to replace), then the files. Nothing here imports torch: the CLI says a
    refusal before loading it (10 s on a loaded machine)."""
    for c in configs:
        check_config(c, files=False)
    for c in configs:
        check_partials(partial_paths(c), resume=False)
    for c in configs:
        check_config(c)


def check_files(config: TuneConfig) -> None:
    """Raise ConfigError (or InputFileError) for an output that cannot be written, or for partial rows
    that an interrupted tune left where this one would start over (or none where it would resume).

    Under a launcher only rank 0 writes: these are its files.
    """
    if config.output.exists() and config.output.is_dir():
        raise ConfigError(f"-O/--output {config.output} is a directory; give a file name")
    # Every output is checked now: a place that cannot be written must not cost the whole run.
    for path in (config.output, config.rows_path, config.png_path, *partial_paths(config)):
        check_writable(path)
    check_partials(
        partial_paths(config),
        config.resume,
        ranks=config.ranks,
        ops=config.ops,
        backend=_resumed_backend(config),
        plans=partial_plans(config),
        sizes_asked=_sizes_asked(config),
        depth=(partial_depth_path(config.rows_path), depth_label(config)),
    )
    if not config.resume and not config.overwrite:
        _refuse_replacing(config)
    if config.topology_path is not None and config.ranks is not None:
        # As sweep refuses it: 'tune --ranks 3 --topology two-ranks.yaml' measured 3 ranks in rank order
        # (the layout could not be planned, a note said) into a profile of the 2-rank machine's fingerprint.
        from collbench.runtime.sweep.plan import topology_notes
        from collbench.topology.io import load_topology

        held = len(load_topology(config.topology_path).rank_devices)
        topology_notes(config.topology_path, held, config.ranks, "tune")


def _resumed_backend(config: TuneConfig) -> str:
    """The backend a resumed tune will run, ``auto`` resolved (as its sweeps resolve it): rows of another
    backend would otherwise be dropped by the resumed sweeps, and their files deleted at the end."""
    if not config.resume or config.backend.strip().lower() != AUTO:
        return config.backend
    if not any(p.is_file() and p.stat().st_size > 0 for p in partial_paths(config)):
        return config.backend
    return tune_backend(config).name


def tune_backend(config: TuneConfig, *, check: bool = False) -> Backend:
    """The backend the tune's sweeps will run on (``auto`` resolved as the sweep resolves it).

    Raises BackendUnavailableError (one line) for a torch backend that cannot run here, as the sweep would;
    ``check``: for a library's own launcher too (Open MPI's tools missing).
    """
    from collbench.runtime.here import HERE
    from collbench.runtime.launch.ranks import joined_job
    from collbench.runtime.sweep.plan import sweep_backend

    job = joined_job()
    local = config.ranks if config.ranks is not None else (job.local_world_size if job is not None else 1)
    backend = sweep_backend(config.backend, local)
    if check and backend.torch_backend is None:
        backend.check_usable(local, HERE)
    return backend


def _refuse_replacing(config: TuneConfig) -> None:
    """ConfigError when the profile, the results, the plot or the page is there already, as sweep refuses a
    stream that holds rows: a second tune into the same path would replace what the first one measured
    (and a --plot naming a file kept elsewhere, or a page beside the profile, replaced it without a word)."""
    from collbench.report.page import page_beside

    held = [_held(path) for path in (config.output, config.rows_path)]
    plot, page = config.png_path, page_beside(config.output)
    plot_held = not plot.is_symlink() and holds_content(plot)
    held += [f"{path} is not empty" for path in (plot, page) if not path.is_symlink() and holds_content(path)]
    if any(held):
        raise replacing_refused(
            [h for h in held if h],
            f"-O/--results{'/--plot' if plot_held else ''} to write elsewhere",
            or_else="--resume to continue an interrupted tune",
        )


def _held(path: Path) -> str:
    """``PATH holds N measured rows`` / ``PATH is not empty`` for a file there with content; else ""."""
    if path.is_symlink() or not holds_content(path):
        return ""
    if path.suffix.lower() in (".yaml", ".yml"):
        return f"{path} holds a profile"
    if path.suffix.lower() == ".jsonl":
        count = count_lines(path)
        return f"{path} holds {count} measured {'row' if count == 1 else 'rows'}"
    return f"{path} holds measured rows"


def depth_label(config: TuneConfig) -> str:
    """The tune's depth as its option says it (kept beside the partial rows: tuning/resume.py)."""
    quick, thorough = DEPTH_LABELS
    return quick if config.quick else thorough


def _sizes_asked(config: TuneConfig) -> str:
    """The options that chose the sizes, as the user gives them (for a message)."""
    depth = config.depth
    return f"{'--quick' if config.quick else 'a thorough tune'} -b {depth.min_bytes} -e {depth.max_bytes}"


def partial_plans(config: TuneConfig) -> tuple[PartialPlan, ...]:
    """Per partial file, the sizes this tune measures into it (none for a round its depth lacks)."""
    from collbench.runtime.sweep.plan import sweep_sizes

    depth = config.depth
    sizes = frozenset(sweep_sizes(depth.min_bytes, depth.max_bytes, depth.step_factor, TUNE_ELEMENT_BYTES))
    segment_sizes: frozenset[int] = frozenset()
    if depth.extra_segment_bytes is not None and depth.extra_from_bytes <= depth.max_bytes:
        low = max(depth.extra_from_bytes, depth.min_bytes)
        segment_sizes = frozenset(sweep_sizes(low, depth.max_bytes, depth.step_factor, TUNE_ELEMENT_BYTES))
    rounds = max(depth.rounds, depth.max_rounds)
    plans: list[PartialPlan] = []
    for i in range(MOST_ROUNDS):
        plans.append(PartialPlan(round_stream(config, i), sizes if i < rounds else frozenset()))
        seg = segment_sizes if i < depth.rounds else frozenset()
        plans.append(PartialPlan(segments_stream(config, i), seg, depth.extra_segment_bytes))
    return tuple(plans)


def partial_paths(config: TuneConfig) -> tuple[Path, ...]:
    """The JSONL files rows stream into while tune measures, beside the results file.

    They are the measurements of a run that was interrupted or failed; a finished run removes them
    once the results file is written.
    """
    names = []
    # Every depth's names, not only this one's: the rounds a deeper tune left are looked for too.
    for i in range(MOST_ROUNDS):
        names += [round_stream(config, i), segments_stream(config, i)]
    return tuple(names)


def round_stream(config: TuneConfig, index: int) -> Path:
    """Where round ``index`` streams its rows."""
    return config.rows_path.with_name(f"{config.rows_path.stem}.partial-{index}.jsonl")


def segments_stream(config: TuneConfig, index: int) -> Path:
    """Where round ``index`` streams its rows at the second segment size."""
    return config.rows_path.with_name(f"{config.rows_path.stem}.partial-segments-{index}.jsonl")


def shape_config(config: TuneConfig, ranks: int) -> TuneConfig:
    """The single-shape tune config of a several-shape tune: its own results and plot files."""
    rows, png = config.rows_path, config.png_path
    return dataclasses.replace(
        config,
        ranks=ranks,
        results_path=rows.with_name(f"{rows.stem}-{ranks}ranks{rows.suffix}"),
        plot_path=png.with_name(f"{png.stem}-{ranks}ranks{png.suffix}"),
    )


def shape_configs(config: TuneConfig, ranks: Sequence[int] | None) -> list[TuneConfig]:
    """The configs ``run_tune_shapes`` runs: one per rank count, or the config itself for one shape."""
    return [shape_config(config, r) for r in ranks] if ranks and len(ranks) > 1 else [config]

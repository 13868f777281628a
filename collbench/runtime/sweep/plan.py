"""What a sweep measures: ``SweepConfig`` (the CLI's options), checked and resolved by ``validate``
into the ``SweepJob`` every rank receives (ops, algorithms per op, sizes, dtype, reduction, files),
before any process starts. Nothing here imports typer or rich.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.backends import AUTO, Backend, backend_named, backend_names, get_backend
from collbench.errors import CommandLineError, ConfigError, InputFileError, UnknownNameError
from collbench.fileio import check_path_fits, check_writable
from collbench.filekinds import refuse_replacing
from collbench.nccl.variants import is_native
from collbench.results.io import parquet_problem, read_jsonl
from collbench.results.journal import refuse_symlink
from collbench.runtime.here import HERE
from collbench.runtime.host.switches import check_switches
from collbench.runtime.launch.launchers import MAX_WORLD_SIZE, detect_job
from collbench.runtime.sweep.files import writes_files
from collbench.schedules.ops import DTYPE_SIZES, FLOAT_DTYPES, SWEEP_DTYPES, Op, parse_dtype, parse_redop
from collbench.schedules.registry import get_algorithm
from collbench.units import MIN_TIMEOUT_S, check_ranks, check_seconds, counted, format_bytes

if TYPE_CHECKING:
    from collbench.layouts.model import Layout
    from collbench.topology.model import Topology

DEFAULT_STREAM = Path("collbench-sweep.jsonl")
MAX_ITERS = 10**7
"""The most timed (or warm-up) iterations per point a sweep accepts: more is a typo, not a benchmark."""
OUTPUT_SUFFIXES = (".jsonl", ".csv", ".parquet")
MAX_SIZE_BYTES = 1 << 42
"""The largest message a sweep accepts (4 TiB): each rank holds at least one buffer of it, and no
machine's memory holds more per rank; past it a size is a typo (``-b 2^63``), refused at once
rather than after estimating its memory."""
MAX_SIZES = 10_000
"""The most sizes one sweep steps through (a factor of 1.000001 from 1 byte would be millions)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepConfig:
    """Everything one sweep measures and how (the CLI's options, checked by ``validate``)."""

    world_size: int | None = 4
    """Local ranks to start; None under torchrun (its WORLD_SIZE rules)."""
    backend: str = "auto"
    ops: tuple[str, ...] = ("all-reduce",)
    algos: tuple[str, ...] = ("all",)
    """Algorithm names, ``all`` for every registered one that applies, ``native:*`` variants (NCCL)."""
    min_bytes: int = 1024
    max_bytes: int = 4 << 20
    step_factor: float = 4.0
    iters: int | None = None
    """Timed iterations per point; None for auto (until the median is known within 2%)."""
    warmup: int = 2
    dtype: str = "float32"
    redop: str = "sum"
    root: int = 0
    in_place: tuple[bool, ...] = (False,)
    """Which modes to measure, in order: False out-of-place, True in-place."""
    check: bool = True
    segment_bytes: int | None = None
    """Executor segment size; None for the default of the device type."""
    topology_path: Path | None = None
    topology: Topology | None = None
    """A loaded topology, in place of ``topology_path`` (``collbench tune`` passes the one it planned on)."""
    layout: Layout | None = None
    """The layout planned on ``topology`` for these ranks; None: rank 0 plans it from ``topology``."""
    timeout_s: float = 60.0
    output: Path | None = None
    resume: bool = False
    overwrite: bool = False
    """Empty a stream that holds rows; without it (or ``resume``) such a sweep is refused: measured
    rows are never dropped silently."""
    cuda_graph: bool = False
    point_budget_s: float = 0.5
    """Timed seconds per point under ``-n auto``."""
    seed: int = 0
    stream: Path | None = None
    """Where rows stream; None: next to ``output`` (same stem, .jsonl), else collbench-sweep.jsonl."""
    interleave: bool = False
    """Measure every algorithm at a size before the next size (tune's rounds), rather than every size
    of one algorithm before the next algorithm (``points.plan_points`` says why)."""
    only: frozenset[tuple[str, int, str]] | None = None
    """The (op, size_bytes, algorithm) points to measure, of those the ops, sizes and algorithms give
    (size_bytes as the row records it); None: all of them. Tune's tie rounds re-measure the tied
    pairs alone (tuning/rounds.py): a range of sizes times a set of algorithms would re-measure
    every algorithm at every size between the smallest and the largest tie."""
    cut_behind: float | None = None
    """Stop timing a point after one iteration where that iteration is over this many times the slowest
    timed iteration of a point measured in full at its size (the lowest), and its full iterations
    would overrun ``point_budget_s`` (runtime/sweep/timed.py; tune's rounds: ``REACH_FACTOR``). None:
    every point gets its full iterations."""

    @property
    def stream_path(self) -> Path:
        """The JSONL file rows stream into while the sweep runs."""
        if self.stream is not None:
            return self.stream
        if self.output is None:
            return DEFAULT_STREAM
        if self.output.suffix.lower() == ".jsonl":
            return self.output
        return self.output.with_suffix(".jsonl")


def sweep_sizes(min_bytes: int, max_bytes: int, step_factor: float, elem_bytes: int) -> list[int]:
    """Sizes from ``min_bytes`` to ``max_bytes`` multiplied by ``step_factor``, as nccl-tests steps them.

    A size a fractional factor lands between multiples of the dtype size is rounded down to one.

    Raises ConfigError for a size below 1 byte or a factor that is not a finite number (these would
    never reach ``max_bytes``). Every step grows the size by at least one byte, so it always ends.
    """
    if min_bytes < 1:
        raise ConfigError(f"--min-bytes must be at least 1, got {min_bytes}")
    if not math.isfinite(step_factor):
        raise ConfigError(f"--step-factor must be a finite number, got {step_factor}")
    sizes: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        rounded = size // elem_bytes * elem_bytes
        if rounded > 0 and (not sizes or rounded > sizes[-1]):
            if len(sizes) == MAX_SIZES:
                raise ConfigError(
                    f"-b {min_bytes} -e {max_bytes} -f {step_factor} steps through more than {MAX_SIZES} sizes: "
                    "use a larger --step-factor or a narrower range"
                )
            sizes.append(rounded)
        if step_factor <= 1.0:
            break
        grown = size * step_factor
        if grown > max_bytes:
            break
        # A small size times a small factor can floor back to itself (1 * 1.5): always move on.
        size = max(math.floor(grown), size + 1)
    return sizes


def resolve_algos(
    config: SweepConfig, ops: list[Op], backend: str, skipped: list[str] | None = None
) -> dict[Op, list[str]]:
    """For each op, the algorithms to run on ``backend``: ``all`` expands to every registered one that
    applies, in the registry's order, and the backend's forced variants (``Backend.sweep_algos``).

    A forced variant is left out of the ops the backend cannot run it for, with one line each appended
    to ``skipped``. Raises UnknownNameError for an unknown name, NotApplicableError for one that does
    none of the ops, or when the backend can run none of what is left.
    """
    return get_backend(backend).sweep_algos(config, ops, [] if skipped is None else skipped, HERE)


@dataclass(frozen=True, slots=True)
class SweepJob:
    """What every rank receives: the checked config and the choices made before launching."""

    config: SweepConfig
    backend: str
    ops: tuple[Op, ...]
    algos: tuple[tuple[Op, tuple[str, ...]], ...]
    sizes: tuple[int, ...]
    dtype: str
    redop: str
    stream_path: Path
    topology: Topology | None = None
    """The topology when one was given (``--topology``, or tune's)."""
    nccl_log_dir: Path | None = None
    """Where NCCL logs its per-call TUNING choices (nccl runs with native points); rank 0 reads it."""
    notes: tuple[str, ...] = ()
    """One line per thing left out before launching (an (op, NCCL algorithm) pair NCCL cannot run)."""

    @property
    def runs_on(self) -> Backend:
        """The backend the sweep runs on (``backend`` is its name, as the rows record it)."""
        return get_backend(self.backend)


def validate(config: SweepConfig) -> SweepJob:
    """Check every option and resolve names; raise a UserError subclass naming the first mistake.

    Runs before any process starts: unknown op, algorithm, dtype or reduction, sizes out of order or
    not a multiple of the dtype size, a bad rank count or root, nccl without GPUs, a bad output name.
    """
    check_switches()
    if config.world_size is not None:
        # One rank is allowed: it times the call's own overhead (and a one-GPU machine's default is one).
        check_ranks(config.world_size, 1, "sweep")
    if config.world_size is not None and config.world_size > MAX_WORLD_SIZE:
        raise CommandLineError(f"--ranks must be at most {MAX_WORLD_SIZE}, got {config.world_size}")
    job = detect_job()
    if job is not None and config.world_size is not None:
        raise CommandLineError(f"under {job.launcher} the world size is {job.launcher}'s; leave --ranks out")
    if not config.ops:
        raise CommandLineError("no op to run; give --op (all-reduce, ... or all)")
    if not config.algos:
        # 'sweep --algo ""' (an unset shell variable) measured nothing, wrote an empty file and exited 0.
        raise CommandLineError("no algorithm to run; give --algo (ring, native, ... or all)")
    ops: list[Op] = []
    for name in config.ops:
        chosen = list(Op) if name.strip().lower() == "all" else [Op.parse(name)]
        ops.extend(op for op in chosen if op not in ops)
    dtype = parse_dtype(config.dtype)
    if dtype not in SWEEP_DTYPES:
        # nccl-tests' other types are held in rows read from its logs (ops.SWEEP_DTYPES says why not run).
        unsigned = " (gloo carries no uint32 or uint64)" if dtype in ("uint32", "uint64") else ""
        raise CommandLineError(
            f"--dtype {config.dtype}: collbench's sweep runs {', '.join(SWEEP_DTYPES)}{unsigned}; "
            f"nccl-tests logs of {dtype} are read by import and fit"
        )
    redop = parse_redop(config.redop)
    if redop == "avg" and dtype not in FLOAT_DTYPES:
        # NCCL's avg of integers is the sum divided by the ranks and truncated (nccl-tests' ReduceAvg_Base):
        # no average, and gloo has no avg to measure it against.
        raise CommandLineError(
            f"avg of {dtype} is refused: NCCL's is the sum divided by the rank count, truncated, not an average; "
            "use -o sum or a float dtype"
        )
    if redop == "avg" and any(op.spec.ordered for op in ops):
        raise CommandLineError(
            "avg has no prefix form (MPI_Scan and MPI_Exscan take no average); use -o sum for scan and exscan"
        )
    elem = DTYPE_SIZES[dtype]
    if config.min_bytes < 1 or config.max_bytes < 1:
        raise CommandLineError(f"sizes must be at least 1 byte, got -b {config.min_bytes} -e {config.max_bytes}")
    if config.max_bytes > MAX_SIZE_BYTES:
        raise CommandLineError(
            f"--max-bytes {config.max_bytes} is more than the {format_bytes(MAX_SIZE_BYTES)} any rank's memory "
            "could hold: give a smaller size (K/M/G suffixes are powers of 1024)"
        )
    if config.min_bytes > config.max_bytes:
        raise CommandLineError(f"--min-bytes {config.min_bytes} is above --max-bytes {config.max_bytes}")
    for flag, size in (("--min-bytes", config.min_bytes), ("--max-bytes", config.max_bytes)):
        if size % elem:
            raise CommandLineError(f"{flag} {size} is not a multiple of the {dtype} size ({elem} bytes)")
    if not math.isfinite(config.step_factor) or config.step_factor < 1.0:
        raise CommandLineError(f"--step-factor must be a finite number of at least 1, got {config.step_factor}")
    if config.step_factor == 1.0 and config.min_bytes < config.max_bytes:
        # nccl-tests reads -f 1 as "step by -i bytes", which sweep has not: '-b 1K -e 1M -f 1' measured 1K
        # alone and said nothing of the rest of the range.
        raise CommandLineError(
            f"--step-factor 1 never grows -b {config.min_bytes} toward -e {config.max_bytes}: "
            "give a factor above 1 (-f 2), or -e equal to -b for one size"
        )
    if config.iters is not None and not 1 <= config.iters <= MAX_ITERS:
        raise CommandLineError(f"--iters must be from 1 to {MAX_ITERS} (or auto), got {config.iters}")
    if not 0 <= config.warmup <= MAX_ITERS:
        raise CommandLineError(f"--warmup must be from 0 to {MAX_ITERS}, got {config.warmup}")
    check_seconds(config.timeout_s, "--timeout", MIN_TIMEOUT_S)
    check_seconds(config.point_budget_s, "--budget")
    if config.segment_bytes is not None and config.segment_bytes < elem:
        raise CommandLineError(f"--segment-bytes {config.segment_bytes} is smaller than one {dtype} element")
    if config.segment_bytes is not None and config.segment_bytes > MAX_SIZE_BYTES:
        raise CommandLineError(f"--segment-bytes {config.segment_bytes} is more than {format_bytes(MAX_SIZE_BYTES)}")
    world = config.world_size if job is None else job.world_size
    if config.root < 0 or (world is not None and config.root >= world):
        raise CommandLineError(f"--root {config.root} is not a rank of a world of {world}")
    if config.output is not None and config.output.suffix.lower() not in OUTPUT_SUFFIXES:
        raise CommandLineError(f"--output {config.output}: use a .jsonl, .csv or .parquet name")
    if config.output is not None and config.output.suffix.lower() == ".parquet" and (problem := parquet_problem()):
        # Said before a rank starts: the rows are written only once every point is measured.
        raise ConfigError(f"--output {config.output}: {problem}")
    local = job.local_world_size if job is not None else (config.world_size or 1)
    skipped: list[str] = []
    named = backend_named(config.backend)
    if named is None or named.torch_backend is not None:
        _check_variant_spellings(config)
    backend = sweep_backend(config.backend, local)
    backend.check_sweep(config, dtype, redop, HERE)
    per_op = backend.sweep_algos(config, ops, skipped, HERE)
    skipped.extend(_segment_notes(config, per_op))
    _check_in_place(config, ops, backend)
    topology = config.topology
    if topology is None and config.topology_path is not None and job is None:
        # Under a launcher rank 0 alone reads it, in its plan of the sweep (worker.py), and hands the
        # others their part of the layout: every rank reading the file was O(ranks^2) each.
        topology = load_sweep_topology(config.topology_path, world, skipped)
    if topology is None and config.topology_path is None and config.layout is None:
        _check_one_node(per_op)
    # Every option is checked before the files: a mistyped option says what is wrong with it, not
    # that the stream holds rows (which --overwrite would then empty for nothing).
    _check_files(config, world)
    return SweepJob(
        config=config,
        backend=backend.name,
        ops=tuple(ops),
        algos=tuple((op, tuple(per_op[op])) for op in ops),
        sizes=tuple(sweep_sizes(config.min_bytes, config.max_bytes, config.step_factor, elem)),
        dtype=dtype,
        redop=redop,
        stream_path=config.stream_path,
        topology=topology,
        notes=tuple(skipped),
    )


def check_backend_name(name: str) -> Backend | None:
    """The backend ``--backend name`` names, None for ``auto``; UnknownNameError listing every backend sweep
    runs (not only torch's) for a name that is none of them. Nothing is resolved: torch is not imported."""
    named = backend_named(name)
    if named is None and name.strip().lower() != AUTO:
        raise UnknownNameError("backend", name, [*backend_names(), AUTO])
    return named


def sweep_backend(name: str, local_ranks: int) -> Backend:
    """The backend ``--backend name`` sweeps on: one with its own launcher as named (whether that launcher
    is here is found when the sweep starts it), else the torch backend ``name`` resolves to here
    (``ranks.resolve_backend``: ``auto`` picked, checked runnable)."""
    named = check_backend_name(name)
    if named is not None and named.torch_backend is None:
        return named
    # Imported here: it imports torch, and tune checks its sizes (sweep_sizes) before loading it.
    from collbench.runtime.launch import ranks

    return get_backend(ranks.resolve_backend(name, local_ranks))


def _check_in_place(config: SweepConfig, ops: list[Op], backend: Backend) -> None:
    """ConfigError for ``--in-place`` alone when every op is out of place only (torch.distributed's
    all_to_all_single and send/recv take two buffers; MPI has MPI_IN_PLACE): nothing would be measured,
    and the ranks would say so as a rank's failure."""
    if config.in_place != (True,) or backend.in_place_every_op:
        return
    if all(op.spec.out_of_place for op in ops):
        names = ", ".join(op.value for op in ops)
        raise ConfigError(f"--in-place: {names} run out of place only (input then output); leave --in-place out")


def _check_one_node(per_op: dict[Op, list[str]]) -> None:
    """ConfigError where every algorithm asked for needs two or more nodes and, with no topology, the
    layout has one: the ranks would start, skip every point and fail together (a gloo error, exit 3)."""
    flat = sorted({a for algos in per_op.values() for a in algos if not is_native(a) and get_algorithm(a).needs_nodes})
    if flat and all(set(algos) <= set(flat) for algos in per_op.values()):
        raise CommandLineError(
            f"{', '.join(flat)} needs ranks on two or more nodes, and with no --topology the layout has one "
            "(on one node it is a ring): give --topology of several hosts, or add --algo ring"
        )


def load_sweep_topology(path: Path, world: int | None, notes: list[str]) -> Topology:
    """The topology of ``--topology``, checked to hold the ranks (``topology_notes``, appended to ``notes``).
    Raises InputFileError for a file that cannot be read, ConfigError for too few ranks."""
    # Imported here only: the topology package is another area's and loads YAML.
    from collbench.topology.io import load_topology

    topology = load_topology(path)
    notes.extend(topology_notes(path, len(topology.rank_devices), world))
    return topology


def topology_notes(path: Path, ranks: int, world: int | None, command: str = "sweep") -> list[str]:
    """ConfigError for a --topology of fewer ranks than the sweep (or tune: ``command``) runs; a note
    where it has more."""
    if world is None or ranks == world:
        return []
    if ranks < world:
        raise ConfigError(
            f"--topology {path} describes {counted(ranks, 'rank')}, fewer than the {world} this {command} runs: "
            "give the topology of its ranks (collbench discover -O FILE on its machine)"
        )
    return [f"--topology {path} describes {ranks} ranks: the layout follows its first {world}"]


def _check_variant_spellings(config: SweepConfig) -> None:
    """Raise for a misspelt ``native:``/``native@`` variant before the backend is checked, so a mistake in
    ``--algo`` is reported as such on a machine without GPUs too (not hidden behind "needs CUDA GPUs")."""
    from collbench.nccl.variants import parse_native_variant

    for name in config.algos:
        key = name.strip().lower()
        if key.startswith(("native:", "native@")):
            parse_native_variant(key)


def _segment_notes(config: SweepConfig, per_op: dict[Op, list[str]]) -> list[str]:
    """A line when ``--segment-bytes`` would cut the largest transfer into more segments than the
    executor posts (``schedule_runner.MAX_TRANSFER_SEGMENTS``): there it uses larger segments."""
    # Imported here only: the executor imports torch, which the CLI's --help need not load.
    from collbench.runtime.executor.schedule_runner import MAX_TRANSFER_SEGMENTS, transfer_segment_elems

    seg = config.segment_bytes
    if seg is None or not any(not is_native(a) for algos in per_op.values() for a in algos):
        return []
    used = transfer_segment_elems(config.max_bytes, seg)
    if used == seg:
        return []
    return [
        f"--segment-bytes {format_bytes(seg)} would cut {format_bytes(config.max_bytes)} into "
        f"{-(-config.max_bytes // seg)} segments; the executor cuts a transfer into at most "
        f"{MAX_TRANSFER_SEGMENTS} (segments of up to {format_bytes(used)} at that size)"
    ]


def _check_files(config: SweepConfig, world: int | None) -> None:
    """The stream and output files, checked in the parent before any rank starts.

    A symlink at the stream is refused: it is appended to in place, so the run would write whatever
    the link points to (``--output`` is replaced by a rename, which never writes through one). With ``--resume`` the
    rows already there are read now, so a bad file fails in one line, and a stream of other world sizes
    than ``world`` (the sweep's ranks) is refused. Whether a stream that holds rows may be emptied is
    decided by ``files.sweep_files`` once it holds the file's lock.
    """
    stream = config.stream_path
    check_path_fits(stream)  # first: a name too long fails every look at it with an OSError
    refuse_symlink(stream)
    if stream.suffix.lower() != ".jsonl" and not (stream.is_file() and stream.stat().st_size > 0):
        # Rows stream as JSON lines, and every reader takes a results file's format from its suffix:
        # 'sweep --stream s.csv' wrote JSONL that fit and report then read as CSV ('field op: missing').
        # A file there that holds something is said for what it holds (files.sweep_files).
        raise CommandLineError(
            f"--stream {stream}: rows stream as JSON lines, and results are read by their suffix; use a .jsonl name"
        )
    if stream.exists() and not stream.is_file() and not stream.is_dir():  # a directory: check_writable says so
        # A FIFO would block the write check below until someone read it; a device takes no rows back.
        raise InputFileError(
            str(stream), "is not a regular file; rows stream into a plain file (give another --stream)"
        )
    if config.resume:
        if config.overwrite:
            raise CommandLineError("--resume continues the stream and --overwrite empties it: give one of them")
        # Rank 0's file under a launcher, maybe on another host: only the rank that writes it reads it
        # (tune's second sweep of a round, out of place, continues the stream its first one began).
        if writes_files() and not stream.exists():
            raise ConfigError(f"--resume: no {stream} to resume from")
        if writes_files():
            ranks_held = {row.world_size for row in read_jsonl(stream)}
            if world is not None and ranks_held and world not in ranks_held:
                # 'sweep --ranks 3 --resume' on a 2-rank stream resumed nothing and appended 3-rank rows
                # to it: one stream, two machines' fingerprints (a topology's counts its ranks).
                sizes = ", ".join(str(w) for w in sorted(ranks_held))
                raise ConfigError(
                    f"--resume: {stream} holds rows measured with {sizes} ranks and this sweep runs {world}; resume "
                    f"it with the ranks it was measured with, or give --stream FILE for the {world}-rank rows"
                )
    check_writable(stream)
    if config.output is not None and config.output != stream:
        check_writable(config.output)
        # 'sweep -O keep.csv --stream new.jsonl' replaced the 844 rows keep.csv held with this run's.
        refuse_replacing(config.output, config.overwrite or config.resume)


def layout_nodes_note(layout: Layout | None, nodes: int) -> str | None:
    """A note when the layout groups the ranks into other nodes than the ``nodes`` the job's ranks run
    on (by host name and boot id, as the launcher's membership tells them apart): a topology of another
    shape than the job. Rows record the job's nodes, node-aware schedules follow the layout; said, so
    that nobody fits the two as one. None when they agree or the layout names no nodes."""
    if layout is None or not layout.nodes or len(layout.nodes) == nodes:
        return None
    grouped = len(layout.nodes)
    return (
        f"the layout ({layout.name}) groups the ranks into {counted(grouped, 'node')}, but they run on "
        f"{counted(nodes, 'node')} (by host name and boot id): rows record {nodes}; hierarchical's rings "
        f"follow the layout's {grouped}"
    )

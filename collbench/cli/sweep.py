"""`collbench sweep`: run and time collectives per algorithm, size and dtype, checking every result."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress

from collbench.cli.console import console, err_console, print_note
from collbench.cli.options import split_values
from collbench.cli.progress import point_progress
from collbench.cli.render.results import nccl_tests_text, results_tables, rows_json, table_legend
from collbench.errors import CommandLineError, UnknownNameError
from collbench.runtime.executor.segments import DEFAULT_SEGMENT_BYTES
from collbench.runtime.host.affinity import default_local_ranks
from collbench.runtime.sweep.files import kept_rows_note, resumed_rows
from collbench.runtime.sweep.stalls import stall_report
from collbench.schedules.ops import Op, parse_redop
from collbench.units import counted, format_bytes, parse_size

if TYPE_CHECKING:
    from collbench.runtime.sweep.run import SweepProgress

_FORMATS = ("table", "nccl-tests", "json")


def _segment_default() -> str:
    cpu, gpu = DEFAULT_SEGMENT_BYTES["cpu"], DEFAULT_SEGMENT_BYTES["cuda"]
    return format_bytes(cpu) if cpu == gpu else f"{format_bytes(cpu)} on CPU, {format_bytes(gpu)} on GPU"


def progress_bar(target: Console, *, disable: bool = False) -> Progress:
    """The sweep's progress: points done and the time elapsed and left, the point now measured below."""
    return point_progress(target, "sweep", remaining=True, disable=disable)


def sweep(
    ranks: Annotated[
        int | None,
        typer.Option(
            "--ranks",
            help="Local ranks (default: one per GPU, else min(4, usable cores), at least 2); "
            "leave out under torchrun, mpirun or srun.",
        ),
    ] = None,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            metavar="NAME",
            help="gloo, nccl, auto (nccl when every rank has a GPU), or mpi / mpich: Open MPI's or "
            "MPICH's own algorithms (native, native:<algorithm>), under an mpirun collbench starts.",
        ),
    ] = "auto",
    op: Annotated[
        list[str], typer.Option("--op", metavar="OP[,OP...]", help="Collectives (commas or repeats), or all.")
    ] = ["all-reduce"],  # noqa: B006
    algo: Annotated[
        list[str],
        typer.Option(
            "--algo",
            metavar="ALGO[,ALGO...]",
            help="Algorithms (commas or repeats), or all (native:ring... with nccl).",
        ),
    ] = ["all"],  # noqa: B006
    min_bytes: Annotated[
        str, typer.Option("-b", "--min-bytes", metavar="SIZE", help="Smallest size (K/M/G = powers of 1024).")
    ] = "1K",
    max_bytes: Annotated[str, typer.Option("-e", "--max-bytes", metavar="SIZE", help="Largest size.")] = "1M",
    step_factor: Annotated[
        float, typer.Option("-f", "--step-factor", metavar="X", help="Multiply the size by this each step.")
    ] = 4.0,
    iters: Annotated[
        str,
        typer.Option(
            "-n",
            "--iters",
            metavar="N|auto",
            help="Timed iterations per point, or auto (until the median is known to 2%).",
        ),
    ] = "auto",
    warmup: Annotated[
        int,
        typer.Option(
            "-w",
            "--warmup",
            help="More untimed calls before the timed ones (each point also makes one first call,"
            " which the data check reads).",
        ),
    ] = 1,
    dtype: Annotated[
        str,
        typer.Option(
            "-d", "--dtype", metavar="TYPE", help="float32, float64, float16, bfloat16, int32, int64, int8, uint8."
        ),
    ] = "float32",
    redop: Annotated[
        str, typer.Option("-o", "--redop", metavar="REDOP", help="sum, prod, min, max or avg (floats).")
    ] = "sum",
    root: Annotated[
        int, typer.Option("-r", "--root", metavar="RANK", help="Root rank of broadcast, reduce, scatter and gather.")
    ] = 0,
    in_place: Annotated[bool, typer.Option("--in-place", help="Measure in-place calls only.")] = False,
    out_of_place: Annotated[bool, typer.Option("--out-of-place", help="Measure out-of-place calls only.")] = False,
    both: Annotated[bool, typer.Option("--both", help="Measure out-of-place and in-place (the default).")] = False,
    check: Annotated[
        int, typer.Option("-c", "--check", metavar="0|1", help="1: check every result (default); 0: do not.")
    ] = 1,
    segment_bytes: Annotated[
        str | None,
        typer.Option(
            "--segment-bytes", metavar="SIZE", help=f"Pipeline segment of the executor (default {_segment_default()})."
        ),
    ] = None,
    topology: Annotated[
        Path | None, typer.Option("--topology", metavar="FILE", help="Topology whose layout the schedules follow.")
    ] = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", "-T", metavar="SECONDS", help="Seconds before a dead or hung rank stops the run."),
    ] = 60.0,
    output: Annotated[
        Path | None, typer.Option("--output", "-O", metavar="FILE", help="Write rows to .csv, .parquet or .jsonl.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", metavar="NAME", help="table, nccl-tests or json.")] = "table",
    resume: Annotated[bool, typer.Option("--resume", help="Skip points already in the streamed JSONL file.")] = False,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Empty a stream file that holds rows, replace an --output already there (else refused: see --resume).",
        ),
    ] = False,
    cuda_graph: Annotated[
        bool, typer.Option("--cuda-graph", help="Time native points as CUDA-graph launches (GPUs; not own algorithms).")
    ] = False,
    budget: Annotated[
        float, typer.Option("--budget", metavar="SECONDS", help="Timed seconds per point under -n auto.")
    ] = 0.2,
    stream: Annotated[
        Path | None, typer.Option("--stream", metavar="FILE", help="JSONL file rows stream into as measured.")
    ] = None,
) -> None:
    """Run and time collectives per algorithm, size and dtype; check every result."""
    # -d is single-valued where --op and --algo take lists: 'float32,bfloat16' read as one unknown name
    # (with bfloat16 listed as known). Said before torch is imported.
    dtypes = list(dict.fromkeys(split_values([dtype])))
    if len(dtypes) > 1:
        raise CommandLineError(
            f"-d/--dtype takes one dtype a sweep, got {len(dtypes)}: {', '.join(dtypes)}; run one sweep per "
            "dtype, the later ones with the first's --stream FILE and --resume to add their rows to it"
        )
    # Neither imports torch: a sweep refused for its options says so without waiting for it.
    from collbench.runtime.launch.launchers import detect_job
    from collbench.runtime.sweep.plan import SweepConfig, validate

    if fmt not in _FORMATS:
        raise CommandLineError(f"--format {fmt!r}: use one of {', '.join(_FORMATS)}")
    if sum([in_place, out_of_place, both]) > 1:
        raise CommandLineError("give one of --in-place, --out-of-place, --both")
    modes: tuple[bool, ...] = (True,) if in_place else (False,) if out_of_place else (False, True)
    if iters.strip().lower() == "auto":
        n_iters = None
    elif iters.strip().removeprefix("-").isdecimal():
        # A negative count is refused with 0's words (validate: "from 1 to ..., got -2"); a count of more
        # digits than any allowed one is refused before int(), which raises past 4,300 digits.
        if len(iters.strip()) > 12:
            from collbench.runtime.sweep.plan import MAX_ITERS  # torch's chain: not for --help

            raise CommandLineError(f"--iters must be from 1 to {MAX_ITERS} (or auto), got {iters.strip()[:12]}...")
        n_iters = int(iters)
    else:
        raise CommandLineError(f"-n/--iters {iters!r}: give a number of iterations or auto")
    if check not in (0, 1):
        raise CommandLineError(f"-c/--check {check}: use 1 (check) or 0 (do not)")
    try:
        parse_redop(redop)
    except UnknownNameError as exc:
        # -o is nccl-tests' reduction; a file name there was meant for the output.
        looks_like_file = "." in redop or "/" in redop
        raise CommandLineError(
            f"-o/--redop: {exc}" + ("; to write results use -O/--output" if looks_like_file else "")
        ) from None
    config = SweepConfig(
        world_size=ranks if ranks is not None or detect_job() is not None else default_local_ranks(backend),
        backend=backend,
        ops=split_values(op),
        algos=split_values(algo),
        min_bytes=parse_size(min_bytes, "-b/--min-bytes"),
        max_bytes=parse_size(max_bytes, "-e/--max-bytes"),
        step_factor=step_factor,
        iters=n_iters,
        warmup=warmup,
        dtype=dtype,
        redop=redop,
        root=root,
        in_place=modes,
        check=bool(check),
        segment_bytes=parse_size(segment_bytes, "--segment-bytes") if segment_bytes is not None else None,
        topology_path=topology,
        timeout_s=timeout,
        output=output,
        resume=resume,
        overwrite=overwrite,
        cuda_graph=cuda_graph,
        point_budget_s=budget,
        stream=stream,
    )
    # Under a launcher only rank 0 reports; the other ranks stay quiet.
    job = detect_job()
    progress = progress_bar(err_console, disable=job is not None and job.rank != 0)
    # Bad input is reported before the progress bar starts, so the error is the only thing printed.
    validate(config)
    # Imported once the options are checked: it imports torch (about 10 s on a loaded machine).
    try:
        from collbench.runtime.sweep.run import run_sweep
    except KeyboardInterrupt as exc:
        # Ctrl-C while torch loads said "what was measured so far is on disk".
        exc.detail = "before any point was measured"  # type: ignore[attr-defined]
        raise
    if config.world_size == 1:
        # Not refused: one rank still times the call's own overhead, and a one-GPU machine's default is one rank.
        print_note(
            "note",
            "a one-rank world moves no data: every point times a local call; --ranks 2 or more measures communication",
        )
    task = progress.add_task("sweep", total=None, now="starting ranks")

    def on_event(event: SweepProgress) -> None:
        if event.kind == "note":
            print_note("note", event.text, progress.console)
        elif event.kind == "plan":
            progress.update(task, total=event.total, completed=event.done, now="")
        elif event.kind == "start":
            progress.update(task, completed=event.done, now=event.text)
        elif event.kind == "row":
            progress.update(task, completed=event.done)

    # The points --resume takes from the stream, which the summary counts apart. By key, not by the
    # rows' timestamps against this command's clock: a host whose clock stepped between the runs (or
    # rank 0 on another host than this one) would count them wrongly.
    taken_keys = {row.key for row in resumed_rows(config.stream_path)} if config.resume else set()
    try:
        with progress:
            rows = run_sweep(config, progress=on_event)
    except KeyboardInterrupt as exc:
        # app.py says "interrupted: ..." and exits 128 + the signal; here is where the rows are and how to go on.
        kept = kept_rows_note(config.stream_path)
        # Stopped while its ranks started, it claimed "what was measured so far is on disk" over an
        # empty stream.
        exc.detail = (  # type: ignore[attr-defined]
            kept.lstrip("; ") + "; the same command with --resume continues from them"
            if kept
            else "before any point was measured"
        )
        raise
    if not rows:
        return
    if fmt == "json":
        typer.echo(rows_json(rows))
    elif fmt == "nccl-tests":
        typer.echo(nccl_tests_text(rows), nl=False)
    else:
        for table in results_tables(rows):
            console.print(table)
        console.print(table_legend(rows))
        for line in stall_report(rows):
            print_note("stalls", line, console)
        wrong = sum(max(r.wrong, 0) for r in rows)
        # Barrier rows carry no data to check (wrong -1): they say so rather than "not checked".
        data_rows = [r for r in rows if Op.parse(r.op).spec.payload]
        checked = all(r.wrong >= 0 for r in data_rows)
        if not data_rows:
            status = "barrier moves no data: nothing to check"
        else:
            status = "[red]FAILED[/red]" if wrong else ("OK" if checked else "not checked")
            if len(data_rows) < len(rows):
                status += "; barrier moves no data: nothing to check"
        streamed = f"rows streamed to {escape(str(config.stream_path))}"
        if config.resume:
            # A resumed sweep printed the stream's earlier rows as this run's, and one with every point
            # there already started its ranks, measured nothing and said nothing of it.
            taken = sum(r.key in taken_keys for r in rows)
            now = "none measured now: every point was there"
            if taken < len(rows):
                now = f"{len(rows) - taken} measured now"
            streamed += f" ({taken} of {counted(len(rows), 'row')} resumed from it, {now})"
        console.print(f"wrong elements: {wrong} ({status}); {streamed}")
        if output is not None and output != config.stream_path:
            # '-O rows.jsonl' streams into rows.jsonl itself: the line above names it, and 'wrote 18 rows
            # to rows.jsonl' under it read as a second file.
            console.print(f"wrote {counted(len(rows), 'row')} to {escape(str(output))}")

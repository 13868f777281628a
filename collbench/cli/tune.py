"""`collbench tune`: the whole pipeline in one command, ending with a profile, a table and a plot."""

from __future__ import annotations

import dataclasses
import os
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from collbench.backends import AUTO
from collbench.backends.base import note_said, parse_skip_note, skip_note
from collbench.cli.console import console, err_console, print_note
from collbench.cli.options import split_values
from collbench.cli.progress import point_progress
from collbench.errors import CommandLineError, ConfigError
from collbench.tuning.config import (
    DEFAULT_PROFILE,
    TuneConfig,
    check_config,
    check_fresh,
    partial_paths,
    shape_configs,
    tune_backend,
)
from collbench.units import counted, parse_size

if TYPE_CHECKING:
    from collbench.models.nccl_graph import NodeFacts
    from collbench.runtime.sweep.run import SweepProgress
    from collbench.tuning.pipeline import TuneOutcome


def _file_mark(path: Path) -> tuple[int, int, int] | None:
    """What tells a file written since from the one there now (inode, size, mtime); None where none is.
    A profile is saved by replacing it (``fileio.atomic_write_text``), so a save always changes it."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _command(config: TuneConfig, ranks: Sequence[int] | None, predict_ranks: str | None) -> str:
    """The command line that reproduces the tune ``config`` does (of ``ranks``), recorded in the profile."""
    parts = ["collbench", "tune"]
    if ranks is not None:
        parts += ["--ranks", ",".join(map(str, ranks))]
    if config.backend != AUTO:
        parts += ["--backend", config.backend]
    for name in config.ops:
        if name != "all-reduce" or len(config.ops) > 1:
            parts += ["--op", name]
    if config.topology_path is not None:
        parts += ["--topology", str(config.topology_path)]
    if config.quick:
        parts.append("--quick")
    if config.min_bytes is not None:
        parts += ["-b", str(config.min_bytes)]
    if config.max_bytes is not None:
        parts += ["-e", str(config.max_bytes)]
    if config.output != DEFAULT_PROFILE:
        parts += ["--output", str(config.output)]
    if config.results_path is not None:
        parts += ["--results", str(config.results_path)]
    if config.plot_path is not None:
        parts += ["--plot", str(config.plot_path)]
    return shlex.join(parts) + (f" --predict-ranks {predict_ranks}" if predict_ranks else "")


def _check_no_nvls(no_nvls: bool, predicting: bool) -> None:
    """ConfigError for ``--no-nvls`` where it would describe nothing: it tells NCCL's model of the predicted
    shapes that the runs set NCCL_NVLS_ENABLE=0 (as ``predict --no-nvls`` does), so it needs shapes to
    predict, and a tune whose runs do set it: they inherit this process's environment, and a tune run with
    NVLS on and predicted with it off would price other runs than it measured."""
    if not no_nvls:
        return
    if not predicting:
        raise ConfigError("--no-nvls tells the predictions of --predict-ranks how NCCL runs: give --predict-ranks")
    if os.environ.get("NCCL_NVLS_ENABLE", "").strip() != "0":
        raise ConfigError(
            "--no-nvls says the runs set NCCL_NVLS_ENABLE=0, and this tune's environment does not: export "
            "NCCL_NVLS_ENABLE=0 for the tune (its runs then measure what the predictions price), or leave --no-nvls out"
        )


def nvls_off_in_environment(
    predicting: bool, no_nvls: bool, backends: Sequence[str], environ: Mapping[str, str]
) -> bool:
    """Whether the predicted shapes are priced with NVLS off though ``--no-nvls`` was not given: the tune
    predicts, its backend is NCCL's, and its environment (which its runs inherit) sets
    NCCL_NVLS_ENABLE=0. A tune measured with NVLS off and predicted with it on would price other runs
    than it measured; ``--no-nvls`` says the same where it is given."""
    from collbench.models.predict import native_modelled

    return (
        predicting
        and not no_nvls
        and environ.get("NCCL_NVLS_ENABLE", "").strip() == "0"
        and any(native_modelled(b) for b in backends)
    )


def _no_nvls_facts(config: TuneConfig) -> NodeFacts:
    """NCCL's model told NVLS is off, for a tune whose backend is NCCL's (ConfigError otherwise, as predict
    refuses --no-nvls of gloo's fits); raises what the backend's check raises where it cannot run here."""
    from collbench.cli.predict import refuse_nccl_only
    from collbench.models.nccl_graph import NodeFacts

    refuse_nccl_only(["--no-nvls"], [tune_backend(config).name], "this tune measures")
    return NodeFacts(nvls=False)


def tune(
    ranks: Annotated[
        str | None,
        typer.Option(
            "--ranks",
            metavar="N[,N...]",
            help="Local ranks (default: one per GPU, else min(4, usable cores), at least 2); several (2,4,8) "
            "tune each into one profile; leave out under torchrun, mpirun or srun.",
        ),
    ] = None,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            metavar="NAME",
            help="auto (nccl with GPUs, else gloo), gloo, nccl, mpi or mpich (Open MPI's or MPICH's own algorithms).",
        ),
    ] = "auto",
    op: Annotated[
        list[str] | None,
        typer.Option(
            "--op",
            metavar="OP[,OP...]",
            help="Collectives to tune (commas or repeats): all-reduce (default), all-to-all, barrier, ..., or all.",
        ),
    ] = None,
    topology: Annotated[
        Path | None, typer.Option("--topology", metavar="FILE", help="Use a saved topology instead of discovering.")
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Fewer sizes, shorter timing: about 20 s on 2 idle CPU ranks.")
    ] = False,
    min_bytes: Annotated[
        str | None,
        typer.Option(
            "-b",
            "--min-bytes",
            metavar="SIZE",
            help="Smallest size (K/M/G = powers of 1024; default 256 B, quick 512 B).",
        ),
    ] = None,
    max_bytes: Annotated[
        str | None,
        typer.Option("-e", "--max-bytes", metavar="SIZE", help="Largest size (default 16 MiB, quick 2 MiB)."),
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-O", metavar="PROFILE.yaml", help="Where the profile goes.")] = (
        DEFAULT_PROFILE
    ),
    results: Annotated[
        Path | None,
        typer.Option("--results", metavar="FILE", help="Where measured rows go (.jsonl/.csv/.parquet)."),
    ] = None,
    plot: Annotated[Path | None, typer.Option("--plot", metavar="FILE.png", help="Where the plot goes.")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an interrupted tune from the partial rows it kept.")
    ] = False,
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Replace a profile or results file already there (else refused)."),
    ] = False,
    check: Annotated[
        Path | None,
        typer.Option("--check", metavar="PROFILE", help="Re-measure a profile's choices against the alternatives."),
    ] = None,
    predict_ranks: Annotated[
        str | None,
        typer.Option(
            "--predict-ranks",
            metavar="N[:NODES],...",
            help="Also add rule sets predicted from the fitted models for these shapes (marked predicted; "
            "without :NODES, as many nodes as keep the measured ranks a node).",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", "-T", metavar="SECONDS", help="Seconds before a dead, hung or stopped rank stops the run."
        ),
    ] = 300.0,
    no_nvls: Annotated[
        bool,
        typer.Option(
            "--no-nvls",
            help="With --predict-ranks: the runs set NCCL_NVLS_ENABLE=0 (export it for the tune), so NCCL's "
            "model runs ring and tree where it would run NVLS, for the measured shapes and the predicted ones "
            "(taken as given where NCCL_NVLS_ENABLE=0 is set).",
        ),
    ] = False,
) -> None:
    """Discover, lay out, sweep every applicable algorithm, fit, select, and write the profile."""
    # The options and files are checked before torch is imported (10 s on a loaded machine): a tune
    # refused for them said its one line only after that wait. Nothing imported up to the check loads it.
    from collbench.runtime.launch.launchers import detect_job
    from collbench.tuning.shape_args import parse_ranks, parse_shapes

    if check is not None:
        # --check re-measures the profile's own sizes and writes nothing: 'tune --check P -O new.yaml --quick'
        # ran the check, wrote no new.yaml and said nothing of it.
        ignored = [
            flag
            for flag, given in (
                ("--op", bool(op)),
                ("--topology", topology is not None),
                ("--quick", quick),
                ("-b", min_bytes is not None),
                ("-e", max_bytes is not None),
                ("-O", output != DEFAULT_PROFILE),
                ("--results", results is not None),
                ("--plot", plot is not None),
                ("--resume", resume),
                ("--overwrite", overwrite),
                ("--predict-ranks", predict_ranks is not None),
                ("--no-nvls", no_nvls),
            )
            if given
        ]
        if ignored:
            raise ConfigError(
                f"--check re-measures the profile's own rules at their own sizes and writes no file: leave out "
                f"{', '.join(ignored)} (it takes --ranks, --backend and --timeout)"
            )
        _check(check, parse_ranks(ranks) if ranks is not None else None, backend, timeout)
        return

    ops = split_values(op)
    if op and not ops:
        # '--op ""' (an unset shell variable) tuned all-reduce, the default, for minutes; sweep refuses it.
        raise ConfigError("no op to tune; give --op (all-reduce, ... or all), or leave it out for all-reduce")
    ops = ops or ("all-reduce",)
    given = parse_ranks(ranks) if ranks is not None else None
    predict = parse_shapes(predict_ranks) if predict_ranks else ()
    _check_no_nvls(no_nvls, bool(predict))
    job = detect_job()
    if job is not None and given is not None and len(given) > 1:
        raise ConfigError("under a launcher it sets the world size: --ranks takes one value there")
    if job is not None and given is not None and given[0] != job.world_size:
        # 'mpirun -np 2 collbench tune --ranks 4' tuned 2 ranks and wrote a profile of 2 without a word,
        # where sweep refuses any --ranks under a launcher and the ranks' own start refuses a contradiction.
        raise CommandLineError(
            f"--ranks {given[0]} contradicts {job.launcher}'s world of {counted(job.world_size, 'rank')}; "
            "leave --ranks out"
        )
    config = TuneConfig(
        ranks=None if job is not None or given is None else given[0],
        backend=backend,
        ops=tuple(ops),
        topology_path=topology,
        quick=quick,
        output=output,
        results_path=results,
        plot_path=plot,
        resume=resume,
        overwrite=overwrite,
        timeout_s=timeout,
        min_bytes=parse_size(min_bytes, "-b/--min-bytes") if min_bytes is not None else None,
        max_bytes=parse_size(max_bytes, "-e/--max-bytes") if max_bytes is not None else None,
    )
    configs = shape_configs(config, given)
    if job is None and not resume:
        check_fresh(configs)
    else:
        # Under a launcher rank 0 alone checks the files, its verdict handed to every rank (check_shapes),
        # and a resumed tune's files are read by what imports torch: their files are checked there, after.
        for c in configs:
            check_config(c, files=False)
    # Imported here, not above: they import torch, which --help and a refused tune must not wait for.
    try:
        from collbench.runtime.host.affinity import default_local_ranks
        from collbench.runtime.launch.ranks import job_rank, one_process_group
        from collbench.tuning.shapes import check_shapes, run_tune_shapes
    except KeyboardInterrupt as exc:
        # Ctrl-C while torch loads (10 s on a loaded machine) said "what was measured so far is on disk".
        exc.detail = "before any point was measured"  # type: ignore[attr-defined]
        raise
    measured: tuple[int, ...] | None = None
    if job is None:
        # Without --ranks, one rank per GPU: torch counts them.
        measured = given if given is not None else (default_local_ranks(backend),)
        config = dataclasses.replace(config, ranks=measured[0])
    command = _command(config, measured, predict_ranks) + (" --no-nvls" if no_nvls else "")
    config = dataclasses.replace(config, command=command)
    facts = _no_nvls_facts(config) if no_nvls else None
    backends = [tune_backend(config).name] if predict and not no_nvls and "NCCL_NVLS_ENABLE" in os.environ else []
    if nvls_off_in_environment(bool(predict), no_nvls, backends, os.environ):
        from collbench.models.nccl_graph import NodeFacts

        facts = NodeFacts(nvls=False)
        config = dataclasses.replace(config, command=config.command + " --no-nvls")
        print_note("note", "NCCL_NVLS_ENABLE=0 here: the predicted shapes are priced with NVLS off, as --no-nvls does")
    # Rows are stamped when measured (results.measured): a resumed tune's rows stamped before this
    # run are the interrupted run's, which its summary counts apart.
    started = time.time()
    # Under a launcher, every step of the tune (each round's sweep, the decisions between them) runs on
    # one process group, made once.
    with one_process_group(config.backend, config.timeout_s):
        # The checks run before the progress display opens: an error is one line, not a blank one first.
        plan = check_shapes(config, measured)
        # Under a launcher only rank 0 reports; the other ranks stay quiet.
        with point_progress(err_console, "{task.description}", disable=job_rank() != 0) as bar:
            task = bar.add_task("tune", total=None, now="")
            shown: set[str] = set()
            skips: dict[str, dict[str, None]] = {}

            def stage(name: str) -> None:
                bar.update(task, description=name, now="")

            def sweep_progress(event: SweepProgress) -> None:
                if event.kind == "plan":
                    bar.update(task, total=event.total, completed=event.done)
                elif event.kind in ("start", "row"):
                    bar.update(task, completed=event.done, now=event.text)
                elif event.kind == "note" and (skip := parse_skip_note(event.text)) is not None:
                    # Each part and round of the tune skips what its algorithms lack: said once per op, after.
                    for algo in skip[1]:
                        skips.setdefault(skip[0], {})[algo] = None
                elif event.kind == "note" and note_said(event.text) not in shown:
                    # Every round's sweep says its notes again: say each note once.
                    shown.add(note_said(event.text))
                    print_note("note", event.text, bar.console)

            profile_before = _file_mark(config.output)
            try:
                shapes = run_tune_shapes(config, plan, predict, stage, sweep_progress, facts)
            except KeyboardInterrupt as exc:
                from collbench.tuning.resume import kept_rows_hint

                hint = kept_rows_hint([p for s in plan.shapes for p in partial_paths(s.config)])
                if hint:
                    # Said in app.py's one line: a note above it said where the rows are, and the line
                    # 'interrupted: what was measured so far is on disk' said it again, vaguer.
                    exc.detail = hint.removeprefix("; ")  # type: ignore[attr-defined]
                elif _file_mark(config.output) != profile_before:
                    # The partial rows go once the profile is saved: stopped while the plot or report was
                    # drawn, it said "before any point was measured" over a profile of 278 rows.
                    saved = f"the profile of what was measured before it is in {config.output}"
                    exc.detail = saved  # type: ignore[attr-defined]
                else:  # app.py would say "what was measured so far is on disk" of nothing measured
                    exc.detail = "before any point was measured"  # type: ignore[attr-defined]
                raise
    if shapes is None:
        return  # a rank other than 0 of a launcher's job: rank 0 reports
    # Imported when a tune has run: the profile's tables pull the profile and numpy, which --help does not need.
    from rich.text import Text

    from collbench.cli.render.profile import render_fits, render_rules

    console.print(render_rules(shapes.profile))
    from collbench.profile.document import nccl_selection_view

    nccl_view = nccl_selection_view(shapes.profile)
    if nccl_view is not None:
        console.print("Among NCCL's own variants only (what export nccl-plugin, nccl-tuner and env follow):")
        console.print(render_rules(nccl_view))
    if shapes.profile.fits:
        console.print(render_fits(shapes.profile))
    for lacked, names in skips.items():
        print_note("note", skip_note(lacked, list(names)))
    print_outcome_notes(shapes.outcomes, marked="ringed in red in the report" if shapes.report_path else "")
    for line in shapes.assumed:
        print_note("assumed", line)
    for note in shapes.notes:
        print_note("note", note)
    for outcome in shapes.outcomes:
        when = "measured before the interruption" if outcome.resumed_whole else f"in {outcome.elapsed_s:.0f} s"
        taken = sum(r.timestamp < started for r in outcome.rows) if config.resume else 0
        if taken and not outcome.resumed_whole:
            # '(283 points in 24 s)' of a resumed tune counted the interrupted run's rows as measured now.
            when += f", {taken} of them measured before the interruption"
        # Two lines, as an 80-column terminal showed them: in a pipe the one line ran to 124 columns.
        # Text, not markup: a path is the user's, and may hold a bracket.
        rows_at = f"   results: {outcome.results_path}"
        console.print(Text.assemble("profile: ", (str(shapes.profile_path), "bold"), rows_at))
        console.print(Text(f"plot: {outcome.plot_path or '-'}   ({len(outcome.rows)} points {when})"))
    console.print(Text.assemble("report: ", (str(shapes.report_path or "-"), "bold")))


def print_outcome_notes(outcomes: Sequence[TuneOutcome], marked: str) -> None:
    """Each measured shape's stalls (``marked`` says where they are marked) and notes; with several
    shapes each line names its shape (two shapes' "4 rounds ..." notes followed each other with
    nothing to tell them apart)."""
    from collbench.runtime.sweep.stalls import stall_report

    for outcome in outcomes:
        shape = f" ({outcome.profile.world_size} ranks)" if len(outcomes) > 1 else ""
        for line in stall_report(outcome.rows, marked=marked):
            print_note(f"stalls{shape}", line)
        for note in outcome.notes:
            print_note(f"note{shape}", note)


def _check(path: Path, ranks: tuple[int, ...] | None, backend: str, timeout_s: float) -> None:
    """``tune --check PROFILE``: per rule of each shape this machine can run, the regret of its choice."""
    import tempfile

    from collbench.profile.document import Profile

    profile = Profile.load(path)  # before torch is imported: a profile refused is said at once
    from collbench.cli.render.check import check_summary, render_check, retune_advice
    from collbench.runtime.launch.ranks import job_rank, one_process_group
    from collbench.tuning.check import check_backend
    from collbench.tuning.check_shapes import run_check_shapes

    # Under a launcher every round of the check runs on one process group, as a tune's steps do
    # (locally, run_check keeps one set of ranks for its rounds).
    with (
        one_process_group(check_backend(profile, backend), timeout_s),
        tempfile.TemporaryDirectory(prefix="collbench-check-") as tmp,
        point_progress(err_console, "check", counts=False, disable=job_rank() != 0) as bar,
    ):
        task = bar.add_task("check", total=None, now="")

        def progress(event: SweepProgress) -> None:
            if event.kind == "start":
                bar.update(task, now=event.text)

        shapes = run_check_shapes(
            profile, ranks=ranks, backend=backend, stream_dir=Path(tmp), progress=progress, timeout_s=timeout_s
        )
    if job_rank() != 0:
        return  # a rank other than 0 of a launcher's job: rank 0 reports
    several = len(shapes) > 1
    for shape in shapes:
        if shape.skipped:
            print_note("skipped", shape.skipped)
            continue
        checks = list(shape.checks)
        console.print(render_check(checks, shape.rule_set.shape_label if several else None))
        console.print((f"{shape.rule_set.shape_label}: " if several else "") + check_summary(checks))
    beaten = [(shape.rule_set, c) for shape in shapes for c in shape.checks if c.faulted]
    advice = retune_advice(path, profile, beaten)
    if advice is not None:
        print_note("next", advice, console)

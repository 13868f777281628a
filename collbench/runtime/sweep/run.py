"""``collbench sweep``'s core: ``run_sweep`` checks the plan (sweep/plan.py) before any process starts,
launches the ranks and returns one ``ResultRow`` per measured point.

Rows stream to a JSONL file as rank 0 measures them (``stream_path``), so that a crash or Ctrl-C
loses nothing measured; ``resume`` skips the points already in it. The CLI turns options into a
``SweepConfig``; nothing here imports typer or rich.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.errors import RankError
from collbench.nccl.variants import is_native
from collbench.results.row import ResultRow
from collbench.runtime.host.affinity import launched_oversubscribed
from collbench.runtime.host.idle_latency import idle_cpus_poll
from collbench.runtime.launch.ranks import joined_job, launch
from collbench.runtime.sweep.files import sweep_files, write_output_from_stream
from collbench.runtime.sweep.plan import SweepConfig, SweepJob, validate


@dataclass(frozen=True, slots=True)
class SweepProgress:
    """A progress event for the callback of ``run_sweep``."""

    kind: str
    """``plan`` (total known), ``start`` (a point begins), ``row`` (a point was measured), ``note``."""
    done: int = 0
    total: int = 0
    text: str = ""
    """What runs (``all-reduce ring 1 MiB in-place``), or the note."""


ProgressCallback = Callable[[SweepProgress], None]


def run_sweep(config: SweepConfig, progress: ProgressCallback | None = None) -> list[ResultRow]:
    """Measure every point of ``config`` and return the rows (with the resumed ones), in plan order.

    Rows stream to ``config.stream_path`` as they are measured; ``config.output``, when given, is
    written at the end (.jsonl, .csv or .parquet). Under torchrun only rank 0 returns rows and writes
    files; the other ranks return an empty list.

    Raises UserError subclasses for bad options (before any process starts) and RankError when a
    rank dies or hangs (what was measured before is in the stream file).
    """
    # Imported here: the worker pulls in torch.distributed, which the option checks do not need.
    from collbench.runtime.sweep.worker import sweep_worker

    job = validate(config)
    launched = joined_job()
    # Under a launcher rank 0 alone reports, as its ranks' events already are (RankContext.report): the
    # plan's notes came from every rank ('native scan ...: skipped' once per rank of the job).
    quiet = launched is not None and launched.rank != 0

    def forward(event: dict[str, Any]) -> None:
        if progress is None or quiet:
            return
        progress(
            SweepProgress(
                kind=str(event["kind"]),
                done=int(event.get("done", 0)),
                total=int(event.get("total", 0)),
                text=str(event.get("text", "")),
            )
        )

    def note(text: str) -> None:
        forward({"kind": "note", "text": text})

    for text in job.notes:
        note(text)
    _check_resources(job, note)
    output = config.output if config.output != job.stream_path else None
    with contextlib.ExitStack() as stack:
        # One writer per file: a second run on the same stream or output stops here, before any rank.
        stack.enter_context(sweep_files(job.stream_path, output, config.resume, note, overwrite=config.overwrite))
        # Silent either way: where it is not allowed, the stall summary says so (sweep/stalls.stall_report).
        stack.enter_context(idle_cpus_poll())
        backend = job.runs_on
        if backend.on_gpu:
            job = _prepare_nccl(job, stack, note)
        if backend.sweep_runner is not None:
            # A library's own collectives run under its own launcher, not as collbench's ranks (runtime/mpi/).
            module, function = backend.sweep_runner.split(":")
            measured = getattr(importlib.import_module(module), function)(job, forward)
            if measured and output is not None:
                write_output_from_stream(output, job.stream_path, measured)
            return list(measured)
        try:
            results = launch(
                config.world_size,
                sweep_worker,
                job,
                backend=job.backend,
                timeout_s=config.timeout_s,
                progress=forward,
                result_types=(ResultRow,),
            )
        except RankError as exc:
            warnings = _nccl_warnings(job.nccl_log_dir)
            if not warnings:
                raise
            # NCCL's warnings went to the TUNING log, not to stderr: they usually say what broke.
            raise RankError(exc.rank, exc.host, exc.doing, f"{exc.problem}; NCCL said: {warnings}") from exc
        rows: list[ResultRow] = results[0] if results and results[0] is not None else []
        if rows and output is not None:
            write_output_from_stream(output, job.stream_path, rows)
    return rows


def _check_resources(job: SweepJob, note: Callable[[str], None]) -> None:
    """Refuse, before any rank starts, a sweep whose ranks cannot fit in memory.

    More local ranks than cores is said once: by runtime/host/affinity.py's placement where collbench
    starts the ranks, here under a launcher, which placed them.
    """
    from collbench.runtime.sweep import memory

    # Under a launcher its job says how many ranks there are, here and in all (mpirun and srun set no
    # WORLD_SIZE); a schedule's buffers grow with the world, so guessing 1 would pass what cannot fit.
    launched = joined_job()
    if launched is not None:
        world, here = launched.world_size, max(1, launched.local_world_size)
        if job.runs_on.places_cpu_ranks and (crowded := launched_oversubscribed(here)):
            note(crowded)
    else:
        world = here = job.config.world_size if job.config.world_size is not None else 1
    memory.check_host_memory(job, here, world, memory.host_memory())
    if job.runs_on.on_gpu:
        memory.check_device_memory(job, world, memory.gpu_free_bytes(here))


NO_CUDA_KERNELS_ENV = "COLLBENCH_NO_CUDA_KERNELS"
"""Set for the ranks when the parent could not build the CUDA kernels (``cuda_kernels.kernels_disabled``)."""
NCCL_WARNINGS_SHOWN = 3
"""How many of NCCL's last WARN lines a rank failure shows."""


def _prepare_nccl(job: SweepJob, stack: contextlib.ExitStack[Any], note: Callable[[str], None]) -> SweepJob:
    """Before the ranks start on nccl: build the CUDA kernels once, and have NCCL log its choices.

    Everything set here lives in ``os.environ`` (which the ranks inherit) until ``stack`` closes.
    """
    # Imported here only: both modules belong to the GPU side.
    from collbench.runtime.cuda import kernels as cuda_kernels
    from collbench.runtime.cuda.nccl import applied_env, tuning_log_env

    names = {name for _, algos in job.algos for name in algos}
    own = any(not is_native(name) for name in names)
    # A first build takes minutes: here it cannot run into the ranks' timeout. Torch caches it and
    # the ranks load it from there. If it fails (said once, here), the ranks do not try again.
    if own and not cuda_kernels.kernels_disabled() and cuda_kernels.build_extension(note).module is None:
        stack.enter_context(applied_env({NO_CUDA_KERNELS_ENV: "1"}))
    if not any(is_native(name) for name in names):
        return job
    level = os.environ.get("NCCL_DEBUG", "").strip().upper()
    if os.environ.get("NCCL_DEBUG_FILE") or level in ("INFO", "TRACE"):
        note("NCCL_DEBUG is set: NCCL's log is left as it is, so native rows do not record NCCL's algorithm choice")
        return job
    log_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="collbench-nccl-")))
    # NCCL reads these once per process, at its first call: the ranks inherit them when they start.
    stack.enter_context(applied_env(tuning_log_env(log_dir)))
    return dataclasses.replace(job, nccl_log_dir=log_dir)


def _nccl_warnings(log_dir: Path | None) -> str:
    """The last few ``NCCL WARN`` lines logged into ``log_dir`` (empty when none)."""
    if log_dir is None or not log_dir.is_dir():
        return ""
    found: list[str] = []
    for path in sorted(log_dir.glob("nccl.*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if "NCCL WARN" in line:
                found.append(line.split("NCCL WARN", 1)[1].strip())
    return " | ".join(found[-NCCL_WARNINGS_SHOWN:])

"""``sweep --backend mpich``: MPICH's collectives, each algorithm forced in turn by its CVAR, as rows.

The same harness as Open MPI's (``csrc/mpi_harness.c``, built with ``mpicc.mpich``) under MPICH's
launcher (``mpiexec.mpich``), measuring and checking every point as ``sweep --backend mpi`` does
(``measure.py``: the same plan, batches, checks and summaries). What differs is how an algorithm is forced:
MPICH reads ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` for every call on every communicator, the harness's
own commands included, so each forced algorithm gets a job of its own with that variable set, and the
``native`` points one job with none set (MPICH's own selection: its built-in CSEL tree; a user's
``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE`` and forced algorithms are removed from every job).
``MPIR_CVAR_COLLECTIVE_FALLBACK=error`` makes MPICH refuse a forced algorithm it cannot run (``smp``
on one node) rather than run its own choice under the forced name; that algorithm's points are then
skipped with MPICH's reason, and the other jobs go on.

Rows stream to the sweep's file as measured, a job at a time; the rows returned are in plan order.
``--interleave`` (tune's) therefore alternates sizes and ops within a job, not algorithms across jobs as
Open MPI's one job does: each forced algorithm's points are measured together. (Forcing through MPI_T
per call would keep one job, but MPICH 4.0 exposes these variables as bare integers whose values are
its internal enumeration, not the names.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import torch

from collbench.backends.mpich import MPICH
from collbench.errors import BackendUnavailableError, RankError
from collbench.mpich.algorithms import (
    FALLBACK_CVAR,
    NATIVE,
    SELECTION_FILE_CVAR,
    find_algorithm,
)
from collbench.results.io import append_jsonl
from collbench.results.row import ResultRow
from collbench.runtime.mpi.harness import HarnessJob, HarnessVariant, build_with, realtime_ranks
from collbench.runtime.mpi.measure import Event, measure_point, start_stream
from collbench.runtime.sweep.plan import SweepJob
from collbench.runtime.sweep.points import SweepPoint, plan_points, point_key, rows_in_plan_order

MPICC = "mpicc.mpich"
MPIEXEC = "mpiexec.mpich"


def mpich_environment(forced: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment for an MPICH job: no CVAR choosing a collective algorithm or a
    selection file (they would change the ``native`` rows), then ``forced`` (CVAR -> value) and the
    refusal of a forced algorithm MPICH cannot run."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("MPIR_CVAR_") and (k.endswith("_ALGORITHM") or k == SELECTION_FILE_CVAR))
    }
    env.update(forced or {})
    env[FALLBACK_CVAR] = "error"
    return env


def mpiexec_command(harness: str, world_size: int, args: list[str]) -> list[str]:
    """The ``mpiexec.mpich`` line (Hydra: standard input goes to rank 0, the environment to every rank)."""
    return [_tool(MPIEXEC), "-n", str(world_size), harness, *args]


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackendUnavailableError(
            f"--backend mpich needs MPICH's {name} on PATH: install MPICH (Debian/Ubuntu: apt-get install mpich "
            "libmpich-dev)"
        )
    return found


def build_mpich_harness(note: Any) -> str:
    """The harness built with ``mpicc.mpich`` (cached by the MPICH it wraps: ``mpicc.mpich -show``)."""
    mpicc = _tool(MPICC)
    try:
        shown = subprocess.run([mpicc, "-show"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendUnavailableError(f"{mpicc} could not run: {exc}") from None
    return str(build_with(mpicc, shown, MPICH.name, MPICH.library, note))


def mpich_reason(stack: str) -> str:
    """MPICH's reason from its error stack: the stack's last frame's text ("...MPIR_Allreduce_impl(4570)...:
    User set collective algorithm is not usable for the provided arguments"); the frames before it name
    MPICH's internals."""
    return stack.rsplit(": ", 1)[-1].strip()


def _job_key(point: SweepPoint) -> tuple[str, str]:
    """(CVAR, value) forcing ``point``'s algorithm; ("", "") for ``native``."""
    if point.algo == NATIVE:
        return ("", "")
    found = find_algorithm(point.op.value, point.algo)
    if found is None:  # the backend's plan names only what MPICH has
        raise BackendUnavailableError(f"{point.algo} is not one of MPICH's {point.op.spec.mpi_name}")
    return (found.cvar, found.name)


def run_mpich_sweep(job: SweepJob, report: Event) -> list[ResultRow]:
    """Measure every point of ``job``, one MPICH job per forced algorithm; every row, resumed ones
    included, in plan order. Raises UserError subclasses for what cannot start, RankError when a
    ``native`` job dies (a forced algorithm's job that MPICH aborts is skipped, said in a note)."""
    cfg = job.config
    assert cfg.world_size is not None  # the backend's check_sweep refuses a sweep without --ranks
    world = cfg.world_size
    points, notes = plan_points(job, world, torch.device("cpu"), "rank-order")
    done, todo, fingerprint = start_stream(job, points, world, notes, report)
    groups: dict[tuple[str, str], list[SweepPoint]] = {}
    for p in todo:
        groups.setdefault(_job_key(p), []).append(p)
    measured: dict[tuple[Any, ...], ResultRow] = {}
    if groups:
        harness = build_mpich_harness(lambda text: report({"kind": "note", "text": text}))
        realtime = realtime_ranks(world)
        finished = len(points) - len(todo)
        for (cvar, value), group in groups.items():
            forced = {cvar: value} if cvar else {}
            progress = (finished, len(points))
            _run_group(job, group, forced, harness, (world, realtime), fingerprint, progress, report, measured)
            finished += len(group)
    return rows_in_plan_order(job, points, world, measured, done)


def _run_group(
    job: SweepJob,
    group: list[SweepPoint],
    forced: dict[str, str],
    harness: str,
    ranks: tuple[int, bool],
    fingerprint: str,
    progress: tuple[int, int],
    report: Event,
    measured: dict[tuple[Any, ...], ResultRow],
) -> None:
    """One MPICH job measuring ``group`` (points of one forced algorithm, or the ``native`` ones) on
    ``ranks`` (world size, real-time priority), ``progress`` (points done before it, all points)."""
    cfg = job.config
    world, realtime = ranks
    finished, total = progress
    variants: list[HarnessVariant] = []
    for p in group:
        variant = HarnessVariant(p.op.spec.mpi_name, 0, 0)
        if variant not in variants:
            variants.append(variant)
    args = [job.dtype, job.redop, str(cfg.root), str(cfg.seed), str(int(realtime))]
    args += [v.argument() for v in variants]
    refused: set[tuple[int, bool]] = set()
    try:
        with HarnessJob(mpiexec_command(harness, world, args), cfg.timeout_s, mpich_environment(forced)) as running:
            facts = running.start()
            for point in group:
                index = variants.index(HarnessVariant(point.op.spec.mpi_name, 0, 0))
                report({"kind": "start", "done": finished, "total": total, "text": point.describe()})
                finished += 1
                mode = (index, point.in_place)
                if mode in refused:
                    continue
                # MPICH refuses some forced algorithms in place only (alltoall's brucks, pairwise and
                # scattered take no MPI_IN_PLACE): the other mode is still measured.
                scope = f"its points {'in place' if point.in_place else 'out of place'}"
                outcome = measure_point(
                    job, point, index, world, running, facts, fingerprint, report, MPICH.library, scope, mpich_reason
                )
                if outcome is None:
                    refused.add(mode)
                    continue
                row, ran = outcome
                append_jsonl(job.stream_path, row)
                measured[point_key(job, point, world)] = row
                report({"kind": "row", "done": finished, "total": total, "row": row.to_dict(), "ran": ran})
    except RankError as exc:
        if not forced:
            raise
        # MPICH aborts the job where the forced algorithm cannot run a call on MPI_COMM_WORLD too (the
        # harness's own commands use it): its points are skipped, saying what MPICH said.
        algo = group[0].algo
        ops = ", ".join(dict.fromkeys(p.op.value for p in group))
        said = exc.problem.partition(" said: ")[2]
        why = mpich_reason(said) if said else exc.problem
        report({"kind": "note", "text": f"{algo} {ops}: MPICH cannot run it on {world} ranks ({why}); skipped"})

"""One point measured on a running MPI harness, and its row: what Open MPI's sweep (``ompi_sweep.py``) and
MPICH's (``mpich_sweep.py``) share, from the stream they start to the rows in plan order.

Every point is filled, run once and checked, warmed up and timed by the C harness (``harness.py``), in
batches chosen by the same ``-n auto`` policy as collbench's ranks (``timing.AutoIters``), summarised by
the same functions (``timing.summarize``) and built into a row by the one builder
(``results/measured.py``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from collbench.results.journal import empty_file
from collbench.results.row import ResultRow
from collbench.runtime.executor.timing import AutoIters, summarize
from collbench.runtime.mpi.harness import HarnessJob, JobFacts
from collbench.runtime.sweep.files import resumed_rows
from collbench.runtime.sweep.plan import SweepJob
from collbench.runtime.sweep.points import SweepPoint, point_key, point_row, row_fingerprint

Event = Callable[[dict[str, Any]], None]
"""What a sweep reports as it goes (``{"kind": "note" | "plan" | "start" | "row", ...}``)."""


def measure_point(
    job: SweepJob,
    point: SweepPoint,
    variant: int,
    world: int,
    running: HarnessJob,
    facts: JobFacts,
    fingerprint: str,
    report: Event,
    library: str,
    scope: str = "all its points",
    reason: Callable[[str], str] = str,
) -> tuple[ResultRow, str] | None:
    """One point's row and what ran (``Prepared.ran``); None when ``library`` refused the forced algorithm
    (said once, in a note naming the points it stands for, ``scope``, and the library's error as ``reason``
    words it)."""
    cfg = job.config
    prepared = running.prepare(
        variant, point.count, point.in_place, cfg.warmup, cfg.check, f"measuring {point.describe()}"
    )
    if prepared.error_code != 0:
        report(
            {
                "kind": "note",
                "text": f"{point.algo} {point.op.value} ({scope}): {library} cannot run it on {world} ranks "
                f"({reason(prepared.error_text) or f'MPI error {prepared.error_code}'}); skipped",
            }
        )
        return None
    samples = time_point(running, cfg.iters, cfg.point_budget_s)
    row = point_row(
        job,
        point,
        world,
        samples,
        summarize(samples),
        iters=len(samples),
        wrong=prepared.wrong,
        nodes=facts.nodes,
        host=socket.gethostname(),
        topology_fingerprint=fingerprint,
        backend_version=facts.version,
    )
    return row, prepared.ran


def time_point(running: HarnessJob, iters: int | None, budget_s: float) -> list[float]:
    """Slowest-rank microseconds per call, in batches as ``worker._time_point`` takes them."""
    policy = AutoIters(budget_s=budget_s)
    samples: list[float] = []
    batch = iters if iters is not None else policy.next_batch(samples, 0.0)
    while batch > 0:
        samples.extend(running.time(batch))
        if iters is not None:
            break
        batch = policy.next_batch(samples, sum(samples) * 1e-6, iters_done=len(samples))
    return samples


def start_stream(
    job: SweepJob, points: list[SweepPoint], world: int, notes: list[str], report: Event
) -> tuple[dict[tuple[Any, ...], ResultRow], list[SweepPoint], str]:
    """The stream resumed (its rows by key) or emptied, the plan's notes and the rows' fingerprint
    said, and the plan reported: the rows already done, the points left to measure, the fingerprint
    the new rows carry."""
    done: dict[tuple[Any, ...], ResultRow] = {}
    if job.config.resume:
        done = {row.key: row for row in resumed_rows(job.stream_path)}
    else:
        job.stream_path.parent.mkdir(parents=True, exist_ok=True)
        empty_file(job.stream_path)
    fingerprint, fp_note = row_fingerprint(job, world)
    for text in [*notes, *([fp_note] if fp_note else [])]:
        report({"kind": "note", "text": text})
    todo = [p for p in points if point_key(job, p, world) not in done]
    report({"kind": "plan", "total": len(points), "done": len(points) - len(todo)})
    return done, todo, fingerprint

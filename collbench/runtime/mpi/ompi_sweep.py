"""``sweep --backend mpi``: Open MPI's collectives, each coll/tuned algorithm forced in turn, as rows.

The points are planned as for every backend (``points.plan_points``: the same order, ``--interleave``
included, and the same rounding of all-gather and reduce-scatter to whole chunks); every point is
filled, run once and checked, warmed up and timed by the C harness (harness.py, measure.py: shared with
MPICH's sweep), in batches chosen by
the same ``-n auto`` policy (``timing.AutoIters``), and summarised by the same functions
(``timing.summarize``, ``noise.detect_stalls``). Rows stream to the sweep's file as they are measured.

Each row's ``algo`` is ``native`` (Open MPI's fixed decision) or ``native:<name>``, the algorithm
forced (``collbench.ompi.algorithms``); ``segment_bytes`` is the forced segment size where that
algorithm takes one and ``--segment-bytes`` gave it (without it Open MPI's forced default, 0: one
segment); ``backend_version`` is Open MPI's version.

All-to-all, gather and scatter points are whole blocks and barrier's one point per algorithm and mode
at 0 bytes, as ``plan_points`` makes them for every backend; barrier rows have no bandwidth (Open
MPI's barrier rules are looked up at message size 0 too); sendrecv is the ring shift, ``MPI_Sendrecv``,
measured as ``native`` only (nothing of coll/tuned applies to it).
"""

from __future__ import annotations

from typing import Any

import torch

from collbench.backends.mpi import MPI
from collbench.ompi.algorithms import NATIVE, NATIVE_PREFIX, fanout_notes, takes_segment
from collbench.results.io import append_jsonl
from collbench.results.row import ResultRow
from collbench.runtime.mpi.harness import HarnessJob, HarnessVariant, realtime_ranks
from collbench.runtime.mpi.measure import Event, measure_point, start_stream
from collbench.runtime.mpi.ompi_tools import (
    build_harness,
    check_world_size,
    find_tools,
    mpirun_command,
    ompi_environment,
    ompi_info_text,
)
from collbench.runtime.sweep.plan import SweepJob
from collbench.runtime.sweep.points import SweepPoint, plan_points, point_key, rows_in_plan_order
from collbench.schedules.ops import OP_SPECS


def _algorithm_ids() -> dict[tuple[str, str], int]:
    from collbench.ompi.algorithms import parse_ompi_info

    ids = {(spec.mpi_name, NATIVE): 0 for spec in OP_SPECS.values()}
    for coll, algos in parse_ompi_info(ompi_info_text(find_tools())).items():
        for algo in algos:
            ids[(coll, algo.algo)] = algo.algorithm_id
    return ids


def _segment(job: SweepJob, collective: str, algo: str) -> int | None:
    """The segment size forced for a point: ``--segment-bytes`` where the algorithm reads one, else None."""
    name = algo.removeprefix(NATIVE_PREFIX)
    if algo == NATIVE or not takes_segment(collective, name):
        return None
    return job.config.segment_bytes


def run_mpi_sweep(job: SweepJob, report: Event) -> list[ResultRow]:
    """Measure every point of ``job`` under one mpirun; every row, resumed ones included, in plan order.

    Raises UserError subclasses for what cannot start (no Open MPI, a failed build) and RankError when
    the job dies or stops answering (what was measured before is in the stream file).
    """
    cfg = job.config
    world = check_world_size(cfg.world_size)
    tools = find_tools()
    ids = _algorithm_ids()
    points, notes = plan_points(job, world, torch.device("cpu"), "rank-order")
    points = [_with_segment(job, p) for p in points]
    forced = {(p.op.spec.mpi_name, p.algo.removeprefix(NATIVE_PREFIX)) for p in points if p.algo != NATIVE}
    notes += fanout_notes(ompi_info_text(tools), forced)
    done, todo, fingerprint = start_stream(job, points, world, notes, report)
    measured: dict[tuple[Any, ...], ResultRow] = {}
    if todo:
        variants: list[HarnessVariant] = []
        for p in todo:
            coll = p.op.spec.mpi_name
            variant = HarnessVariant(coll, ids[(coll, p.algo)], p.segment_bytes or 0)
            if variant not in variants:
                variants.append(variant)
        harness = build_harness(tools, lambda text: report({"kind": "note", "text": text}))
        realtime = realtime_ranks(world)
        args = [job.dtype, job.redop, str(cfg.root), str(cfg.seed), str(int(realtime))]
        args += [v.argument() for v in variants]
        with HarnessJob(mpirun_command(tools, harness, world, args), cfg.timeout_s, ompi_environment()) as running:
            facts = running.start()
            if realtime and not facts.realtime:
                report(
                    {
                        "kind": "note",
                        "text": "Open MPI's ranks could not run at real-time priority: on a busy "
                        "host their times include waits for a core",
                    }
                )
            refused: set[int] = set()
            finished = len(points) - len(todo)
            for point in todo:
                coll = point.op.spec.mpi_name
                index = variants.index(HarnessVariant(coll, ids[(coll, point.algo)], point.segment_bytes or 0))
                report({"kind": "start", "done": finished, "total": len(points), "text": point.describe()})
                finished += 1
                if index in refused:
                    continue
                outcome = measure_point(job, point, index, world, running, facts, fingerprint, report, MPI.library)
                if outcome is None:
                    refused.add(index)
                    continue
                row, ran = outcome
                append_jsonl(job.stream_path, row)
                measured[point_key(job, point, world)] = row
                # ``ran``: the function coll/tuned called, where the observing shim is preloaded (tests).
                report({"kind": "row", "done": finished, "total": len(points), "row": row.to_dict(), "ran": ran})
    return rows_in_plan_order(job, points, world, measured, done)


def _with_segment(job: SweepJob, point: SweepPoint) -> SweepPoint:
    from dataclasses import replace

    return replace(point, segment_bytes=_segment(job, point.op.spec.mpi_name, point.algo))

"""Rank 0 hands each rank of a launcher's job its own part of a table: one scatter, O(its part) a rank.

``session.agree`` hands every rank the same value, which suits a decision; a table with a row per rank
(a layout's all-to-all partners: row r is rank r's partner in every round) broadcast so would put the
whole O(ranks^2) table on every rank. Here rank 0 makes the table and each rank receives its row alone.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

from collbench.errors import RankError
from collbench.runtime.launch.launchers import detect_job
from collbench.runtime.launch.session import job_session


def hand_out(name: str, table: Callable[[], torch.Tensor], width: int, *, timeout_s: float) -> list[int]:
    """This rank's row of ``table()``, a (world size x ``width``) integer tensor made on rank 0 alone.

    Run on its own (no launcher), row 0. Every rank of the job must call it at the same point with the
    same ``width`` (agree on it first), as for any decision; it travels on the job's process group
    (the kept one, else a small gloo group of its own). Raises RankError when rank 0's table does not
    come within ``timeout_s``.
    """
    job = detect_job()
    if job is None or job.world_size == 1:
        return [int(v) for v in table()[0].tolist()]
    session = job_session(job, timeout_s)
    mine = torch.zeros(width, dtype=torch.int32)
    # The session's own group for decisions: the kept group of the command's steps where there is one.
    with session._decision_group(timeout_s) as control:
        rows = None
        if job.rank == 0:
            made = table().to(torch.int32)
            if tuple(made.shape) != (job.world_size, width):
                raise ValueError(f"{name}: a table of {tuple(made.shape)}, not ({job.world_size}, {width})")
            rows = list(made.unbind(0))
        try:
            dist.scatter(mine, rows, src=0, group=control)
        except RuntimeError as exc:  # gloo's timeouts and closed connections
            raise RankError(
                job.rank,
                session.host,
                f"waiting for {name}",
                f"rank 0 sent no {name} within {timeout_s:.0f} s: it took another step, or stopped ({exc})",
            ) from None
    return [int(v) for v in mine.tolist()]

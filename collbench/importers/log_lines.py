"""Lines of a captured log as launchers and libraries leave them, made plain again.

A log a user pastes has been through a launcher and often a terminal: ``mpirun --tag-output`` puts
``[1,0]<stdout>:`` before every piece a process wrote (nccl-tests writes a result line in three
``printf`` calls, so the tag also lands in the middle of the line), ``srun --label`` puts ``0: ``,
``kubectl logs --timestamps`` and many job wrappers put a timestamp, and NCCL interleaves its own
``host:pid:tid [dev] NCCL INFO ...`` lines (with ``NCCL_DEBUG=INFO``). :func:`plain_line` takes the
launcher's part off; :func:`nccl_line` reads the facts an NCCL line gives about the run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collbench.pasted import clean_pasted_text

# mpirun --tag-output (Open MPI): [jobid,rank]<stream>: before each write.
_TAG_OUTPUT = re.compile(r"\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:")
# srun --label: the task number and a colon, padded to the widest number.
_SLURM_LABEL = re.compile(r"^\s*\d+:\s")
# ISO-like stamps, bracketed or not: 2024-07-19T05:01:02.123Z, [2024-07-19 05:01:02,123].
_TIMESTAMP = re.compile(r"^\s*\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?\s")
# NCCL's debug lines (src/include/debug.h, ncclDebugLog): "%s:%d:%d [%d] NCCL INFO ..." with the host
# name, pid, tid and CUDA device.
_NCCL_LINE = re.compile(r"^(?P<host>[^\s:\[\]]+):\d+:\d+ \[\d+\] NCCL (?P<level>INFO|WARN|TRACE|ABORT)\b(?P<msg>.*)$")
# "comm 0x.. rank 3 nranks 16 cudaDev 3 ..." (init.cc, before 2.19) and "rank 0 nRanks 16 nNodes 2 ..."
_RANK_OF = re.compile(r"\brank (\d+) n[Rr]anks (\d+)\b")
_NNODES = re.compile(r"\bnNodes (\d+)\b")
_NCCL_VERSION = re.compile(r"\bNCCL version (\d+\.\d+\.\d+)")


def plain_line(line: str) -> str:
    """``line`` without launcher prefixes (timestamps, Slurm labels, Open MPI tags), stripped."""
    previous = None
    while previous != line:
        previous = line
        line = _TIMESTAMP.sub("", line, count=1)
        line = _SLURM_LABEL.sub("", line, count=1)
        if line.lstrip().startswith("["):
            line = _TAG_OUTPUT.sub("", line.lstrip(), count=1)
    return _TAG_OUTPUT.sub("", line).strip()


@dataclass(frozen=True, slots=True)
class NcclLine:
    """What one NCCL debug line says about the run."""

    host: str
    rank: int | None = None
    nranks: int | None = None
    nnodes: int | None = None
    version: str | None = None


def nccl_line(line: str) -> NcclLine | None:
    """The facts of an NCCL ``INFO``/``WARN`` line (already plain), or None for any other line."""
    m = _NCCL_LINE.match(line)
    if m is None:
        return None
    msg = m.group("msg")
    rank = nranks = nnodes = None
    if r := _RANK_OF.search(msg):
        rank, nranks = int(r.group(1)), int(r.group(2))
    if n := _NNODES.search(msg):
        nnodes = int(n.group(1))
    v = _NCCL_VERSION.search(msg)
    return NcclLine(m.group("host"), rank, nranks, nnodes, v.group(1) if v else None)


def plain_lines(text: str) -> list[str]:
    """Every line of ``text`` made plain, one per input line (so line numbers stay the file's)."""
    return [plain_line(line) for line in clean_pasted_text(text).splitlines()]


__all__ = ["NcclLine", "nccl_line", "plain_line", "plain_lines"]

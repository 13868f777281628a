"""NCCL's per-call TUNING log lines: what NCCL chose for each collective, read from the text.

With ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING`` rank 0 of a communicator writes one line per
collective call. The formats (``src/enqueue.cc`` unless said; NVIDIA/nccl v2.20.3-1 to v2.30.7-1)
are listed under :func:`parse_tuning_line`; the numbered lines of 2.20-2.23 use ``NCCL_ALGO_*`` and
``NCCL_PROTO_*`` (:data:`collbench.nccl.algorithms.ALGORITHMS_BY_NUMBER`). Reading the files while
ranks run is the runtime's (``collbench.runtime.cuda.nccl``); this module only reads text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from collbench.nccl.algorithms import ALGORITHMS_BY_NUMBER, PROTOCOLS, canonical_algo, canonical_proto

_ALGO_BY_NUMBER: tuple[str, ...] = tuple(a.env for a in ALGORITHMS_BY_NUMBER)

# NCCL INFO lines: "[timestamp ]host:pid:tid [dev] NCCL INFO <message>" (src/debug.cc).
_INFO_RE = re.compile(r"(?:(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) )?\[(?P<dev>\d+)\] NCCL INFO (?P<msg>.*)$")
_NUM = r"(?P<bytes>\d+) Bytes -> "
_MESSAGE_RES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "named",
        re.compile(
            r"^(?P<func>\w+): " + _NUM + r"Algo (?P<algo>[A-Za-z]\w*) proto (?P<proto>\w+) "
            r"channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\}"
        ),
    ),
    (
        "numbered",
        re.compile(
            r"^(?:(?P<func>\w+): )?" + _NUM + r"Algo (?P<algo>\d+) proto (?P<proto>\d+) "
            r"time (?P<time>[-+0-9.eE]+|nan|inf)"
        ),
    ),
    (
        "symmetric",
        re.compile(
            r"^(?P<func>\w+) \[Symmetric\]: " + _NUM + r"Kernel (?P<kernel>\S+) "
            r"nchannels (?P<nch>\d+) nthreads \d+"
        ),
    ),
    ("ce", re.compile(r"^(?P<func>\w+) \[Copy Engine\]: " + _NUM + r"cudaMemcpy")),
    ("hce", re.compile(r"^(?P<func>\w+) \[Hierarchical CE\]: " + _NUM + r"RMA proxy")),
)


@dataclass(frozen=True, slots=True)
class TuningChoice:
    """What NCCL chose for one collective call, from one TUNING line of its rank 0."""

    func: str
    """NCCL's name of the collective (``AllReduce``); empty where the line does not say (2.20-2.22)."""
    size_bytes: int
    """NCCL's byte count for the call: count x element size of the call's count argument."""
    algo: str
    """``Ring``, ``Tree``, ...; ``Symmetric``, ``CopyEngine``, ``HierarchicalCE`` for NCCL's other paths."""
    proto: str
    """``LL``, ``LL128``, ``Simple``; empty where the path has no protocol."""
    channel_lo: int | None = None
    channel_hi: int | None = None
    predicted_time_us: float | None = None
    """NCCL's own cost-model time (2.20-2.23 lines)."""
    kernel: str = ""
    """The symmetric kernel's name (``[Symmetric]`` lines)."""
    device: int | None = None
    pid: int | None = None

    @property
    def channels(self) -> int | None:
        """Channels used (``Hi - Lo + 1``) where the line says, or ``nchannels`` of symmetric kernels."""
        if self.channel_lo is None or self.channel_hi is None:
            return None
        return self.channel_hi - self.channel_lo + 1


def _number_name(table: tuple[str, ...], text: str) -> str:
    index = int(text)
    return table[index] if 0 <= index < len(table) else f"#{index}"


def parse_tuning_line(line: str) -> TuningChoice | None:
    """One NCCL log line -> its TuningChoice, or None when it is not a per-call TUNING line.

    Supported message formats (the part after ``NCCL INFO``; a line without the NCCL prefix is also read):

    * 2.24 and later, ``src/enqueue.cc``:
      ``%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}``
      e.g. ``AllReduce: 1048576 Bytes -> Algo Ring proto Simple channel{Lo..Hi}={0..15}``
    * 2.23: ``%s: %ld Bytes -> Algo %d proto %d time %f`` (numbers in NCCL's enum order)
    * 2.20 to 2.22: ``%ld Bytes -> Algo %d proto %d time %f`` (no collective name)
    * 2.27 and later, symmetric kernels:
      ``%s [Symmetric]: %ld Bytes -> Kernel %s nchannels %d nthreads %d[ nWorks %d]``
    * 2.29 and later, copy engine: ``%s [Copy Engine]: %ld Bytes -> cudaMemcpy...`` and
      ``%s [Hierarchical CE]: %ld Bytes -> RMA proxy + CE``

    NCCL 2.19 and earlier write no per-call line (theirs is commented out in the source).
    """
    text = line.rstrip("\r\n")
    device: int | None = None
    pid: int | None = None
    m = _INFO_RE.search(text)
    if m is not None:
        msg = m.group("msg")
        device = int(m.group("dev"))
        pid = int(m.group("pid")) if m.group("pid") else None
    else:
        msg = text.strip()
    for kind, pattern in _MESSAGE_RES:
        mm = pattern.match(msg)
        if mm is None:
            continue
        func = mm.group("func") or ""
        size = int(mm.group("bytes"))
        if kind == "named":
            # 2.24+ print ncclAlgoToString's RING, NVLS_TREE, SIMPLE: keep ncclAlgoStr's spelling.
            algo_text, proto_text = mm.group("algo"), mm.group("proto")
            return TuningChoice(
                func,
                size,
                canonical_algo(algo_text) or algo_text,
                canonical_proto(proto_text) or proto_text,
                int(mm.group("lo")),
                int(mm.group("hi")),
                device=device,
                pid=pid,
            )
        if kind == "numbered":
            return TuningChoice(
                func,
                size,
                _number_name(_ALGO_BY_NUMBER, mm.group("algo")),
                _number_name(PROTOCOLS, mm.group("proto")),
                predicted_time_us=float(mm.group("time")),
                device=device,
                pid=pid,
            )
        if kind == "symmetric":
            nch = int(mm.group("nch"))
            return TuningChoice(
                func, size, "Symmetric", "", 0, nch - 1, kernel=mm.group("kernel"), device=device, pid=pid
            )
        algo = "CopyEngine" if kind == "ce" else "HierarchicalCE"
        return TuningChoice(func, size, algo, "", device=device, pid=pid)
    return None


def parse_tuning_log(text: str) -> list[TuningChoice]:
    """Every per-call TUNING line of an NCCL log (``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING``), in order.

    Other lines (NCCL's tuning tables, INIT lines, program output) are skipped; see
    :func:`parse_tuning_line` for the formats read.
    """
    choices: list[TuningChoice] = []
    for line in text.splitlines():
        if "Bytes ->" not in line:
            continue
        choice = parse_tuning_line(line)
        if choice is not None:
            choices.append(choice)
    return choices


def choice_for(
    choices: Iterable[TuningChoice], nccl_name: str, size_bytes: int, world_size: int
) -> tuple[str, str] | None:
    """The (algo, proto) NCCL chose most often for collective ``nccl_name`` (``allreduce``) at ``size_bytes``.

    ``size_bytes`` counts as nccl-tests does; NCCL's line counts the call's count argument, which for
    all-gather and reduce-scatter is one rank's share, so both sizes match. Lines without a collective
    name (2.20-2.22) match any. None when no line matches.
    """
    wanted = nccl_name.lower()
    # ncclAllGather/ncclReduceScatter log their per-rank count (sendcount, recvcount); the others
    # the whole buffer. Matching only the op's own size keeps a 32 MiB all-reduce from taking the
    # line of a 256 MiB one on 8 ranks.
    sizes = {size_bytes}
    if wanted in ("allgather", "reducescatter") and world_size > 0 and size_bytes % world_size == 0:
        sizes = {size_bytes // world_size}
    votes: Counter[tuple[str, str]] = Counter()
    for c in choices:
        if c.size_bytes in sizes and (not c.func or c.func.lower() == wanted):
            votes[(c.algo, c.proto)] += 1
    if not votes:
        return None
    return votes.most_common(1)[0][0]

"""One measured point, as every later stage (fit, tune, plot, import) reads it.

Columns follow nccl-tests' conventions (NVIDIA/nccl-tests doc/PERFORMANCE.md): times in microseconds, bandwidths in GB/s
(10^9 bytes/s), ``size_bytes`` as nccl-tests counts it. Reading and writing files is
``results/io.py``; checking each field as read, ``results/fields.py``.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from typing import Any

from collbench.results.fields import FieldError, check_times, checked_fields

CPU_DEVICE_NAME = "cpu"
"""``ResultRow.device_name`` of a row measured on CPU ranks (``runtime/host/environment.py`` writes it;
the report tells such rows from a topology's GPUs by it)."""
NODES_UNKNOWN = 0
"""``ResultRow.nodes`` of a row whose source did not say how many nodes ran it (a pasted log with no
host names). Guessing 1 would file a 1440-rank run as one machine; fit and predict do not read nodes.
Row checking accepts it (row_fields.FIELD_RANGES)."""

DEFAULT_SOURCE = "collbench"
"""``ResultRow.source`` of a row collbench measured."""
NCCL_TESTS_SOURCE = "nccl-tests"
"""``ResultRow.source`` of a row imported from nccl-tests output: one time, the mean over its iterations,
stands in every time field (no p25, fastest, slowest or stall fraction of its own)."""


KEY_FIELDS = (
    "op",
    "algo",
    "backend",
    "world_size",
    "dtype",
    "redop",
    "in_place",
    "size_bytes",
    "root",
    "layout",
    "segment_bytes",
)
"""The fields that identify a point: a row's key (``ResultRow.key``) and the key of a point still to
measure (``results.measured.point_key``) are these, in this order, so that ``--resume`` finds a point's
row by the key its point makes."""
_key_of = operator.attrgetter(*KEY_FIELDS)


@dataclass(frozen=True, slots=True)
class ResultRow:
    op: str
    algo: str
    backend: str
    world_size: int
    dtype: str
    redop: str
    in_place: bool
    size_bytes: int
    count: int
    iters: int
    time_us: float
    """The point's time: median over iterations of the slowest rank's time per iteration."""
    time_us_mean: float
    time_us_min: float
    time_us_max: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int
    """Wrong elements found by the data check; -1 when the check was off."""
    nodes: int = 1
    """Nodes the ranks ran on; NODES_UNKNOWN (0) when the source did not say (an imported log)."""
    root: int = 0
    layout: str = "rank-order"
    segment_bytes: int | None = None
    host: str = ""
    topology_fingerprint: str = ""
    torch_version: str = ""
    backend_version: str = ""
    cuda_version: str = ""
    driver_version: str = ""
    device_name: str = ""
    nccl_algo: str = ""
    """What NCCL reported choosing (native runs with TUNING logs), or the forced variant."""
    nccl_proto: str = ""
    source: str = DEFAULT_SOURCE
    """Who measured it: DEFAULT_SOURCE (``collbench``) or NCCL_TESTS_SOURCE (imported logs)."""
    timestamp: float = 0.0
    stall_fraction: float | None = None
    """Fraction of the timed iterations slower than 3x the fastest (results/noise.py); None: not known."""
    bimodal: bool | None = None
    """Whether the iterations' times fell into two modes more than 2x apart (results/noise.py)."""
    time_us_p25: float | None = None
    """First quartile of the iterations' times (slowest rank per iteration)."""
    reduce_path: str | None = None
    """Which reduction path collbench's own algorithm ran: ``cuda-kernel`` or ``torch-ops``; None for
    native rows and ops that do not reduce (runtime/cuda/kernel_build.py)."""
    tune_round: int | None = None
    """Which of ``collbench tune``'s rounds measured the row (0, 1, ...); None outside a tune. Rows of
    one round were measured minutes apart from another round's, at whatever speed the machine had then
    (tuning/selection/ compares algorithms within a round)."""
    timed_samples: int | None = None
    """How many timed samples the statistics (time_us, min, max, p25, stalls) are over, where that is
    fewer than ``iters``: GPU rows without graphs are timed in rounds of iterations, one pair of CUDA
    events around each (runtime/cuda/timing.py). None: one sample per iteration."""

    cut_short: str | None = None
    """Why the row has fewer timed iterations than its sweep asked, where it has (``iters`` is the true
    count): a tune stopped timing a point whose first timed iteration was clearly behind a point
    measured in full at its size (runtime/sweep/timed.py). Selection never chooses such a point.
    None: it has them all."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def samples(self) -> int:
        """The timed samples behind the row's statistics: what a standard error divides by."""
        return self.timed_samples if self.timed_samples is not None else self.iters

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResultRow:
        """A row from what a file gave; FieldError (a ValueError) naming the first bad field.

        Every field is checked by its annotation (type, finite, range, known name): see row_fields.
        """
        fields = checked_fields(cls, data)
        check_times(fields)
        root, world = fields.get("root", 0), fields["world_size"]
        if root >= world:
            # Each field is in range alone; together a root of 99 on 8 ranks is no measurement.
            raise FieldError("root", f"{root} is not a rank of the row's {world} ranks")
        nodes = fields.get("nodes", 0)
        if nodes > world:
            # As the root: 5 nodes of 2 ranks was fitted and predicted as 'its measurement on 5 nodes'.
            raise FieldError("nodes", f"{nodes} nodes for the row's {world} ranks (a node holds one rank or more)")
        return cls(**fields)

    @property
    def key(self) -> tuple[Any, ...]:
        """What identifies a point, for ``--resume``: the row's :data:`KEY_FIELDS`."""
        return _key_of(self)

"""CoreWeave's published GB200 NVL72 all-reduce runs (tests/fixtures/real/SOURCES.md), fitted as `collbench
fit` fits them: the shared inputs of the tests of NCCL's NVLS calibration and of the choice of fit."""

from __future__ import annotations

from pathlib import Path

from collbench.importers.nccl_tests import read_nccl_tests
from collbench.models.fit import fit_results
from collbench.models.fitted import Fit
from collbench.models.link_floor import with_gpu
from collbench.results.noise import decision_time_us

REAL = Path(__file__).parent / "fixtures" / "real"
RACKS = {72: 1, 144: 2, 1440: 20}
"""The GB200 logs' NVLink domains (72 GPUs a rack), as their source says; the logs name one host."""


def gb200(ranks: int) -> tuple[Fit, dict[int, float]]:
    """The fit of the ``ranks``-rank log, and its published time at each size (the fastest of its rows)."""
    rows = [r for r in read_nccl_tests(REAL / f"all_reduce_perf-gb200-{ranks}rank-one-rank-line.log") if r.size_bytes]
    (fit,) = with_gpu(fit_results(rows).fits, "GB200")
    published: dict[int, float] = {}
    for r in rows:
        published[r.size_bytes] = min(published.get(r.size_bytes, float("inf")), decision_time_us(r))
    return fit, published

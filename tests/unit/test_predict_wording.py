"""Predict says what it assumed and how far it scales, in words a reader takes as written.

Fits of the published logs in tests/fixtures/real (SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

from collbench.importers.nccl_tests import read_nccl_tests
from collbench.models.fit import fit_results
from collbench.models.fitted import Fit
from collbench.models.predict import predict
from collbench.models.stored import GroupsSeen, noting_groups, with_group

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def _fit(name: str) -> Fit:
    """The log's fit with its rows' device, as `collbench fit` makes it (models/stored.py)."""
    seen: GroupsSeen = {}
    rows = list(noting_groups((r for r in read_nccl_tests(REAL / name) if r.wrong == 0), seen))
    (fit,) = fit_results(rows).fits
    return with_group(fit, seen)


def _arch_notes(notes: list[str]) -> list[str]:
    return [n for n in notes if "does not name its GPU" in n]


def test_an_unnamed_gpu_is_said_and_named_ones_are_not() -> None:
    """The DGX A100 log prints no device names: its native fit was priced with Hopper's tables
    (``nccl_machine.DEFAULT_ARCH``), and only the basis's '(..., hopper)' said so, as if read from the log."""
    a100 = _fit("all_reduce_perf-dgx-a100-4node-slurm-legacy.log")
    assert a100.device == ""
    unnamed = predict([a100], 1024, [1 << 20], nodes=128, measured_nodes={32: 4})
    assert _arch_notes(unnamed.notes) == [
        "all-reduce native nccl x32 on 4 nodes: the fit does not name its GPU; NCCL's model taken for "
        "hopper (--gpu names the GPU, its links and generation; --nccl-arch the generation alone)"
    ]
    assert "hopper" in unnamed.predictions[0].basis
    told = predict([a100], 1024, [1 << 20], nodes=128, measured_nodes={32: 4}, nccl_arch="ampere")
    assert _arch_notes(told.notes) == []
    assert "ampere" in told.predictions[0].basis
    h100 = _fit("all_reduce_perf-h100-2node-mpirun-gcp.log")
    assert "H100" in h100.device
    named = predict([h100], 1024, [1 << 20], nodes=128, measured_nodes={16: 2})
    assert _arch_notes(named.notes) == []


def test_the_scale_to_16384_ranks_is_a_plain_number() -> None:
    """From the H100 log's 16 ranks to 16,384 the certainty said 'x1.02e+03 the measured world size'."""
    h100 = _fit("all_reduce_perf-h100-2node-mpirun-gcp.log")
    report = predict([h100], 16384, [1 << 20], nodes=2048, measured_nodes={16: 2})
    assert report.predictions[0].certainty.startswith("x1024 the measured world size"), report.predictions[0].certainty

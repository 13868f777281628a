"""NCCL turns LL128 off below compute capability 7.0, whatever the links (NVIDIA/nccl v2.30.7
src/graph/tuning.cc line 534, in LL128's enable rule: ``pEnable &= !(minCompCap < 70 || ...)``): a
DGX-1 of P100s (sm 6.0, NVLink 1) runs LL and Simple only, where V100s on the same links run LL128."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from collbench.importers.nccl_tests import read_nccl_tests
from collbench.models.fit import fit_results
from collbench.models.fitted import Fit
from collbench.models.nccl_cost import nccl_choice
from collbench.models.nccl_machine import NcclMachine, arch_of, ll128_sm
from collbench.models.predict import price_fits
from collbench.models.priced import Shapes
from collbench.topology.bandwidth import compute_capability, gpu_links

REAL = Path(__file__).parents[1] / "fixtures" / "real"
P100 = "Tesla P100-SXM2-16GB"
V100 = "Tesla V100-SXM2-16GB"
SIZES = [float(1 << k) for k in range(3, 31)]


def _fit_on(device: str) -> Fit:
    rows = [r for r in read_nccl_tests(REAL / "all_reduce_perf-2080ti-x2-autodl.log") if r.size_bytes > 0]
    (fit,) = fit_results(rows).fits
    return dataclasses.replace(fit, device=device)


def test_pascal_is_known_by_name_and_gets_no_ll128() -> None:
    p100 = gpu_links(P100)
    assert p100 is not None and p100.sm == 60 and p100.nvlink_gbps == 80.0  # 4 NVLink 1 of 20 GB/s
    assert compute_capability("Tesla P100-PCIE-16GB") == 60
    assert compute_capability("NVIDIA GeForce GTX 1080 Ti") == 61
    # NCCL's compCapIndex puts everything below sm 8.0 in Volta's class (tuning.cc lines 263-266).
    assert arch_of(p100, P100) == "volta"
    assert not ll128_sm(P100) and not ll128_sm("NVIDIA GeForce GTX 1080 Ti")
    assert ll128_sm(V100) and ll128_sm("NVIDIA H100 80GB HBM3")
    assert ll128_sm("NVIDIA Graphics Device") and ll128_sm("")  # not known: the default generation's


def test_the_cost_model_prices_no_ll128_below_sm_70() -> None:
    pascal = NcclMachine(bus_bw_gbps=40.0, arch="volta", ll128_sm=False)
    volta = dataclasses.replace(pascal, ll128_sm=True)
    assert not any(nccl_choice(pascal, "all-reduce", 8, 1, s).proto == "LL128" for s in SIZES)
    assert any(nccl_choice(volta, "all-reduce", 8, 1, s).proto == "LL128" for s in SIZES)


def test_predict_of_a_p100_fit_runs_no_ll128_and_says_why() -> None:
    (pascal,), _, notes = price_fits([_fit_on(P100)], 8, 1, shapes=Shapes({2: 1}))
    assert all("/LL128" not in pascal.basis(s) for s in SIZES)
    assert any("LL128 off, as NCCL sets it below sm 7.0" in n and "line 534" in n and "is sm 6.0" in n for n in notes)
    (volta,), _, notes = price_fits([_fit_on(V100)], 8, 1, shapes=Shapes({2: 1}))
    assert any("/LL128" in volta.basis(s) for s in SIZES)
    assert not any("LL128 off" in n for n in notes)

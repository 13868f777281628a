"""report.mismatch: a topology or profile of another machine than the rows is named, fact by fact.

The topologies are recorded machines (tests/fixtures/nvml: a DGX H100's and a DGX-1 V100's NVML
answers), the committed example's CPU host (docs/) and a pasted `nvidia-smi topo -m` (no host, no GPU
model); the profile is the committed example's (gloo, 2 ranks on host 'vm')."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from synthetic_rows import point_row

from collbench.profile.document import Profile
from collbench.report.mismatch import mismatches
from collbench.results.row import ResultRow
from collbench.topology.io import load_topology
from collbench.topology.nvidia_smi import read_nvidia_smi_topo
from collbench.topology.sources import discover_topology

REPO = Path(__file__).resolve().parents[2]
DGX_H100 = discover_topology(nvml_replay=REPO / "tests" / "fixtures" / "nvml" / "dgx-h100.json")
DGX1_V100 = discover_topology(nvml_replay=REPO / "tests" / "fixtures" / "nvml" / "dgx1-v100.json")
CPU_VM = load_topology(REPO / "docs" / "cpu-2core-gloo-2ranks-topology.yaml")
PASTED_A100 = read_nvidia_smi_topo(REPO / "tests" / "fixtures" / "topologies" / "a100x4-nv4-nics.topo.txt")
EXAMPLE_PROFILE = Profile.load(REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml")
H100 = "NVIDIA H100 80GB HBM3"


def _rows(host: str, device: str, world_size: int, backend: str = "gloo") -> list[ResultRow]:
    made = [point_row("ring", size, 10.0 + size / 1e3, world_size=world_size) for size in (1024, 4096)]
    return [replace(r, host=host, device_name=device, backend=backend) for r in made]


def test_the_machine_the_rows_ran_on_is_no_mismatch() -> None:
    assert mismatches(_rows("dgx-h100", H100, 8, "nccl"), topology=DGX_H100) == []
    assert mismatches(_rows("dgx-h100", H100, 4, "nccl"), topology=DGX_H100) == []  # fewer ranks than GPUs
    assert mismatches(_rows("vm", "cpu", 2), topology=CPU_VM, profile=EXAMPLE_PROFILE) == []


def test_what_only_one_side_records_is_not_compared() -> None:
    # A pasted topo -m names no host and no GPU model; a log may name no host or device.
    assert mismatches(_rows("node7", "NVIDIA A100-SXM4-80GB", 4, "nccl"), topology=PASTED_A100) == []
    assert mismatches(_rows("", "", 8, "nccl"), topology=DGX_H100) == []


def test_another_gpu_machine_is_named_by_host_and_gpu() -> None:
    [warning] = mismatches(_rows("dgx-h100", H100, 8, "nccl"), topology=DGX1_V100, topology_name="v100.yaml")
    assert warning == (
        "v100.yaml does not match the rows: hosts: the rows' dgx-h100, the topology's dgx1-v100; GPUs: the rows ran "
        f"on {H100}, the topology's are Tesla V100-SXM2-32GB; the page draws it beside them as given"
    )


def test_cpu_rows_against_a_gpu_topology_and_the_other_way() -> None:
    [cpu_rows] = mismatches(_rows("vm", "cpu", 4), topology=PASTED_A100)
    assert "GPUs: the rows ran on CPU ranks, the topology's ranks are 4 GPUs" in cpu_rows
    [gpu_rows] = mismatches(_rows("dgx-h100", H100, 8, "nccl"), topology=CPU_VM)
    assert f"GPUs: the rows ran on {H100}, the topology has no GPU" in gpu_rows
    assert "world size: the rows ran 8 ranks, the topology holds 2 rank devices" in gpu_rows


def test_a_profile_of_another_shape_backend_and_host() -> None:
    rows = _rows("dgx-h100", H100, 16, "nccl") + _rows("dgx-h100", H100, 8, "nccl")
    [warning] = mismatches(rows, profile=EXAMPLE_PROFILE, profile_name="p.yaml")
    assert warning == (
        "p.yaml does not match the rows: hosts: the rows' dgx-h100, the profile's vm; backend: the rows' nccl, the "
        "profile's gloo; world size: the rows ran 8, 16 ranks, the profile's shapes are 2 ranks; the page draws its "
        "rules and models beside them as given"
    )
    # One shared world size is enough: the profile's rules of that shape are this run's to compare.
    assert mismatches(_rows("vm", "cpu", 2) + _rows("vm", "cpu", 4), profile=EXAMPLE_PROFILE) == []


def test_many_hosts_are_counted_past_a_few() -> None:
    rows = [r for i in range(9) for r in _rows(f"n{i}", "cpu", 2)]
    [warning] = mismatches(rows, topology=CPU_VM)
    assert "hosts: the rows' n0, n1, n2, n3 and 5 more, the topology's vm;" in warning

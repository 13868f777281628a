"""A large machine makes a small report: the matrix and the drawing show a bounded number of devices
and links (a pair per cell grows with the square of the devices) and say how many they left out."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from report_inputs import EXAMPLE_RESULTS

from collbench.report.machine import MAX_DRAWN_LINKS, MAX_DRAWN_RANKS, MAX_MATRIX_DEVICES
from collbench.report.page import ReportInputs, build_report
from collbench.results.io import read_rows
from collbench.topology.io import load_topology, save_topology
from collbench.topology.model import Device, DeviceKind, Link, LinkKind, Topology

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)


def large_topology(gpus: int = 1024, nics: int = 128) -> Topology:
    devices = [Device(id=f"GPU{i}", kind=DeviceKind.GPU, index=i, name="H100") for i in range(gpus)]
    devices += [Device(id=f"NIC{i}", kind=DeviceKind.NIC, index=i, name="mlx5") for i in range(nics)]
    links = [
        Link(f"GPU{i}", f"GPU{j}", LinkKind.NVLINK, count=18, bandwidth_gbps=450.0)
        for i in range(gpus)
        for j in range(i + 1, min(gpus, i - i % 8 + 8))
    ]
    links += [
        Link(f"NIC{k}", f"GPU{8 * k + g}", LinkKind.PIX, bandwidth_gbps=50.0) for k in range(nics) for g in range(8)
    ]
    return Topology(host="big", devices=tuple(devices), links=tuple(links), source="file")


def test_a_large_topology_makes_a_small_report(tmp_path: Path) -> None:
    path = tmp_path / "big.json"  # YAML would do as well, only slower to parse
    save_topology(large_topology(), path)
    assert path.stat().st_size > 300_000
    topo = load_topology(path)
    rows = tuple(r for r in read_rows(EXAMPLE_RESULTS) if r.algo in ("ring", "tree"))
    html = build_report(ReportInputs(rows=rows, topology=topo), now=NOW)
    assert len(html.encode()) < 1_500_000, len(html)
    machine = html.split('<section id="machine">')[1].split("</section>")[0]
    drawing = re.search(r'<svg [^>]*class="machine".*?</svg>', machine, flags=re.S)
    assert drawing is not None
    assert drawing.group(0).count('class="dev"') == MAX_DRAWN_RANKS
    assert drawing.group(0).count('class="link"') <= MAX_DRAWN_LINKS
    assert f"the first {MAX_DRAWN_RANKS} of 1024 rank devices shown; {1024 - MAX_DRAWN_RANKS} left out" in machine
    matrix = machine.split('<table class="matrix">')[1].split("</table>")[0]
    assert matrix.count("<tr>") == MAX_MATRIX_DEVICES + 1
    assert f"the first {MAX_MATRIX_DEVICES} of 1152 devices shown" in matrix

"""On a real GPU machine: `collbench discover` against `nvidia-smi -q` and `nvidia-smi topo -m`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.topology.bus_id import normalize_bus_id
from collbench.topology.nvidia_smi import parse_nvidia_smi_topo
from collbench.topology.nvml import Recording

pytestmark = pytest.mark.gpu


def _smi(*args: str) -> str:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi not found")
    return subprocess.run(["nvidia-smi", *args], check=True, capture_output=True, text=True, timeout=60).stdout


def _discover(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["discover", "--json", *args])
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_gpus_match_nvidia_smi_q() -> None:
    query = _smi("--query-gpu=index,name,pci.bus_id,uuid", "--format=csv,noheader")
    expected = [[f.strip() for f in line.split(",")] for line in query.strip().splitlines()]
    data = _discover()
    assert data["source"] == "nvml"
    gpus = [d for d in data["devices"] if d["kind"] == "gpu"]
    assert len(gpus) == len(expected)
    for gpu, (index, name, bus, uuid) in zip(gpus, expected, strict=True):
        assert gpu["index"] == int(index)
        assert gpu["name"] == name
        assert gpu["bus_id"] == normalize_bus_id(bus)
        assert gpu["uuid"] == uuid
    # nvidia-smi -q's "Bus Id" lines: the same GPUs, in the same order
    buses = re.findall(r"^GPU ([0-9A-Fa-f:.]+)$", _smi("-q"), flags=re.M)
    assert [normalize_bus_id(b) for b in buses] == [g["bus_id"] for g in gpus]


def test_links_match_nvidia_smi_topo_m() -> None:
    smi = parse_nvidia_smi_topo(_smi("topo", "-m"), "nvidia-smi topo -m")
    data = _discover()
    # The GPUs and their CPU affinity first: on one GPU there is no pair to compare.
    gpus = {d["id"]: d for d in data["devices"] if d["kind"] == "gpu"}
    assert sorted(gpus) == sorted(g.id for g in smi.gpus)
    for shown in smi.gpus:
        if shown.cpus is not None and gpus[shown.id]["cpus"] is not None:
            assert set(gpus[shown.id]["cpus"]) == set(shown.cpus), shown.id
    links = {(lk["a"], lk["b"]): lk for lk in data["links"]}
    for a in smi.gpus:
        for b in smi.gpus:
            if a.index < b.index:
                want = smi.link(a.id, b.id)
                got = links[(a.id, b.id)]
                assert want is not None
                assert got["kind"] in (want.kind.value, "nvswitch" if want.kind.value == "nvlink" else "")
                assert got["count"] == want.count


def test_record_and_replay_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "this-machine.json"
    live = _discover("--record", str(path))
    assert Recording.load(path).calls
    replayed = _discover("--replay", str(path))
    assert replayed["devices"] == live["devices"]
    assert replayed["links"] == live["links"]

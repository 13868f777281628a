"""Topology files: written as YAML or JSON by extension, read back identically; bad files named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.errors import InputFileError
from collbench.topology.host import HostFacts, host_topology
from collbench.topology.io import load_topology, save_topology
from collbench.topology.model import Topology
from collbench.topology.sources import discover_topology

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"


def _topologies() -> list[Topology]:
    facts = HostFacts("box", "Test CPU", 4, ((0, (0, 1, 2, 3)),), 2**30)
    return [
        discover_topology(nvml_replay=RECORDINGS / "dgx-h100.json"),
        discover_topology(nvml_replay=RECORDINGS / "dgx1-v100.json"),
        host_topology(2, "why", facts=facts),
    ]


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_round_trip_is_identical(tmp_path: Path, suffix: str) -> None:
    for i, topo in enumerate(_topologies()):
        path = tmp_path / f"t{i}{suffix}"
        save_topology(topo, path)
        back = load_topology(path)
        assert back == topo
        assert back.to_dict() == topo.to_dict()
        assert back.fingerprint == topo.fingerprint
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left nothing behind


def test_json_is_the_documented_document(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    save_topology(_topologies()[0], path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1 and data["source"] == "nvml"
    assert {"host", "fingerprint", "devices", "links"} <= set(data)
    assert data["devices"][0]["id"] == "GPU0" and data["devices"][0]["bus_id"] == "0000:18:00.0"
    assert data["links"][0] == {
        "a": "GPU0",
        "b": "GPU1",
        "kind": "nvswitch",
        "count": 18,
        "bandwidth_gbps": 450.0,
        "latency_us": None,
        "source": "spec",
    }


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("t.yaml", "", "the file is empty"),
        ("t.yaml", "a: [1,\n", "not YAML"),
        ("t.json", "{", "t.json:1: not JSON"),
        ("t.json", "[1, 2]", "not a topology document"),
        ("t.json", '{"devices": [{"kind": "gpu"}]}', "lacks the key 'id'"),
        ("t.json", '{"devices": [{"id": "GPU0", "kind": "tpu", "index": 0}]}', "not a valid topology"),
        ("t.json", '{"schema_version": 7, "devices": []}', "schema_version 7"),
        ("t.txt", "x", "unknown extension"),
    ],
)
def test_bad_files(tmp_path: Path, name: str, content: str, expected: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InputFileError) as info:
        load_topology(path)
    assert str(info.value).startswith(str(path))
    assert expected in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        load_topology(tmp_path / "none.yaml")

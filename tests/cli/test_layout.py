"""`collbench layout` through CliRunner: sources, --json, --nccl-graph-xml, rendering, errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from refused import refused_line
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.topology.host import host_topology
from collbench.topology.io import save_topology

SHARED = Path(__file__).resolve().parents[1] / "fixtures" / "topologies"


def _shared(name: str) -> Path:
    path = SHARED / name
    return path


def test_json_document_has_exactly_the_documented_keys() -> None:
    result = CliRunner().invoke(app, ["layout", "--from-nvidia-smi", str(_shared("pcie8-pix-pxb.topo.txt")), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {"rings", "ring_bandwidth_gbps", "trees", "exchange_rounds"}
    assert len(doc["exchange_rounds"]) >= 7 and all(sorted(r) == list(range(8)) for r in doc["exchange_rounds"])
    assert doc["rings"] and all(set(r) == {"order", "bandwidth_gbps"} for r in doc["rings"])
    assert sorted(doc["rings"][0]["order"]) == list(range(8))
    assert doc["ring_bandwidth_gbps"] == pytest.approx(sum(r["bandwidth_gbps"] for r in doc["rings"]))
    assert len(doc["trees"]) == 2
    for tree in doc["trees"]:
        assert set(tree) == {"parent"}
        assert tree["parent"].count(-1) == 1 and len(tree["parent"]) == 8


def test_nvswitch_rendering_shows_hops_bottleneck_total_and_verdicts() -> None:
    result = CliRunner().invoke(app, ["layout", "--from-nvidia-smi", str(_shared("hgx-h100x8-nv18-nics.topo.txt"))])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "GPU0 ─nvswitch 450→" in out.replace("\n", "")
    assert "total ring bandwidth: 450 GB/s" in out
    assert "rings:" in out and "trees:" in out
    assert "tree 0" in out and "tree 1" in out


def test_ranks_and_channels_options() -> None:
    path = str(_shared("hgx-h100x8-nv18-nics.topo.txt"))
    result = CliRunner().invoke(app, ["layout", "--from-nvidia-smi", path, "--ranks", "4", "--channels", "3", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(doc["rings"]) == 3
    assert all(sorted(r["order"]) == [0, 1, 2, 3] for r in doc["rings"])
    assert doc["ring_bandwidth_gbps"] == pytest.approx(450.0)


def test_from_file_and_nccl_graph_xml(tmp_path: Path) -> None:
    xml_in = _shared("nccl-topo-2xa100-nvswitch-cx6.xml")
    saved = tmp_path / "topo.json"
    result = CliRunner().invoke(app, ["discover", "--from-nccl-xml", str(xml_in), "--output", str(saved), "--json"])
    assert result.exit_code == 0, result.output
    graph = tmp_path / "graph.xml"
    result = CliRunner().invoke(app, ["layout", "--from-file", str(saved), "--nccl-graph-xml", str(graph)])
    assert result.exit_code == 0, result.output
    assert graph.read_text().startswith("<graphs")
    assert '<gpu dev="0"' in graph.read_text()


def test_host_topology_from_file(tmp_path: Path) -> None:
    path = tmp_path / "host.yaml"
    save_topology(host_topology(3), path)
    result = CliRunner().invoke(app, ["layout", "--from-file", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert sorted(doc["rings"][0]["order"]) == [0, 1, 2]


@pytest.mark.parametrize(
    "args",
    [
        ["--ranks", "0"],
        ["--ranks", "99"],
        ["--channels", "0"],
        ["--from-file", "x.yaml", "--from-nccl-xml", "y.xml"],
    ],
)
def test_mistakes_exit_2_with_one_line(args: list[str]) -> None:
    base = ["layout", "--from-nvidia-smi", str(_shared("pcie8-pix-pxb.topo.txt"))]
    if "--from-file" in args:
        base = ["layout"]
    result = CliRunner().invoke(app, [*base, *args])
    assert result.exit_code == 2
    assert "error:" in result.stderr


def test_graph_xml_for_cpu_ranks_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "host.json"
    save_topology(host_topology(2), path)
    result = CliRunner().invoke(app, ["layout", "--from-file", str(path), "--nccl-graph-xml", str(tmp_path / "g.xml")])
    assert result.exit_code == 2
    assert "GPU" in result.stderr


def test_topology_names_a_saved_topology_as_in_sweep(tmp_path: Path) -> None:
    """`discover -O topo.yaml` then `layout --topology topo.yaml`, as sweep, tune, report and export
    name a saved topology: it said only 'No such option: --topology'."""
    path = tmp_path / "host.yaml"
    save_topology(host_topology(3), path)
    by_alias = CliRunner().invoke(app, ["layout", "--topology", str(path), "--json"])
    by_name = CliRunner().invoke(app, ["layout", "--from-file", str(path), "--json"])
    assert by_alias.exit_code == 0, by_alias.output
    assert json.loads(by_alias.stdout) == json.loads(by_name.stdout)
    described = CliRunner().invoke(app, ["discover", "--topology", str(path), "--json"])
    assert described.exit_code == 0, described.output
    assert len(json.loads(described.stdout)["devices"]) == 3


def test_topology_and_from_file_naming_two_files_are_refused(tmp_path: Path) -> None:
    """'layout --topology A --from-file B' laid out B without a word (one option of two names: click kept
    the last); now one line, as two other sources are refused. The same file by both names is that file."""
    three, four = tmp_path / "three.yaml", tmp_path / "four.yaml"
    save_topology(host_topology(3), three)
    save_topology(host_topology(4), four)
    for command in ("layout", "discover"):
        result = CliRunner().invoke(app, [command, "--topology", str(three), "--from-file", str(four), "--json"])
        assert result.exit_code == 2, result.output
        assert result.output.strip() == (
            f"error: --from-file {four} and --topology {three} name different sources; give one of them"
        )
        same = CliRunner().invoke(app, [command, "--topology", str(three), "--from-file", str(three), "--json"])
        assert same.exit_code == 0, same.output
    laid = CliRunner().invoke(app, ["layout", "--topology", str(three), "--from-file", str(three), "--json"])
    assert [len(r["order"]) for r in json.loads(laid.stdout)["rings"]] == [3] * len(json.loads(laid.stdout)["rings"])


def test_topology_beside_another_source_is_named_as_given(tmp_path: Path) -> None:
    """'layout --topology t.yaml --from-nvidia-smi x' was refused as '--from-nvidia-smi and --from-file name
    different sources': --topology is read as --from-file, and the line named an option never given."""
    three = tmp_path / "three.yaml"
    save_topology(host_topology(3), three)
    smi = tmp_path / "x.txt"  # refused before it is read
    for command in ("layout", "discover"):
        result = CliRunner().invoke(app, [command, "--topology", str(three), "--from-nvidia-smi", str(smi)])
        assert result.exit_code == 2, result.output
        said = "error: --from-nvidia-smi and --topology name different sources; give one of them"
        assert result.output.strip() == said


def _probe_by_nodes(path: Path, nodes: int, per: int) -> None:
    """A probe by nodes' topology (runtime/probe.measured_topology): pairs within a node at 20 GB/s,
    a pair of ranks per pair of neighbouring nodes at 10, nodes 0 and 1 at 1, the rest inferred."""
    import itertools

    from collbench.runtime.probe import PairMeasure, measured_topology

    measures = []
    for node in range(nodes):
        for i, j in itertools.combinations(range(per), 2):
            a, b = node * per + i, node * per + j
            measures += [PairMeasure(a, b, 5.0, 20.0), PairMeasure(b, a, 5.0, 20.0)]
        other = (node + 1) % nodes
        gbps = 1.0 if {node, other} == {0, 1} else 10.0
        a, b = node * per, other * per
        measures += [PairMeasure(a, b, 5.0, gbps), PairMeasure(b, a, 5.0, gbps)]
    hosts = [f"node{r // per:04d}" for r in range(nodes * per)]
    save_topology(measured_topology(hosts, measures, gpus=True, per_node=True), path)


def test_past_2048_ranks_the_layout_is_planned_over_nodes(tmp_path: Path) -> None:
    path = tmp_path / "probe.yaml"
    _probe_by_nodes(path, 260, 8)
    runner = CliRunner()
    shown = runner.invoke(app, ["layout", "--from-file", str(path)], env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0] == "layout 'topology' for 2080 ranks on 260 nodes, planned over nodes"
    assert all(len(line) <= 80 for line in lines), shown.output
    assert "node0000 → node0002" in shown.output  # the slow pair of nodes 0-1 is no link of the ring
    assert "2079 rounds of disjoint pairs by nodes" in shown.output
    doc = json.loads(runner.invoke(app, ["layout", "--from-file", str(path), "--json"]).stdout)
    assert set(doc) == {"rings", "ring_bandwidth_gbps", "trees", "exchange_rounds"}
    assert sorted(doc["rings"][0]["order"]) == list(range(2080)) and doc["exchange_rounds"] == []
    assert [t["parent"].count(-1) for t in doc["trees"]] == [1, 1]
    refused = runner.invoke(app, ["layout", "--from-file", str(path), "--nccl-graph-xml", str(tmp_path / "g.xml")])
    assert refused.exit_code == 2
    assert refused.output.strip().splitlines() == [
        "error: --nccl-graph-xml is written for layouts of at most 2,048 ranks; 2080 are planned over nodes"
    ]
    assert not (tmp_path / "g.xml").exists()


def test_a_graph_xml_name_too_long_is_one_error_line(tmp_path: Path) -> None:
    # Path.is_file() raised ENAMETOOLONG from the check that no profile is replaced: a traceback.
    name = tmp_path / ("g" * 300 + ".xml")
    smi = SHARED / "hgx-h100x8-nv18-nics.topo.txt"
    line = refused_line(["layout", "--from-nvidia-smi", str(smi), "--nccl-graph-xml", str(name)])
    assert "a name in this path is 304 bytes long" in line, line


def test_bandwidths_say_whether_anyone_measured_them(tmp_path: Path) -> None:
    # The host's 10 GB/s between CPU ranks is a documented default; a probe of the same 2 ranks here
    # measured 1.62 GB/s. layout printed both alike, as if each were a finding.
    host = host_topology(3)
    first = dataclasses.replace(host.links[0], source="measured", bandwidth_gbps=1.62)
    cases = {
        "default": (host, "bandwidths: documented defaults per link kind, not measured (`collbench discover "
                    "--probe -O FILE` measures them; then --topology FILE)"),
        "probe": (dataclasses.replace(host, source="probe", links=tuple(
                      dataclasses.replace(link, source="measured", bandwidth_gbps=1.62) for link in host.links)),
                  "bandwidths: measured by `collbench discover --probe`"),
        "partly": (dataclasses.replace(host, links=(first, *host.links[1:])),
                   "bandwidths: 2 of 3 links not measured: documented defaults per link kind"),
    }  # fmt: skip
    for name, (topology, said) in cases.items():
        save_topology(topology, tmp_path / f"{name}.yaml")
        result = CliRunner().invoke(app, ["layout", "--topology", str(tmp_path / f"{name}.yaml")])
        assert result.exit_code == 0, result.output
        assert said in " ".join(result.stdout.split()), result.stdout
    # A pasted nvidia-smi matrix: each kind's documented figure; NVML's: the spec sheet's per kind.
    pasted = CliRunner().invoke(app, ["layout", "--from-nvidia-smi", str(_shared("pcie8-pix-pxb.topo.txt"))])
    assert "bandwidths: documented defaults per link kind, not measured" in " ".join(pasted.stdout.split())
    replayed = CliRunner().invoke(app, ["layout", "--replay", str(SHARED.parent / "nvml" / "dgx-h100.json")])
    assert "bandwidths: nominal figures per link kind, not measured" in " ".join(replayed.stdout.split())

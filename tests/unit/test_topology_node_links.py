"""Links between hosts said once per pair of hosts (``node_links``, schema_version 2), not per pair of
ranks: a probe's topology of 16,384 ranks listed 134 million links. The same topology written either way
(its node links, or every pair of ranks listed) gives the same layout: rings, trees, nodes, exchange."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from node_link_topologies import classed, every_pair

from collbench.errors import InputFileError
from collbench.layouts.plan import plan_layout
from collbench.topology.io import dumps_topology, load_topology, save_topology
from collbench.topology.model import Link, LinkKind


def test_a_node_link_answers_for_every_pair_of_ranks_of_its_hosts() -> None:
    topo = classed(3, 2, {(0, 1): 1.0})
    slow = topo.link("CPU1", "CPU2")
    assert slow == Link("CPU1", "CPU2", LinkKind.MEASURED, bandwidth_gbps=1.0, latency_us=40.0, source="measured")
    other = topo.link("CPU0", "CPU5")
    assert other is not None and (other.bandwidth_gbps, other.source) == (5.0, "inferred")
    # Within a host only the listed link counts; a rank with itself, or a name no device has: none.
    assert topo.link("CPU0", "CPU1") == topo.links[0]
    assert topo.link("CPU0", "CPU9") is None
    assert topo.bandwidth_matrix_gbps()[3][4] == 5.0


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    topo = classed(4, 3, {(0, 1): 1.0, (2, 3): 0.5})
    path = tmp_path / f"t{suffix}"
    save_topology(topo, path)
    back = load_topology(path)
    assert back == topo
    assert back.fingerprint == topo.fingerprint
    assert back.link("CPU0", "CPU11") == topo.link("CPU0", "CPU11")
    doc = json.loads(path.read_text()) if suffix == ".json" else yaml.safe_load(path.read_text())
    assert doc["schema_version"] == 2
    assert {"default": True}.items() <= doc["node_links"][-1].items()
    assert doc["node_links"][-1]["source"] == "inferred"


def test_a_topology_without_node_links_is_the_version_1_document_it_always_was() -> None:
    topo = every_pair(classed(2, 2, {}))
    doc = topo.to_dict()
    assert doc["schema_version"] == 1 and "node_links" not in doc
    # The document the repository ships (docs/) still loads, with the fingerprint it was written with.
    shipped = Path(__file__).parents[2] / "docs" / "cpu-2core-gloo-2ranks-topology.yaml"
    loaded = load_topology(shipped)
    assert loaded.fingerprint == yaml.safe_load(shipped.read_text())["fingerprint"]


SHAPES = [
    # (hosts, ranks a host, slow host pairs): one slow pair, two, none (the default alone), one rank a host.
    (4, 2, {(0, 2): 0.04}),
    (4, 2, {(1, 2): 0.04, (3, 0): 0.04}),
    (3, 3, {}),
    (4, 1, {(0, 1): 0.3, (2, 3): 0.3}),
    (6, 4, {(0, 5): 1.0, (1, 4): 2.0}),
]


@pytest.mark.parametrize(("hosts", "per_host", "slow"), SHAPES)
def test_either_form_plans_the_same_layout(hosts: int, per_host: int, slow: dict[tuple[int, int], float]) -> None:
    compact = classed(hosts, per_host, slow)
    full = every_pair(compact)
    assert len(full.links) == hosts * per_host * (hosts * per_host - 1) // 2
    n = hosts * per_host
    assert plan_layout(compact, n) == plan_layout(full, n)
    # A sweep on fewer ranks plans on the first of them (Topology.subset keeps their hosts' node links).
    assert plan_layout(compact, n - 1) == plan_layout(full, n - 1)


def test_the_document_grows_with_the_ranks_not_their_square() -> None:
    def size(hosts: int) -> int:
        return len(dumps_topology(classed(hosts, 8, {(0, 1): 1.0}), "json"))

    # Twice the hosts, twice the document (devices and the links within hosts), never four times.
    assert size(64) < 2.1 * size(32)


def _document(**change: object) -> dict[str, object]:
    doc = classed(2, 1, {(0, 1): 1.0}).to_dict()
    doc.update(change)
    return doc


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"schema_version": 1}, "node_links need schema_version 2"),
        ({"schema_version": 3}, "schema_version 3 is not supported"),
        (
            {"node_links": [{"a": "h0", "b": "nowhere", "kind": "measured", "bandwidth_gbps": 1.0}]},
            "names a host that no rank device is on",
        ),
        (
            {"node_links": [{"default": True, "kind": "measured"}, {"default": True, "kind": "measured"}]},
            "the default link between hosts is given twice",
        ),
        ({"node_links": [{"a": "h0", "b": "h0", "kind": "measured"}]}, "joins two different hosts"),
        ({"node_links": [{"a": "h0", "kind": "measured"}]}, "lacks the key 'b'"),
        ({"node_links": [{"default": True, "kind": "measured", "bandwidth_gbps": "nan"}]}, "finite number"),
        ({"node_links": {"a": "h0"}}, "node_links is dict, expected a list"),
        ({"node_links": [{"a": ["h0"], "b": "h1", "kind": "measured"}]}, "node_links[0].a is list"),
    ],
)
def test_a_bad_node_link_is_one_line(tmp_path: Path, change: dict[str, object], said: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_document(**change)))
    with pytest.raises(InputFileError) as caught:
        load_topology(path)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_discover_says_what_was_measured_and_marks_what_was_inferred() -> None:
    from rich.console import Console

    from collbench.cli.render.topology import render_topology, topology_summary

    topo = classed(4, 2, {(0, 1): 1.0, (2, 3): 0.5})
    lines = topology_summary(topo)
    at = lines.index("probe: 4 pairs of ranks measured within nodes, 19.5 GB/s per direction")
    assert lines[at + 1 : at + 6] == [
        "  latency 2 us",
        "probe: 2 pairs of nodes measured, one pair of ranks each",
        "  0.5-1 GB/s per direction (median 0.75)",
        "  latency 40 us",
        "  4 other pairs of nodes inferred: 5 GB/s (INF, ~ in the matrix)",
    ]
    console = Console(width=80, record=True, color_system=None)
    console.print(render_topology(topo, bandwidth=True))
    text = console.export_text()
    # CPU0's row: itself, its host's CPU1 (measured), h1's ranks (a measured node pair), the rest inferred.
    row = next(line for line in text.splitlines() if line.startswith("CPU0 "))
    assert row.split()[:9] == ["CPU0", "X", "19.5", "1", "1", "~5", "~5", "~5", "~5"]
    assert max(len(line) for line in text.splitlines()) <= 80


def test_the_reports_matrix_marks_what_was_inferred() -> None:
    from collbench.report.machine import matrix_html

    html = matrix_html(classed(3, 1, {(0, 1): 1.0}))
    # CPU0-CPU1 measured (1 GB/s); CPU0-CPU2 and CPU1-CPU2 inferred (5): each shown twice in the matrix.
    assert html.count("INF<br><small>~5</small>") == 4
    assert html.count("MEAS<br><small>1</small>") == 2
    assert "(inferred)" in html


def test_the_fingerprint_names_hosts_by_where_their_ranks_stand() -> None:
    """A pair of hosts written b-a, or the same cluster on other host names, is the same machine (host
    names are left out of the fingerprint, and links name devices by rank): the node links' hosts once
    went in by name and in the order written. Which pair of hosts is slow still counts."""
    from dataclasses import replace

    topo = classed(3, 2, {(0, 2): 1.0})
    swapped = replace(topo, node_links=tuple(replace(nl, a=nl.b, b=nl.a) for nl in topo.node_links))
    names = {"h0": "node07", "h1": "node03", "h2": "node12"}
    renamed = replace(
        topo,
        devices=tuple(replace(d, host=names[d.host or ""]) for d in topo.devices),
        node_links=tuple(replace(nl, a=names.get(nl.a or ""), b=names.get(nl.b or "")) for nl in topo.node_links),
    )
    assert swapped.link("CPU0", "CPU4") == topo.link("CPU0", "CPU4") and renamed.link("CPU0", "CPU4") is not None
    assert swapped.fingerprint == renamed.fingerprint == topo.fingerprint
    assert classed(3, 2, {(0, 1): 1.0}).fingerprint != topo.fingerprint


def test_the_reports_drawing_joins_hosts_as_every_pair_listed_does() -> None:
    """The report's drawing drew only ``links``: a topology saying its links between hosts per pair of
    hosts showed each host's ranks unconnected to the others (3 lines where every pair listed draws 15).
    Those drawn from node links are the same lines, and an inferred one is labelled as the matrix marks it."""
    from collbench.report.machine import drawing_svg

    topo = classed(3, 2, {(0, 2): 1.0})

    def lines(svg: str) -> set[str]:
        return {line for line in svg.splitlines() if 'class="link"' in line}

    by_hosts, listed = drawing_svg(topo), drawing_svg(every_pair(topo))
    assert len(lines(by_hosts)) == 15 and lines(by_hosts) == lines(listed)
    # CPU0 (h0) to CPU4 (h2) is the measured slow pair; CPU0 to CPU2 (h1) the inferred default.
    assert "CPU0 - CPU4: measured x1, 1 GB/s per direction, 40 us (measured)" in by_hosts
    assert "CPU0 - CPU2: measured x1, 5 GB/s per direction, 30 us (inferred)" in by_hosts
    assert by_hosts.count(">INF ~5</text>") == 8 and by_hosts.count(">MEAS 1</text>") == 4


def test_the_reports_machine_line_counts_links_between_hosts_apart() -> None:
    # '6 CPU rank devices, 0 NICs, 3 links' said nothing of the links between hosts node links stand for.
    from collbench.report.page import _topology_line

    topo = classed(3, 2, {(0, 2): 1.0})
    assert "6 CPU rank devices, 0 NICs, 3 links and 2 links between hosts; source probe" in _topology_line(topo)
    assert "0 NICs, 15 links; source probe" in _topology_line(every_pair(topo))

"""`export ompi-rankfile`: rank order along the profile's ring, read back as Open MPI 4.1 reads a rankfile
(orterun(1), "Rankfiles": ``rank N=host slot=list``, ``#`` comments). tests/mpi runs the real mpirun on it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import UserError
from collbench.exporters.ompi_rankfile import build_ompi_rankfile
from collbench.profile.document import Profile, ProfileLayout, RuleSet
from collbench.profile.rules import Rule
from collbench.topology.model import Device, DeviceKind, Link, LinkKind, NodeLink, Topology

P = {"segment_bytes": None, "layout": "topology"}
LINE = re.compile(r"^rank (\d+)=(\S+) slot=(\S+)$")


def parse_rankfile(text: str) -> dict[int, tuple[str, str]]:
    """rank -> (host, slot list), as Open MPI's rankfile lexer reads it (comments dropped)."""
    out: dict[int, tuple[str, str]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = LINE.match(line)
        assert match, f"not a rankfile line: {raw!r}"
        rank = int(match.group(1))
        assert rank not in out, f"rank {rank} twice"
        out[rank] = (match.group(2), match.group(3))
    return out


def shaped(world: int, nodes: int, ring: tuple[int, ...] | None, *, predicted: bool = False) -> RuleSet:
    layout = None if ring is None else ProfileLayout("topology", rings=(ring,))
    return RuleSet(world, nodes, (Rule("all-reduce", 0, None, "native", P),), predicted=predicted, layout=layout)


def profile(*sets: RuleSet, backend: str = "mpi") -> Profile:
    return Profile(fingerprint="fp", host="h", backend=backend, rule_sets=sets)


def test_four_hosts_take_the_rings_order() -> None:
    built = build_ompi_rankfile(profile(shaped(4, 4, (0, 2, 1, 3))), hosts=["a", "b", "c", "d"])
    # Rank j runs where the tuned job's rank ring[j] ran: rank 1 -> host c (tuned rank 2).
    assert parse_rankfile(built.text) == {0: ("a", "0"), 1: ("c", "0"), 2: ("b", "0"), 3: ("d", "0")}
    # One rank per node, each node's ranks together: the hosts in ring order say the same.
    assert built.map_by == "-H a:1,c:1,b:1,d:1 --map-by slot"
    assert "# alternative without a file: mpirun -H a:1,c:1,b:1,d:1 --map-by slot" in built.text


def test_without_host_names_relative_hosts_and_why() -> None:
    built = build_ompi_rankfile(profile(shaped(4, 4, (0, 2, 1, 3))))
    assert [host for host, _ in parse_rankfile(built.text).values()] == ["+n0", "+n2", "+n1", "+n3"]
    assert built.map_by is None
    assert "resource manager's allocation" in built.text and "--hosts" in built.text


def test_one_node_slots_follow_the_ring_and_no_policy_gives_it() -> None:
    built = build_ompi_rankfile(profile(shaped(4, 1, (0, 3, 1, 2))))
    assert parse_rankfile(built.text) == {
        0: ("localhost", "0"),
        1: ("localhost", "3"),
        2: ("localhost", "1"),
        3: ("localhost", "2"),
    }
    assert built.map_by is None


def test_rank_order_ring_says_the_default_does_it() -> None:
    built = build_ompi_rankfile(profile(shaped(2, 1, (0, 1))))
    assert built.map_by is not None and built.map_by.startswith("--map-by slot")
    assert built.notes and "changes nothing" in built.notes[0]


def test_round_robin_over_nodes_is_map_by_node() -> None:
    # Two nodes of two ranks (tuned 0,1 on node 0; 2,3 on node 1), ring 0-2-1-3 alternates nodes.
    built = build_ompi_rankfile(profile(shaped(4, 2, (0, 2, 1, 3))), hosts=["x", "y"])
    assert parse_rankfile(built.text) == {0: ("x", "0"), 1: ("y", "0"), 2: ("x", "1"), 3: ("y", "1")}
    assert built.map_by == "--map-by node"


def test_one_slot_list_for_every_rank() -> None:
    built = build_ompi_rankfile(profile(shaped(4, 4, (0, 2, 1, 3))), hosts=list("abcd"), slots="0-1")
    assert {slot for _, slot in parse_rankfile(built.text).values()} == {"0-1"}


@given(st.permutations(range(8)), st.sampled_from([1, 2, 4, 8]))
def test_every_rank_once_at_the_place_its_ring_position_ran(ring: list[int], nodes: int) -> None:
    built = build_ompi_rankfile(profile(shaped(8, nodes, tuple(ring))), hosts=[f"h{i}" for i in range(nodes)])
    read = parse_rankfile(built.text)
    assert sorted(read) == list(range(8))
    per_node = 8 // nodes
    for j, tuned in enumerate(ring):
        assert read[j][0] == f"h{tuned // per_node}"
        assert read[j][1] == str(tuned % per_node)


@pytest.mark.parametrize(
    ("sets", "kwargs", "message"),
    [
        ((shaped(4, 1, None),), {}, "no ring layout for 4 ranks"),
        ((shaped(4, 1, (0, 1, 2, 3)), shaped(8, 2, None, predicted=True)), {"world_size": 8}, "predicted"),
        ((shaped(4, 1, (0, 1, 2, 3)),), {"world_size": 6}, "no rules for 6 ranks"),
        ((shaped(4, 4, (0, 1, 2, 3)),), {"hosts": ["a", "b"]}, "--hosts names 2 hosts"),
        ((shaped(4, 1, (0, 1, 2, 3)), shaped(2, 1, (0, 1))), {}, "pick one with --ranks"),
        ((shaped(3, 2, (0, 1, 2)),), {}, "not the same number per node"),
        ((shaped(2, 1, (0, 1)),), {"slots": "0 1"}, "one Open MPI slot list"),
    ],
)
def test_what_cannot_be_a_rankfile_is_one_error(sets: tuple[RuleSet, ...], kwargs: dict, message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        build_ompi_rankfile(profile(*sets), **kwargs)


def test_cli_writes_the_file_and_bad_input_is_one_line(tmp_path: Path) -> None:
    path = profile(shaped(4, 4, (0, 2, 1, 3))).save(tmp_path / "p.yaml")
    out = tmp_path / "ranks.txt"
    result = CliRunner().invoke(app, ["export", "ompi-rankfile", str(path), "--hosts", "a,b,c,d", "-O", str(out)])
    assert result.exit_code == 0, result.output
    assert parse_rankfile(out.read_text())[1] == ("c", "0")
    assert f"mpirun --rankfile {out}" in result.stderr
    for args, message in [(["--hosts", "a,,c,d"], "none empty"), (["--ranks", "2"], "no rules for 2 ranks")]:
        bad = CliRunner().invoke(app, ["export", "ompi-rankfile", str(path), *args])
        assert bad.exit_code == 2 and message in bad.stderr, bad.output
        assert len(bad.stderr.strip().splitlines()) <= 2 and "Traceback" not in bad.output


SLOW = {frozenset((0, 1)), frozenset((2, 3))}


def probed(hosts: list[str]) -> Topology:
    """Four CPU ranks on four hosts, as the probe writes them: pairs 0-1 and 2-3 at a tenth of the others."""
    ranks = tuple(Device(id=f"CPU{r}", kind=DeviceKind.CPU, index=r, name=f"rank {r}", host=hosts[r]) for r in range(4))
    links = tuple(
        Link(
            a=f"CPU{a}",
            b=f"CPU{b}",
            kind=LinkKind.MEASURED,
            bandwidth_gbps=0.005 if frozenset((a, b)) in SLOW else 0.05,
            latency_us=100.0,
            source="measured",
        )
        for a in range(4)
        for b in range(a + 1, 4)
    )
    return Topology(host=",".join(hosts), devices=ranks, links=links, source="probe")


def test_a_topology_plans_the_ring_a_profile_of_open_mpi_lacks(tmp_path: Path) -> None:
    hosts = ["n0", "n1", "n2", "n3"]
    built = build_ompi_rankfile(profile(shaped(4, 4, None)), hosts=hosts, topology=probed(hosts))
    placed = [int(host[1]) for host, _ in parse_rankfile(built.text).values()]
    # Open MPI's ring hop j -> j+1 (and 3 -> 0) lands on fast pairs only.
    assert all(frozenset((placed[j], placed[(j + 1) % 4])) not in SLOW for j in range(4)), placed
    assert "planned on the given topology" in built.text
    topo = tmp_path / "topo.json"
    topo.write_text(json.dumps(probed(hosts).to_dict()))
    path = profile(shaped(4, 4, None)).save(tmp_path / "p.yaml")
    result = CliRunner().invoke(
        app, ["export", "ompi-rankfile", str(path), "--hosts", ",".join(hosts), "--topology", str(topo)]
    )
    assert result.exit_code == 0, result.output
    assert parse_rankfile(result.stdout) == parse_rankfile(built.text)


def test_a_topology_with_links_per_pair_of_hosts_plans_the_same_ring(tmp_path: Path) -> None:
    """The probe's links between hosts said once per pair of hosts (node_links, schema_version 2): with
    one rank per host every pair of hosts is a pair of ranks, and the ring is the one planned from the
    same links listed per pair of ranks (all four ranks moved onto one host once named the hosts that
    the node links name, a ValueError traceback)."""
    hosts = ["n0", "n1", "n2", "n3"]
    listed = probed(hosts)
    node_links = tuple(
        NodeLink(
            lk.kind,
            lk.bandwidth_gbps,
            lk.latency_us,
            "measured",
            a=listed.device(lk.a).host,
            b=listed.device(lk.b).host,
        )
        for lk in listed.links
    )
    per_hosts = Topology(host=listed.host, devices=listed.devices, links=(), source="probe", node_links=node_links)
    want = build_ompi_rankfile(profile(shaped(4, 4, None)), hosts=hosts, topology=listed).text
    assert build_ompi_rankfile(profile(shaped(4, 4, None)), hosts=hosts, topology=per_hosts).text == want
    topo = tmp_path / "topo.json"
    topo.write_text(json.dumps(per_hosts.to_dict()))
    path = profile(shaped(4, 4, None)).save(tmp_path / "p.yaml")
    result = CliRunner().invoke(
        app, ["export", "ompi-rankfile", str(path), "--hosts", ",".join(hosts), "--topology", str(topo)]
    )
    assert result.exit_code == 0, result.output
    assert parse_rankfile(result.stdout) == parse_rankfile(want)


def test_past_the_one_fabric_search_no_pair_of_ranks_is_looked_at(monkeypatch: pytest.MonkeyPatch) -> None:
    """3,000 ranks on a host each: every pair's link was looked up (O(n^2), 2 min) to put them on one
    fabric, whose search stops at MAX_LAYOUT_RANKS; past it plan_layout plans over nodes (each host a
    node) from the topology as it is."""
    from collbench.exporters.ompi_rankfile import _pairwise
    from collbench.layouts.fabric import MAX_LAYOUT_RANKS

    n = MAX_LAYOUT_RANKS + 1
    ranks = tuple(Device(id=f"CPU{r}", kind=DeviceKind.CPU, index=r, host=f"n{r}") for r in range(n))
    default = NodeLink(LinkKind.MEASURED, 10.0, 30.0, "inferred")
    topo = Topology(host="n0", devices=ranks, links=(), source="probe", node_links=(default,))
    asked: list[str] = []
    monkeypatch.setattr(Topology, "link", lambda self, a, b: asked.append(a))
    assert _pairwise(topo, n) is topo
    assert asked == []

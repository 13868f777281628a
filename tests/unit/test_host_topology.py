"""The host without GPUs: its CPUs, NUMA nodes, memory, and the CPU ranks collbench would run."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.topology.host import LOOPBACK_GBPS, HostFacts, host_facts, host_topology
from collbench.topology.model import LinkKind


def _fake_root(tmp_path: Path) -> Path:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nmodel name\t: Test CPU 9000\n\nprocessor\t: 1\n")
    (tmp_path / "proc/meminfo").write_text("MemTotal:       16384000 kB\nMemFree: 1 kB\n")
    for node, cpus in ((0, "0-3"), (1, "4-7")):
        d = tmp_path / f"sys/devices/system/node/node{node}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpus + "\n")
    return tmp_path


def test_host_facts_from_proc_and_sys(tmp_path: Path) -> None:
    facts = host_facts(_fake_root(tmp_path))
    assert facts.cpu_model == "Test CPU 9000"
    assert facts.cores == 8
    assert facts.numa_nodes == ((0, (0, 1, 2, 3)), (1, (4, 5, 6, 7)))
    assert facts.memory_bytes == 16384000 * 1024


def test_without_numa_directory_one_node_holds_every_cpu(tmp_path: Path) -> None:
    root = _fake_root(tmp_path)
    for node in (0, 1):
        (root / f"sys/devices/system/node/node{node}/cpulist").unlink()
    facts = host_facts(root)
    assert len(facts.numa_nodes) == 1 and facts.numa_nodes[0][0] == 0


FACTS = HostFacts("box", "Test CPU", 8, ((0, (0, 1, 2, 3)), (1, (4, 5, 6, 7))), 2**34)


def test_ranks_split_the_cores_and_follow_numa() -> None:
    topo = host_topology(4, "no GPU here", facts=FACTS)
    assert topo.source == "host" and topo.note == "no GPU here" and topo.host == "box"
    assert [(d.id, d.cpus, d.numa_node) for d in topo.cpus] == [
        ("CPU0", (0, 1), 0),
        ("CPU1", (2, 3), 0),
        ("CPU2", (4, 5), 1),
        ("CPU3", (6, 7), 1),
    ]
    assert topo.rank_devices == topo.cpus
    assert len(topo.links) == 6
    assert {(lk.kind, lk.bandwidth_gbps, lk.source) for lk in topo.links} == {
        (LinkKind.LOOPBACK, LOOPBACK_GBPS, "default")
    }
    first = topo.cpus[0]
    assert first.name == "Test CPU"
    assert first.get("host_cores") == "8" and first.get("host_numa_nodes") == "2"
    assert first.get("host_memory_bytes") == str(2**34)


def test_default_ranks_is_the_core_count_and_at_least_two() -> None:
    assert len(host_topology(facts=FACTS).cpus) == 8
    one = HostFacts("box", None, 1, ((0, (0,)),), None)
    topo = host_topology(facts=one)
    assert [d.cpus for d in topo.cpus] == [(0,), (0,)]  # two ranks share the only core


def test_bad_ranks() -> None:
    with pytest.raises(ValueError, match="ranks must be >= 1"):
        host_topology(0, facts=FACTS)


def test_this_machine() -> None:
    topo = host_topology()
    assert len(topo.cpus) >= 2
    assert all(d.cpus for d in topo.cpus)


def test_host_summary_counts_numa_nodes_in_words() -> None:
    # The extras are text ("1"), so the count must be read back as a number for its noun:
    # discover on a one-node VM said "1 NUMA nodes".
    from collbench.cli.render.topology import topology_summary

    one = HostFacts("box", "Test CPU", 2, ((0, (0, 1)),), 2**34)
    assert "Host: Test CPU, 2 cores, 1 NUMA node, 16.0 GiB memory" in topology_summary(host_topology(2, "", facts=one))
    assert "Host: Test CPU, 8 cores, 2 NUMA nodes, 16.0 GiB memory" in topology_summary(
        host_topology(4, "", facts=FACTS)
    )
    # A machine of one core said '1 cores'.
    single = HostFacts("box", "Test CPU", 1, ((0, (0,)),), 2**34)
    assert "Host: Test CPU, 1 core, 1 NUMA node, 16.0 GiB memory" in topology_summary(
        host_topology(2, "", facts=single)
    )


def test_a_rank_bound_to_one_core_describes_the_same_machine() -> None:
    # mpirun -np 2 binds each rank to one core: the process may use 1 of the machine's 2, and the
    # machine's fingerprint (which profiles merge by) and its summary took that 1 as the machine's.
    from collbench.cli.render.topology import topology_summary
    from collbench.profile.document import machine_fingerprint

    free = HostFacts("box", "Test CPU", 2, ((0, (0, 1)),), 2**34)
    bound = HostFacts("box", "Test CPU", 1, ((0, (0, 1)),), 2**34)
    assert machine_fingerprint(host_topology(2, "", facts=bound)) == machine_fingerprint(
        host_topology(2, "", facts=free)
    )
    assert "Host: Test CPU, 2 cores, 1 NUMA node, 16.0 GiB memory" in topology_summary(
        host_topology(2, "", facts=bound)
    )

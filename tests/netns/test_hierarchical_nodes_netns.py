"""The rows of a hierarchical sweep on the namespace cluster carry the node count its ranks run on
(issue 35): four namespaces started as two hosts of two ranks (``ranks_per_host=2``: the launcher's
local ranks and one boot id per host, what collbench reads a node from) with a topology of those two
hosts record 2 nodes, as bench_hierarchical_netns.py now runs them. Started one rank per host, every
namespace is a node of its own: the rows record the 4 the ranks ran on, and the sweep says that the
topology's layout (2 nodes, which hierarchical's rings follow) disagrees."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.netns._cluster import needs_netns, netns

pytestmark = pytest.mark.netns

JOB_S = 300.0


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "collbench.cli.app", *args]


def _two_hosts(path: Path) -> None:
    """This machine's four CPU ranks (``discover --ranks 4``) placed on hosts h0 (ranks 0-1) and h1 (2-3)."""
    from typer.testing import CliRunner

    from collbench.cli.app import app

    done = CliRunner().invoke(app, ["discover", "--ranks", "4", "-O", str(path)])
    assert done.exit_code == 0, done.output
    lines, rank = [], -1
    for line in path.read_text().splitlines():
        if found := re.match(r"- id: CPU(\d)", line):
            rank = int(found.group(1))
        elif line.startswith("  host: ") and rank >= 0:
            line = f"  host: h{rank // 2}"
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")


def _sweep(tmp_path: Path, ranks_per_host: int) -> tuple[str, list[int]]:
    from collbench.results.io import read_jsonl

    rates = [[0.0 if a == b else (800.0 if a // 2 == b // 2 else 100.0) for b in range(4)] for a in range(4)]
    topology, rows = tmp_path / "2x2.yaml", tmp_path / f"rows-{ranks_per_host}.jsonl"
    _two_hosts(topology)
    sweep = ["sweep", "--topology", str(topology), "--op", "all-reduce", "--algo", "ring,hierarchical"]
    sweep += ["-b", "64K", "-e", "64K", "-n", "2", "-w", "1", "--stream", str(rows), "--timeout", "120"]
    with netns.NamespaceCluster(rates, ranks_per_host=ranks_per_host) as cluster:
        outputs = cluster.run_job(_cli(*sweep), cwd=tmp_path, timeout_s=JOB_S)
    measured = list(read_jsonl(rows))
    assert {r.algo for r in measured} == {"ring", "hierarchical"} and all(r.wrong == 0 for r in measured)
    return " ".join(outputs[0].split()), [r.nodes for r in measured]


@needs_netns
def test_two_hosts_of_two_ranks_record_two_nodes(tmp_path: Path) -> None:
    said, nodes = _sweep(tmp_path, ranks_per_host=2)
    assert set(nodes) == {2}
    assert "but they run on" not in said


@needs_netns
def test_a_layout_of_other_nodes_than_the_hosts_is_said(tmp_path: Path) -> None:
    said, nodes = _sweep(tmp_path, ranks_per_host=1)
    assert set(nodes) == {4}
    assert "groups the ranks into 2 nodes, but they run on 4 nodes (by host name and boot id): rows record 4" in said

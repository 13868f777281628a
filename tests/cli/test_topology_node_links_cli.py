"""A topology whose links between hosts are said per pair of hosts (``node_links``) through the commands
that read one: ``layout --from-file`` lays out the same rings and trees as from the same topology with
every pair of ranks listed, and ``discover --from-file`` shows the inferred links as such."""

from __future__ import annotations

import json
from pathlib import Path

from node_link_topologies import classed, every_pair
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.topology.io import save_topology


def test_layout_reads_either_form_alike(tmp_path: Path) -> None:
    compact = classed(4, 2, {(1, 2): 0.04, (3, 0): 0.04})
    save_topology(compact, tmp_path / "compact.yaml")
    save_topology(every_pair(compact), tmp_path / "full.yaml")
    assert (tmp_path / "compact.yaml").stat().st_size < (tmp_path / "full.yaml").stat().st_size
    got = {}
    for form in ("compact", "full"):
        result = CliRunner().invoke(app, ["layout", "--from-file", str(tmp_path / f"{form}.yaml"), "--json"])
        assert result.exit_code == 0, result.output
        got[form] = json.loads(result.output)
    assert got["compact"] == got["full"]
    # The slow pairs of hosts (h1-h2, h3-h0) are never neighbours in the best ring.
    ring = got["compact"]["rings"][0]["order"]
    hosts = [r // 2 for r in ring]
    hops = {frozenset((hosts[k], hosts[(k + 1) % len(hosts)])) for k in range(len(hosts))}
    assert not hops & {frozenset((1, 2)), frozenset((3, 0))}
    # Its hops between hosts are the default's, which no probe measured: said so, not called measured.
    shown = CliRunner().invoke(app, ["layout", "--from-file", str(tmp_path / "compact.yaml")], terminal_width=200)
    assert "hops: 4x measured, 4x inferred" in shown.output
    assert "CPU0 ─measured 19.5→ CPU1 ─inferred 5→ CPU2" in shown.output


def test_discover_shows_what_was_inferred(tmp_path: Path) -> None:
    save_topology(classed(3, 2, {(0, 1): 1.0}), tmp_path / "t.yaml")
    result = CliRunner().invoke(app, ["discover", "--from-file", str(tmp_path / "t.yaml")], terminal_width=80)
    assert result.exit_code == 0, result.output
    assert "  2 other pairs of nodes inferred: 5 GB/s (INF, ~ in the matrix)" in result.output
    assert "INF" in next(line for line in result.output.splitlines() if line.startswith("CPU0 "))

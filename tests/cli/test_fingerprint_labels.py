"""A topology's fingerprint (its rank devices: what result rows carry) and the machine's fingerprint
(what a profile carries, at any rank count) are two numbers: every place that prints one says which."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from sampled_rows import SIZES, sampled_row
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import machine_fingerprint
from collbench.report.compare import compare_rows
from collbench.topology.model import Topology

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"
FINGERPRINTS = re.compile(r"fingerprints: topology ([0-9a-f]{12}) \((\d+) ranks?; in result rows\), "
                          r"machine ([0-9a-f]{12}) \(in profiles\)")  # fmt: skip


def _discover(*args: str) -> tuple[str, Topology]:
    """discover's summary and the topology it describes (its --json document, read back)."""
    runner = CliRunner()
    text = runner.invoke(app, ["discover", *args], env={"COLUMNS": "100"})
    assert text.exit_code == 0, text.stderr
    document = runner.invoke(app, ["discover", *args, "--json"])
    assert document.exit_code == 0, document.stderr
    return text.stdout, Topology.from_dict(json.loads(document.stdout))


def test_discover_names_both_fingerprints_and_the_machine_one_is_what_profiles_carry() -> None:
    machines = set()
    for ranks in ("2", "4"):
        out, topo = _discover("--replay", str(RECORDINGS / "dgx-h100.json"), "--ranks", ranks)
        found = FINGERPRINTS.search(out)
        assert found is not None, out
        topology_fp, count, machine_fp = found.groups()
        assert (topology_fp, int(count)) == (topo.fingerprint, int(ranks))
        # The number profile merge and tune compare: the same for a tune at 2 or 4 ranks of this machine.
        assert machine_fp == machine_fingerprint(topo)
        machines.add(machine_fp)
        assert f"fingerprint: {topo.fingerprint}" not in out  # never unlabelled
    assert len(machines) == 1


def test_compare_calls_the_rows_fingerprint_a_topology_fingerprint() -> None:
    rng = np.random.default_rng(3)
    base = [sampled_row(rng, s, 50.0, topology_fingerprint="aaaaaaaaaaaa") for s in SIZES]
    new = [sampled_row(rng, s, 50.0, topology_fingerprint="bbbbbbbbbbbb") for s in SIZES]
    assert compare_rows(base, new).warnings == (
        "the runs differ in topology fingerprint: BASE aaaaaaaaaaaa, NEW bbbbbbbbbbbb",
    )

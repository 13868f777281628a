"""`collbench predict --hierarchy 6`: the NCCL 2.4 article's comparison (ring, hierarchical ring,
two-tree all-reduce from 1 to 4,096 nodes of 6 GPUs, as Summit's), from fits of two published logs:
one DGX A100 (8 GPUs, all_gather_perf, the inside-a-node class) and two DGX A100 (16 ranks,
all_reduce_perf, the across-nodes class), imported and fitted here as a user would."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fits_files import fits_file
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import ConfigError
from collbench.models.fitted import Fit
from collbench.models.hierarchy import algorithm_time_us, compare, link_classes

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
ONE_NODE = REAL / "all_gather-a100-x8-legacy-superbench.log"
TWO_NODES = REAL / "all_reduce_perf-dgx-a100-2node-k8s-legacy.log"


def _fits(tmp_path: Path) -> Path:
    runner = CliRunner()
    intra, inter = tmp_path / "intra.jsonl", tmp_path / "inter.jsonl"
    for log, out, extra in ((ONE_NODE, intra, []), (TWO_NODES, inter, ["--ranks", "16", "--nodes", "2"])):
        done = runner.invoke(app, ["import", "nccl-tests", str(log), "-O", str(out), *extra])
        assert done.exit_code == 0, done.output
    rows = tmp_path / "rows.jsonl"
    rows.write_text(intra.read_text() + inter.read_text())
    return fits_file(rows, tmp_path / "fits.json")


def test_the_articles_comparison_from_one_fits_file(tmp_path: Path) -> None:
    fits = _fits(tmp_path)
    args = ["predict", "--fits", str(fits), "--ranks", "24576", "--hierarchy", "6", "--sizes", "8,1M,256M"]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert "x8 on 1 node" in doc["intra"] and "x16 on 2 nodes" in doc["inter"]
    rows = {r["nodes"]: r for r in doc["rows"]}
    assert sorted(rows) == [1 << i for i in range(13)]  # 1 .. 4,096 nodes, 6 .. 24,576 GPUs
    ring = {m: r["times_us"]["ring"]["8"] for m, r in rows.items()}
    tree = {m: r["times_us"]["two-tree"]["8"] for m, r in rows.items()}
    hier = {m: r["times_us"]["hierarchical"]["8"] for m, r in rows.items()}
    # Ring latency is linear in the nodes: doubling them doubles it (2(6m-1) steps).
    assert ring[4096] / ring[2048] == pytest.approx(2.0, rel=0.01)
    # Two-tree's grows by the same step per doubling of the nodes: logarithmic.
    steps = [tree[1 << (i + 1)] - tree[1 << i] for i in range(4, 12)]
    assert max(steps) == pytest.approx(min(steps), rel=0.01)
    # Hierarchical crosses the network in 2(m-1) steps, the flat ring in 2(6m-1): about 6 times fewer.
    assert rows[4096]["network_steps"] == {"ring": 49150, "hierarchical": 8190, "two-tree": 24}
    assert hier[1] is None and tree[4096] < hier[4096] < ring[4096]
    # Where each wins by size: two-tree for latency at scale, a ring (flat or hierarchical) for bulk.
    assert rows[4096]["fastest"]["8"] == "two-tree"
    assert {rows[m]["fastest"]["268435456"] for m in (4, 16, 64)} == {"hierarchical"}
    # The article's published comparison (docs/models.md, benchmarks/README.md), on the prediction:
    # its latency figure, trees "up to 180x" faster than rings at 24k GPUs, a gap growing with scale.
    # Predicted: 795x at 24,576 GPUs, passing 180x between 512 and 1,024 nodes.
    gap = {m: ring[m] / tree[m] for m in rows}
    assert all(gap[1 << (i + 1)] > gap[1 << i] for i in range(2, 12))
    assert gap[512] < 180 < gap[1024] and gap[4096] == pytest.approx(795, rel=0.01)
    # Its Figure 5: hierarchical rings' advantage over flat ones "remains constant" at scale: here it
    # levels off at the GPUs a node (5.6x on 256 nodes, 5.97x on 4,096), while the tree's keeps growing.
    lead = {m: ring[m] / hier[m] for m in rows if hier[m] is not None}
    assert 5.5 < lead[256] < lead[2048] < lead[4096] < 6 and lead[4096] / lead[2048] < 1.01
    # Its Figure 4: trees keep their bandwidth up to 24,576 GPUs. The tree's busbw at 256 MiB stays
    # within 10% from 16 to 4,096 nodes (86 to 81 GB/s), where the flat ring's falls 20-fold.
    big = 1 << 28

    def busbw(m: int, algo: str) -> float:
        p = rows[m]["ranks"]
        return 2 * (p - 1) / p * big / rows[m]["times_us"][algo][str(big)] / 1e3

    trees = [busbw(1 << i, "two-tree") for i in range(4, 13)]
    assert max(trees) / min(trees) < 1.1
    assert busbw(2, "ring") / busbw(4096, "ring") > 20
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0, text.output
    assert all(len(line) <= 80 for line in text.stdout.splitlines())
    assert "24,576" in text.stdout and "network steps" in text.stdout
    # No row was measured: the table says how far it reaches and that its error is unknown (it said
    # nothing, 63 ms at 24,576 ranks read as sure as a measured time).
    said = " ".join(text.stdout.split())
    assert "every time is a model of the fits' links (measured at 8 and 16 ranks, up to x1536 the ranks" in said
    assert "no row checked against a run: error unknown" in said
    assert doc["certainty"] == (
        "every time is a model of the fits' links (measured at 8 and 16 ranks, up to x1536 the ranks "
        "measured), no row checked against a run: error unknown"
    )


def _fit(nodes: int, alpha: float, beta: float) -> Fit:
    return Fit("all-reduce", "ring", "nccl", 8 * nodes, alpha, beta, None, 1.0, 1.0, 2.0, 8, 1 << 30, nodes=nodes)


def test_hierarchical_equals_the_ring_inside_plus_the_rings_across() -> None:
    classes = link_classes([_fit(1, 2.0, 1e-5), _fit(2, 10.0, 1e-4)])
    n = float(1 << 20)
    # 4 nodes of 6: inside 2 x 5 steps of n/6, across 2 x 3 steps of n/24.
    want = 10 * 2.0 + 2 * 5 / 6 * n * 1e-5 + 6 * 10.0 + 2 * 3 / 4 * n / 6 * 1e-4
    assert algorithm_time_us("hierarchical", classes, 4, 6, n) == pytest.approx(want)
    # The flat ring: 46 steps, each as slow as its network hop.
    assert algorithm_time_us("ring", classes, 4, 6, n) == pytest.approx(46 * 10.0 + 2 * 23 / 24 * n * 1e-4)


def test_one_kind_of_fit_is_both_classes_and_says_so() -> None:
    classes = link_classes([_fit(1, 2.0, 1e-5)])
    assert classes.inter == classes.intra and "no fit across nodes" in classes.notes[0]
    with pytest.raises(ConfigError, match="usable fit"):
        link_classes([])
    with pytest.raises(ConfigError, match="fewer than one node"):
        compare(classes, 6, 5, [8])
    assert math.isfinite(algorithm_time_us("two-tree", classes, 1, 6, 8.0) or math.nan)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--op", "broadcast"], "--op"),
        (["--nodes", "2", "--nics", "4", "--nic-gbps", "50"], "--nodes, --nics, --nic-gbps"),
        (["--collnet", "--nccl-arch", "hopper"], "--nccl-arch, --collnet"),
    ],
)
def test_options_the_comparison_does_not_take_are_refused(tmp_path: Path, extra: list[str], named: str) -> None:
    """'--hierarchy 4 --op broadcast' printed the all-reduce comparison and said nothing of --op."""
    fits = _fits(tmp_path)
    args = ["predict", "--fits", str(fits), "--ranks", "64", "--hierarchy", "8", *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        "error: --hierarchy compares all-reduce on nodes of K ranks, from one node up to --ranks, from the fits' "
        f"own links: leave out {named}"
    )
    ok = CliRunner().invoke(
        app, ["predict", "--fits", str(fits), "--ranks", "64", "--hierarchy", "8", "--op", "all-reduce"]
    )
    assert ok.exit_code == 0, ok.output


def test_nodes_of_one_rank_start_at_two_nodes(tmp_path: Path) -> None:
    """'--hierarchy 1' (nodes of one GPU) ended in min()'s ValueError traceback: its first row, one node of
    one rank, is priced by no algorithm (a collective of one rank moves no data), so it had no fastest."""
    classes = link_classes([_fit(1, 2.0, 1e-5), _fit(2, 10.0, 1e-4)])
    rows = compare(classes, 1, 8, [8, 1 << 20])
    assert [r.nodes for r in rows] == [2, 4, 8]
    assert all(r.fastest(s) in ("ring", "hierarchical", "two-tree") for r in rows for s in (8, 1 << 20))
    fits = _fits(tmp_path)
    args = ["predict", "--fits", str(fits), "--ranks", "8", "--hierarchy", "1", "--sizes", "8,1M"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "1 rank a node" in result.stdout and all(len(line) <= 80 for line in result.stdout.splitlines())
    doc = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert [r["nodes"] for r in doc["rows"]] == [2, 4, 8]

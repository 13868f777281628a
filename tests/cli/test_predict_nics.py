"""`predict --nics N --nic-gbps G [--collnet] [--no-nvls]` (issue 32, items 3 and 4): the NICs a node feed NCCL's model
across nodes (its ring search's channels, NVLS-tree, whose heads are the GPUs with a NIC: tuning.cc,
search.cc) and the least time a multi-node prediction may take (``models/link_floor.py``); a CollNet
plugin is declared, never assumed, and NVLS turned off where the runs turned it off; bad values are one
error line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fits_files import fits_file
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.models.link_floor import link_floor
from collbench.models.nccl_graph import NodeFacts

REAL_H100 = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"


def _fits(tmp_path: Path) -> Path:
    return fits_file(REAL_H100, tmp_path / "f.json")


def _predict(tmp_path: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    args = ["predict", "--fits", str(_fits(tmp_path)), "--ranks", "16", "--sizes", "8,16M,1G,8G", "--json", *extra]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout[done.stdout.index("{") :])  # type: ignore[no-any-return]


def test_with_the_nics_nccls_model_searches_its_channels_and_picks_nvls_tree(tmp_path: Path) -> None:
    without = _predict(tmp_path)["predictions"]
    assert all("16 channels assumed (the NICs not known)" in p["basis"] for p in without)
    assert not any("nvls" in p["basis"].split("picks ")[1].split("/")[0] for p in without)
    given = _predict(tmp_path, "--nics", "8", "--nic-gbps", "50")["predictions"]
    # search.cc with 8 NICs of 50 GB/s: a ring of 8 channels x 45 GB/s, doubled to 16 to run; the NVLS
    # graph's 8 heads at 40 GB/s in the switch and 48 a NIC; at 8 GiB NCCL's model picks NVLS-tree.
    big = next(p for p in given if p["size_bytes"] == 8 << 30)
    assert "16 channels (NCCL's search: a ring of 8 x 45 GB/s" in big["basis"]
    assert "NVLS: 8 heads x 40 GB/s, 48 GB/s a NIC" in big["basis"]
    assert "picks nvls_tree/Simple" in big["basis"]
    # The NICs' floor: 2 (2-1)/2 of 8 GiB through 8 x 50 GB/s a node is 21.5 ms; the prediction is above.
    assert big["time_us"] >= (8 << 30) / (8 * 50e3)
    # No CollNet unless a plugin is declared, and no NVLS across nodes (tuning.cc: NVLS across nodes is
    # CollNet's); declared, NCCL's model prices them: at 16 MiB it picks NVLS over the two nodes.
    assert not any("picks collnet" in p["basis"] or "picks nvls/" in p["basis"] for p in given)
    declared = _predict(tmp_path, "--nics", "8", "--nic-gbps", "50", "--collnet")["predictions"]
    mid = next(p for p in declared if p["size_bytes"] == 16 << 20)
    assert "picks nvls/Simple" in mid["basis"]
    # At the measured shape and sizes the prediction is the fit itself, whichever algorithm NCCL picks.
    assert mid["time_us"] == pytest.approx(next(p for p in given if p["size_bytes"] == 16 << 20)["time_us"])


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--nics", "8"], "--nics and --nic-gbps go together"),
        (["--nic-gbps", "50"], "--nics and --nic-gbps go together"),
        (["--nics", "0", "--nic-gbps", "50"], "--nics must be 1 to 1,024"),
        (["--nics", "8", "--nic-gbps", "nan"], "--nic-gbps must be a speed above 0"),
        (["--nics", "8", "--nic-gbps", "-5"], "--nic-gbps must be a speed above 0"),
        (["--nics", "8", "--nic-gbps", "inf"], "--nic-gbps must be a speed above 0"),
    ],
)
def test_bad_nic_values_are_one_error_line(tmp_path: Path, extra: list[str], says: str) -> None:
    done = CliRunner().invoke(app, ["predict", "--fits", str(_fits(tmp_path)), "--ranks", "16", *extra])
    assert done.exit_code == 2, done.output
    assert says in done.output and "Traceback" not in done.output


def test_the_nics_floor_across_nodes() -> None:
    facts = NodeFacts(nics=8, nic_gbps=50.0)
    # All-reduce over 4 nodes: each node's NICs carry 2 (4-1)/4 of the buffer; 400 GB/s together.
    floor = link_floor("all-reduce", 32, 4, "NVIDIA H100 80GB HBM3", facts)
    assert floor is not None and floor.share == pytest.approx(1.5) and floor.gbps == 400.0
    assert floor.time_us(400e3) == pytest.approx(1.5)
    assert "each node's 8 NICs of 50 GB/s" in floor.text()
    # A CollNet switch reduces: a node sends its buffer once (share 1), said in the text.
    reduced = link_floor("all-reduce", 32, 4, "", NodeFacts(nics=8, nic_gbps=50.0, collnet=True))
    assert reduced is not None and reduced.share == 1.0 and "reduced in the switch" in reduced.text()
    # All-gather: (m-1)/m of the buffer into each node, CollNet or not.
    gather = link_floor("all-gather", 32, 4, "", NodeFacts(nics=8, nic_gbps=50.0, collnet=True))
    assert gather is not None and gather.share == pytest.approx(0.75)
    # NICs not known, or an op without a floor: none claimed across nodes.
    assert link_floor("all-reduce", 32, 4, "NVIDIA H100 80GB HBM3") is None
    assert link_floor("broadcast", 32, 4, "NVIDIA H100 80GB HBM3", facts) is None


def test_no_nvls_is_ring_and_tree_on_both_sides_and_its_floor(tmp_path: Path) -> None:
    # `--no-nvls`: the runs set NCCL_NVLS_ENABLE=0 (CoreWeave's GB200 jobs do: benchmarks/bench_predict.py's
    # NO_NVLS), so NCCL's search makes no NVLS graph (tuning.cc prices NVLS and NVLS-tree from it) where it
    # measured and where it is asked. One H100 node from the 2-node fit: NVLS at 1 GiB by default, the ring
    # or tree told it is off; across nodes with the NICs, NVLS-tree at 8 GiB by default, not told it is off.
    one_node = ("--nodes", "1", "--ranks", "8")
    default = _predict(tmp_path, *one_node)["predictions"]
    assert "picks nvls/" in next(p for p in default if p["size_bytes"] == 1 << 30)["basis"]
    off = _predict(tmp_path, *one_node, "--no-nvls")["predictions"]
    for p in off + _predict(tmp_path, "--nics", "8", "--nic-gbps", "50", "--no-nvls")["predictions"]:
        assert "picks ring/" in p["basis"] or "picks tree/" in p["basis"]
        assert "NVLS" not in p["basis"]
    # Without the switch reducing, 8 GPUs' NVLinks carry the ring's 2 (8-1)/8 of the buffer, not once.
    h100 = "NVIDIA H100 80GB HBM3"
    on, without = link_floor("all-reduce", 8, 1, h100), link_floor("all-reduce", 8, 1, h100, NodeFacts(nvls=False))
    assert on is not None and on.share == 1.0 and on.reduced_in_switch
    assert without is not None and without.share == pytest.approx(1.75) and not without.reduced_in_switch


def test_no_nvls_beside_hierarchy_is_one_error_line(tmp_path: Path) -> None:
    # --hierarchy compares ring, hierarchical and two-tree from the fits' own links: NCCL's NVLS is not in it.
    args = ["predict", "--fits", str(_fits(tmp_path)), "--ranks", "16", "--hierarchy", "4", "--no-nvls"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 2, done.output
    assert "leave out --no-nvls" in done.output and "Traceback" not in done.output

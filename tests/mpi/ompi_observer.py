"""Open MPI 4.1 observed running, for the tests that check what it runs (tests/mpi): the skip where it is
not here, the observer, and the function each algorithm Open MPI can be forced to run reaches.

The observer: a preloaded shim (ompi_observe_shim.c) interposes the ``ompi_coll_base_*`` functions
coll/tuned calls through its PLT and tells a small MPI program (ompi_collectives.c, built with mpicc
here) which one ran; the program runs each collective asked at each size asked, on communicators of the
sizes asked split off one mpirun.

The function of each forced algorithm is written out here from Open MPI v4.1.4's
``ompi_coll_tuned_<coll>_intra_do_this`` (coll_tuned_<coll>_decision.c), independently of
collbench.ompi.algorithms and collbench.exporters.ompi_table: the shim reports the outermost
``ompi_coll_base_*`` call coll/tuned made.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

B = "ompi_coll_base_"
FORCED: dict[tuple[str, str], str] = {
    ("all-reduce", "native:basic_linear"): B + "allreduce_intra_basic_linear",
    ("all-reduce", "native:nonoverlapping"): B + "allreduce_intra_nonoverlapping",
    ("all-reduce", "native:recursive_doubling"): B + "allreduce_intra_recursivedoubling",
    ("all-reduce", "native:ring"): B + "allreduce_intra_ring",
    ("all-reduce", "native:segmented_ring"): B + "allreduce_intra_ring_segmented",
    ("all-reduce", "native:rabenseifner"): B + "allreduce_intra_redscat_allgather",
    ("broadcast", "native:basic_linear"): B + "bcast_intra_basic_linear",
    ("broadcast", "native:chain"): B + "bcast_intra_chain",
    ("broadcast", "native:pipeline"): B + "bcast_intra_pipeline",
    ("broadcast", "native:split_binary_tree"): B + "bcast_intra_split_bintree",
    ("broadcast", "native:binary_tree"): B + "bcast_intra_bintree",
    ("broadcast", "native:binomial"): B + "bcast_intra_binomial",
    ("broadcast", "native:knomial"): B + "bcast_intra_knomial",
    ("broadcast", "native:scatter_allgather"): B + "bcast_intra_scatter_allgather",
    ("broadcast", "native:scatter_allgather_ring"): B + "bcast_intra_scatter_allgather_ring",
    ("reduce", "native:linear"): B + "reduce_intra_basic_linear",
    ("reduce", "native:chain"): B + "reduce_intra_chain",
    ("reduce", "native:pipeline"): B + "reduce_intra_pipeline",
    ("reduce", "native:binary"): B + "reduce_intra_binary",
    ("reduce", "native:binomial"): B + "reduce_intra_binomial",
    ("reduce", "native:in-order_binary"): B + "reduce_intra_in_order_binary",
    ("reduce", "native:rabenseifner"): B + "reduce_intra_redscat_gather",
    ("all-gather", "native:linear"): B + "allgather_intra_basic_linear",
    ("all-gather", "native:bruck"): B + "allgather_intra_bruck",
    ("all-gather", "native:recursive_doubling"): B + "allgather_intra_recursivedoubling",
    ("all-gather", "native:ring"): B + "allgather_intra_ring",
    ("all-gather", "native:neighbor"): B + "allgather_intra_neighborexchange",
    ("all-gather", "native:two_proc"): B + "allgather_intra_two_procs",
    ("reduce-scatter", "native:non-overlapping"): B + "reduce_scatter_intra_nonoverlapping",
    ("reduce-scatter", "native:recursive_halving"): B + "reduce_scatter_intra_basic_recursivehalving",
    ("reduce-scatter", "native:ring"): B + "reduce_scatter_intra_ring",
    ("reduce-scatter", "native:butterfly"): B + "reduce_scatter_intra_butterfly",
    # coll_tuned_{alltoall,gather,scatter,barrier}_decision.c, v4.1.4 (the same in v5.0.x)
    ("all-to-all", "native:linear"): B + "alltoall_intra_basic_linear",
    ("all-to-all", "native:pairwise"): B + "alltoall_intra_pairwise",
    ("all-to-all", "native:modified_bruck"): B + "alltoall_intra_bruck",
    ("all-to-all", "native:linear_sync"): B + "alltoall_intra_linear_sync",
    ("all-to-all", "native:two_proc"): B + "alltoall_intra_two_procs",
    ("gather", "native:basic_linear"): B + "gather_intra_basic_linear",
    ("gather", "native:binomial"): B + "gather_intra_binomial",
    ("gather", "native:linear_sync"): B + "gather_intra_linear_sync",
    ("scatter", "native:basic_linear"): B + "scatter_intra_basic_linear",
    ("scatter", "native:binomial"): B + "scatter_intra_binomial",
    ("scatter", "native:linear_nb"): B + "scatter_intra_linear_nb",
    ("barrier", "native:linear"): B + "barrier_intra_basic_linear",
    ("barrier", "native:double_ring"): B + "barrier_intra_doublering",
    ("barrier", "native:recursive_doubling"): B + "barrier_intra_recursivedoubling",
    ("barrier", "native:bruck"): B + "barrier_intra_bruck",
    ("barrier", "native:two_proc"): B + "barrier_intra_two_procs",
    ("barrier", "native:tree"): B + "barrier_intra_tree",
    # coll_tuned_{scan,exscan}_decision.c, v4.1.4
    ("scan", "native:linear"): B + "scan_intra_linear",
    ("scan", "native:recursive_doubling"): B + "scan_intra_recursivedoubling",
    ("exscan", "native:linear"): B + "exscan_intra_linear",
    ("exscan", "native:recursive_doubling"): B + "exscan_intra_recursivedoubling",
}
"""(collbench's op, forced algorithm) -> the ``ompi_coll_base_*`` function Open MPI 4.1 runs for it."""


def need_open_mpi() -> str:
    """Skip the test unless Open MPI 4.1 is here (mpirun, mpicc, ompi_info); its version."""
    if not (shutil.which("mpirun") and shutil.which("mpicc") and shutil.which("ompi_info")):
        pytest.skip("Open MPI is not installed (openmpi-bin, libopenmpi-dev; .ci/run installs them)")
    version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=60).stdout
    if "4.1." not in version:
        pytest.skip(f"the expected functions are Open MPI 4.1's; this is {version.splitlines()[0] if version else '?'}")
    return version.split()[3] if len(version.split()) > 3 else ""


def build_observer(tmp_path: Path) -> tuple[Path, Path]:
    """The shim and the program, built in ``tmp_path``."""
    shim, program = tmp_path / "shim.so", tmp_path / "collectives"
    cc = os.environ.get("CC", "cc")
    subprocess.run(
        [cc, "-O1", "-Wall", "-shared", "-fPIC", "-o", shim, HERE / "ompi_observe_shim.c", "-ldl"],
        check=True,
        timeout=120,
    )
    subprocess.run(
        ["mpicc", "-O1", "-Wall", "-o", program, HERE / "ompi_collectives.c", "-ldl"], check=True, timeout=120
    )
    return shim, program


def observe(
    built: tuple[Path, Path],
    out: Path,
    world: int,
    comm_sizes: Sequence[int],
    calls: Sequence[str],
    rules: Path | None,
) -> dict[tuple[int, str, int], str]:
    """(communicator size, collective, bytes) -> the function coll/tuned ran, agreed by every rank, of
    ``calls`` (``coll:bytes``) on ``world`` ranks under the rules file ``rules`` (None: Open MPI's own
    choice); each rank's report in ``out``."""
    shim, program = built
    out.mkdir()
    mca = ["--mca", "coll_tuned_use_dynamic_rules", "1"]
    if rules is not None:
        mca += ["--mca", "coll_tuned_dynamic_rules_filename", str(rules)]
    command = [
        "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(world), "--mca", "pml", "ob1",
        "--mca", "btl", "self,vader", "--mca", "mpi_yield_when_idle", "1", *mca, "-x", f"LD_PRELOAD={shim}",
        str(program), str(out), ",".join(map(str, comm_sizes)), *calls,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    seen: dict[tuple[int, str, int], set[str]] = {}
    for rank in range(world):
        for line in (out / f"rank{rank}.txt").read_text().splitlines():
            k, coll, nbytes, function = line.split()
            seen.setdefault((int(k), coll, int(nbytes)), set()).add(function)
    assert all(len(f) == 1 for f in seen.values()), {key: f for key, f in seen.items() if len(f) > 1}
    return {key: next(iter(f)) for key, f in seen.items()}

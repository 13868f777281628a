"""The backends' registry and protocol (collbench.backends): names, auto, usability, the measured row.

The machine is a fake ``Here`` (the protocol's documented questions), so that NCCL's and Open MPI's
answers are checked on a machine with neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from collbench.backends import (
    BACKENDS,
    backend_named,
    backend_names,
    feeds,
    for_torch,
    get_backend,
    measured_on_gpus,
    resolve,
    torch_backend_names,
)
from collbench.backends.base import NCCL_EXPORTS, OMPI_EXPORTS
from collbench.errors import BackendUnavailableError, ConfigError, UnknownNameError
from collbench.ompi.algorithms import OPEN_MPI_4_1, OmpiAlgorithm
from collbench.results.measured import measured_row, point_key
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op


@dataclass
class FakeHere:
    """A machine with ``gpus`` GPUs, NCCL ``nccl`` and Open MPI 4.1 where ``ompi`` says so."""

    gpus_seen: int = 0
    nccl: str = ""
    ompi: bool = False
    env: dict[str, str] = field(default_factory=dict)
    job: tuple[int, int] | None = None

    def gpus(self) -> int:
        return self.gpus_seen

    def check_nccl_usable(self, local_ranks: int) -> None:
        if local_ranks > self.gpus_seen:
            raise BackendUnavailableError(f"{local_ranks} ranks, {self.gpus_seen} GPUs")

    def nccl_version(self) -> str:
        return self.nccl

    def job_shape(self, ranks: int | None) -> tuple[int, int]:
        return self.job if self.job is not None else (ranks or 1, 1)

    def environ(self, name: str, default: str) -> str:
        return self.env.get(name, default)

    def ompi_algorithms(self) -> dict[str, tuple[OmpiAlgorithm, ...]]:
        return dict(OPEN_MPI_4_1)

    def check_mpi_tools(self) -> None:
        if not self.ompi:
            raise BackendUnavailableError("--backend mpi needs Open MPI's mpirun on PATH")

    def check_mpi_world_size(self, world_size: int | None) -> int:
        if world_size is None:
            raise ConfigError("--backend mpi starts mpirun itself")
        return world_size


@dataclass(frozen=True)
class Options:
    world_size: int | None = 2
    algos: tuple[str, ...] = ("all",)
    max_bytes: int = 1 << 20
    cuda_graph: bool = False


def test_the_registry_is_the_one_list_of_backends() -> None:
    assert backend_names() == ("gloo", "nccl", "mpi", "mpich")
    assert torch_backend_names() == ("gloo", "nccl", "auto")
    assert [b.name for b in BACKENDS] == list(backend_names())
    assert get_backend(" NCCL ").name == "nccl"
    with pytest.raises(UnknownNameError, match="known: gloo, nccl, mpi, mpich"):
        get_backend("mvapich")
    assert backend_named("rccl") is None
    assert for_torch("nccl") is get_backend("nccl") and for_torch("ucc") is None


def test_rows_of_an_imported_gpu_library_are_gpu_rows() -> None:
    assert measured_on_gpus("nccl") and measured_on_gpus("rccl")
    assert not measured_on_gpus("gloo") and not measured_on_gpus("mpi")


def test_each_backend_feeds_its_own_exports_only() -> None:
    assert feeds("nccl", NCCL_EXPORTS) and not feeds("nccl", OMPI_EXPORTS)
    assert feeds("mpi", OMPI_EXPORTS) and not feeds("mpi", NCCL_EXPORTS)
    assert not feeds("gloo", NCCL_EXPORTS) and not feeds("rccl", NCCL_EXPORTS)


def test_auto_is_nccl_where_the_gpus_are_enough_else_gloo() -> None:
    assert resolve("auto", 2, FakeHere(gpus_seen=2)).name == "nccl"
    assert resolve("auto", 4, FakeHere(gpus_seen=2)).name == "gloo"
    assert resolve("auto", 1, FakeHere()).name == "gloo"


def test_a_backend_that_cannot_run_here_says_why_in_one_line() -> None:
    with pytest.raises(BackendUnavailableError, match="needs CUDA GPUs"):
        resolve("nccl", 2, FakeHere())
    with pytest.raises(BackendUnavailableError, match="4 ranks, 2 GPUs"):
        resolve("nccl", 4, FakeHere(gpus_seen=2))
    with pytest.raises(BackendUnavailableError, match="mpirun"):
        resolve("mpi", 2, FakeHere())
    assert resolve("mpi", 2, FakeHere(ompi=True)).name == "mpi"
    with pytest.raises(UnknownNameError, match="known: gloo, nccl, auto"):
        resolve("mpi", 2, FakeHere(ompi=True), torch_only=True)


def test_only_nccl_sees_collnet() -> None:
    here = FakeHere(env={"NCCL_COLLNET_ENABLE": "1"})
    assert get_backend("nccl").comm_shape(16, 2, here).collnet
    assert not get_backend("gloo").comm_shape(16, 2, here).collnet
    assert not get_backend("nccl").comm_shape(16, 2, FakeHere()).collnet


def test_forced_variants_are_the_backends_own() -> None:
    here = FakeHere(gpus_seen=2, nccl="2.21.5")
    skipped: list[str] = []
    per_op = get_backend("nccl").sweep_algos(Options(algos=("native:ring/simple",)), [Op.ALL_REDUCE], skipped, here)
    assert per_op == {Op.ALL_REDUCE: ["native:ring/simple"]}
    with pytest.raises(ConfigError, match="needs --backend nccl"):
        get_backend("gloo").sweep_algos(Options(algos=("native:ring",)), [Op.ALL_REDUCE], [], here)
    mpi = get_backend("mpi").sweep_algos(Options(algos=("native:ring",)), [Op.ALL_REDUCE], [], here)
    assert mpi == {Op.ALL_REDUCE: ["native:ring"]}
    with pytest.raises(ConfigError, match="collbench's own"):
        get_backend("mpi").sweep_algos(Options(algos=("ring",)), [Op.ALL_REDUCE], [], here)


def test_a_tune_over_open_mpi_measures_only_open_mpis_algorithms() -> None:
    shape = get_backend("mpi").comm_shape(4, 1, FakeHere())
    names = get_backend("mpi").tune_candidates(("all-reduce",), ("ring", "native"), shape, FakeHere())
    assert names == ("native", *(a.algo for a in OPEN_MPI_4_1["allreduce"]))
    gloo = get_backend("gloo").tune_candidates(("all-reduce",), ("ring", "native"), shape, FakeHere())
    assert gloo == ("ring", "native")


def test_an_nccl_variant_means_nothing_in_an_open_mpi_profile() -> None:
    assert get_backend("mpi").foreign_native("native:ring/simple@16ch") is not None
    assert get_backend("mpi").foreign_native("native:ring") is None
    assert get_backend("mpi").foreign_native("native") is None
    assert get_backend("nccl").foreign_native("native:ring/simple@16ch") is None


@dataclass(frozen=True)
class Stats:
    time_us: float
    time_us_mean: float
    time_us_min: float
    time_us_max: float


def _row(op: Op, size: int, world: int, samples: list[float]) -> ResultRow:
    return measured_row(
        op=op,
        algo="ring",
        backend="gloo",
        world_size=world,
        dtype="float32",
        redop="sum",
        in_place=False,
        size_bytes=size,
        count=size // 4,
        samples_us=samples,
        stats=Stats(samples[len(samples) // 2], sum(samples) / len(samples), min(samples), max(samples)),
        iters=len(samples),
        wrong=0,
        nodes=1,
        root=3,
        layout="rank-order",
        segment_bytes=None,
        host="h",
    )


def test_the_measured_row_has_nccl_tests_bandwidths_and_its_resume_key() -> None:
    row = _row(Op.ALL_REDUCE, 1_000_000, 4, [10.0, 10.0, 10.0])
    # algbw = bytes / time: 1e6 B in 10 us is 100 GB/s; all-reduce's bus factor 2(n-1)/n = 1.5 at n=4.
    assert row.algbw_gbps == pytest.approx(100.0)
    assert row.busbw_gbps == pytest.approx(150.0)
    assert row.root == 0 and row.timed_samples is None
    key = point_key(
        op=Op.ALL_REDUCE,
        algo="ring",
        backend="gloo",
        world_size=4,
        dtype="float32",
        redop="sum",
        in_place=False,
        size_bytes=1_000_000,
        root=3,
        layout="rank-order",
        segment_bytes=None,
    )
    assert row.key == key


def test_a_barrier_row_has_no_bandwidth_and_a_rooted_row_keeps_its_root() -> None:
    barrier = _row(Op.BARRIER, 0, 4, [5.0, 6.0])
    assert barrier.algbw_gbps == 0.0 and barrier.busbw_gbps == 0.0
    assert _row(Op.BROADCAST, 4096, 4, [1.0]).root == 3


def test_the_profile_schema_names_every_backend() -> None:
    """The schema's list is the registry's second spelling (a profile of a backend it lacks fails to load)."""
    import json

    from collbench.profile.document import SCHEMA_PATH

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["properties"]["backend"]["enum"] == list(backend_names())


def test_the_profile_schemas_backends_are_the_registrys() -> None:
    """profile/schema.json (and its published copy under profiles/) lists the backends a profile may name:
    the registry's, in its order, so that a new backend's profiles load and a removed one's do not."""
    import json
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    for path in (repo / "collbench" / "profile" / "schema.json", repo / "profiles" / "schema.json"):
        schema = json.loads(path.read_text(encoding="utf-8"))
        assert tuple(schema["properties"]["backend"]["enum"]) == backend_names(), path


def test_a_forced_variant_is_known_by_the_backend_whose_library_runs_it() -> None:
    from collbench.backends import forced_problem

    assert forced_problem("native:segmented_ring") is None  # Open MPI's coll/tuned
    assert forced_problem("native:reduce_scatter_allgather") is None  # MPICH's
    assert forced_problem("native:ring/ll128@4ch") is None  # NCCL's
    # A name no library has: in the words of the backend that reads that spelling (NCCL's parser).
    problem = forced_problem("native:bogus")
    assert problem and "bogus" in problem
    assert [b.name for b in BACKENDS if b.forced_problem("native:segmented_ring") is None] == ["mpi"]


def test_a_librarys_refusal_is_said_once_whatever_its_reason() -> None:
    """A tune's rounds each ran MPICH's smp all-reduce on 2 ranks and each said its refusal: 'tune
    --backend mpich --ranks 2 --quick' printed 'native:smp all-reduce: MPICH cannot run it on 2 ranks
    (mpiexec.mpich ended (exit code 15)); skipped' and then the same with '(Failure during collective)'
    (mpich_sweep.py words the one, measure.py the other); cli/tune.py says a note once by what it says."""
    from collbench.backends.base import note_said

    ended = "native:smp all-reduce: MPICH cannot run it on 2 ranks (mpiexec.mpich ended (exit code 15)); skipped"
    failed = "native:smp all-reduce: MPICH cannot run it on 2 ranks (Failure during collective); skipped"
    assert note_said(ended) == note_said(failed) == "native:smp all-reduce: MPICH cannot run it on 2 ranks"
    in_place = "native:brucks all-to-all (its points in place): MPICH cannot run it on 3 ranks (Invalid buffer)"
    in_place += "; skipped"
    assert note_said(in_place) != note_said(ended)
    assert note_said(failed.replace("2 ranks", "4 ranks")) != note_said(failed)  # another shape: its own note
    other = "hierarchical all-reduce: needs ranks on two or more nodes; skipped"
    assert note_said(other) == other

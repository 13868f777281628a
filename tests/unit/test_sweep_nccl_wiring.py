"""How the sweep wires the NCCL path, checked without a GPU: fakes stand in for CUDA and NCCL.

Communicators per native variant (made once, destroyed after their last point), NCCL's logged
choice in native rows, variants this NCCL lacks refused up front, the kernel build and the TUNING
log set up in the parent, CUDA synchronised before the timing barrier, and --cuda-graph's scope.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import torch.distributed as dist

from collbench.errors import NotApplicableError, RankError, UnknownNameError
from collbench.nccl.variants import NativeVariant, is_native
from collbench.results.row import ResultRow
from collbench.runtime.cuda import kernel_build, nccl
from collbench.runtime.cuda import kernels as cuda_kernels
from collbench.runtime.executor.buffers import PointBuffers
from collbench.runtime.host import environment
from collbench.runtime.launch.ranks import RankContext
from collbench.runtime.sweep import plan, timed, worker
from collbench.runtime.sweep import run as sweep
from collbench.runtime.sweep.plan import SweepConfig, SweepJob
from collbench.runtime.sweep.run import SweepProgress
from collbench.schedules.ops import Op

CUDA = torch.device("cuda", 0)  # only a name here: nothing runs on it


# --cuda-graph ----------------------------------------------------------------------------------


def test_graphs_time_native_points_only_and_say_so() -> None:
    graphed, note = worker.graph_policy(True, CUDA, ["ring", "native", "native:tree", "ring", "two-tree"])
    assert graphed == {"native", "native:tree"}
    assert "ring, two-tree" in note and "without CUDA graphs" in note


def test_graphs_without_own_algorithms_need_no_note() -> None:
    assert worker.graph_policy(True, CUDA, ["native", "native:ring"]) == ({"native", "native:ring"}, "")


@pytest.mark.parametrize(("flag", "device"), [(False, CUDA), (True, torch.device("cpu"))])
def test_no_graphs_without_the_flag_or_on_cpu(flag: bool, device: torch.device) -> None:
    assert worker.graph_policy(flag, device, ["ring", "native"]) == (set(), "")


# Communicators ---------------------------------------------------------------------------------


class FakeGroups:
    """Stands in for ``nccl.variant_group``: records which communicators exist, and in which env."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.open: set[str] = set()

    @contextlib.contextmanager
    def variant_group(self, variant: NativeVariant, ranks: list[int] | None = None) -> Iterator[Any]:
        self.log.append(("create", variant.name))
        self.open.add(variant.name)
        try:
            yield None  # the default group: under gloo, the native call runs for real
        finally:
            self.open.discard(variant.name)
            self.log.append(("destroy", variant.name))


def test_one_communicator_per_variant_destroyed_after_its_last_point(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGroups()
    monkeypatch.setattr(nccl, "variant_group", fake.variant_group)
    algos = ["native:ring", "native:ring", "native", "native:tree", "native:ring", "native:tree", "ring"]
    with worker.NativeGroups(algos) as groups:
        for index, algo in enumerate(algos):
            if is_native(algo):
                groups.group(algo)
            groups.done_with(index)
            if index == 4:
                assert fake.open == {"native:tree"}, "native:ring is destroyed after its last point (4)"
    assert fake.log == [
        ("create", "native:ring"),
        ("create", "native:tree"),
        ("destroy", "native:ring"),
        ("destroy", "native:tree"),
    ]


def test_a_failing_rank_leaves_its_communicators_to_its_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    # Destroying a communicator whose peer died can hang: a failing rank exits without it.
    fake = FakeGroups()
    monkeypatch.setattr(nccl, "variant_group", fake.variant_group)
    with pytest.raises(RuntimeError, match="boom"), worker.NativeGroups(["native:ring", "native:ring"]) as groups:
        groups.group("native:ring")
        raise RuntimeError("boom")
    assert fake.open == {"native:ring"} and fake.log == [("create", "native:ring")]


def test_groups_still_open_at_the_end_are_destroyed(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGroups()
    monkeypatch.setattr(nccl, "variant_group", fake.variant_group)
    with worker.NativeGroups(["native:ring", "native:tree"]) as groups:
        groups.group("native:ring")
        groups.group("native:tree")
    assert fake.open == set()


# The timing barrier ----------------------------------------------------------------------------


class _Timer:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def time_iterations(self, fn: Callable[[], object], iters: int) -> list[float]:
        self.calls.append("time")
        return [1.0] * iters

    def sample_iters(self, iters: int) -> list[int]:
        return [1] * iters


def test_cuda_is_synchronised_before_each_timing_barrier(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(f"sync {device}"))
    monkeypatch.setattr(dist, "barrier", lambda group=None: calls.append("barrier"))

    monkeypatch.setattr(timed, "_slowest_per_iteration", lambda times, group: None)
    ctx = RankContext(rank=0, world_size=1, local_rank=0, backend="nccl", device=CUDA, timeout_s=5)
    samples = timed.time_point(ctx, lambda: None, _Timer(calls), None, 10.0)
    assert samples and calls[:3] == ["sync cuda:0", "barrier", "time"]
    assert calls.count("sync cuda:0") == calls.count("barrier") == calls.count("time") >= 1


def test_no_cuda_synchronise_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append("sync"))
    monkeypatch.setattr(dist, "barrier", lambda group=None: calls.append("barrier"))
    monkeypatch.setattr(timed, "_slowest_per_iteration", lambda times, group: None)
    ctx = RankContext(rank=0, world_size=1, local_rank=0, backend="gloo", device=torch.device("cpu"), timeout_s=5)
    timed.time_point(ctx, lambda: None, _Timer(calls), 2, 10.0)
    assert calls == ["barrier", "time"]


# A whole (one-rank, gloo) sweep_worker with forced variants and a fake NCCL log ------------------


def _tuning_line(func: str, size: int, algo: str, proto: str) -> str:
    return f"host:1:2 [0] NCCL INFO {func}: {size} Bytes -> Algo {algo} proto {proto} channel{{Lo..Hi}}={{0..1}}\n"


def _sweep_worker(
    tmp_path: Path, variants: tuple[str, ...], nccl_log_dir: Path | None = None, **config: Any
) -> tuple[list[ResultRow], list[dict[str, Any]]]:
    """Rank 0's rows and events of a one-rank gloo sweep of all-reduce whose job runs ``variants`` (put in
    after the checks, which allow NCCL's variants on NCCL alone; gloo stands in for it here), 64 B to
    256 B unless ``config`` says otherwise; needs ``one_rank_gloo``."""
    settings: dict[str, Any] = {"algos": ("native",), "min_bytes": 64, "max_bytes": 256, "iters": 1} | config
    job = plan.validate(SweepConfig(world_size=1, backend="gloo", stream=tmp_path / "s.jsonl", **settings))
    job = dataclasses.replace(job, algos=((Op.ALL_REDUCE, variants),), nccl_log_dir=nccl_log_dir)
    events: list[dict[str, Any]] = []
    cpu = torch.device("cpu")
    ctx = RankContext(
        rank=0, world_size=1, local_rank=0, backend="gloo", device=cpu, timeout_s=30, progress=events.append
    )
    ctx.control = dist.group.WORLD
    return worker.sweep_worker(ctx, job), events


def test_sweep_worker_records_nccl_choices_and_manages_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_rank_gloo: None
) -> None:
    fake = FakeGroups()
    monkeypatch.setattr(nccl, "variant_group", fake.variant_group)
    log_dir = tmp_path / "nccl"
    log_dir.mkdir()
    log = log_dir / "nccl.host.1.log"
    real_native_call = worker._native_call

    def logging_native_call(bufs: PointBuffers, *args: Any) -> Callable[[], None]:
        call = real_native_call(bufs, *args)
        inp = bufs.input
        # What rank 0's NCCL writes per call: Tree/LL128 for plain native, Ring/LL for the forced ring.
        algo, proto = ("Tree", "LL128") if args[-1] is None and not fake.open else ("Ring", "LL")

        def logged() -> None:
            with log.open("a") as f:
                f.write(_tuning_line("AllReduce", inp.numel() * inp.element_size(), algo, proto))
            call()

        return logged

    monkeypatch.setattr(worker, "_native_call", logging_native_call)
    variants = ("ring", "native", "native:ring", "native:*/ll")
    rows, events = _sweep_worker(tmp_path, variants, log_dir, algos=("ring", "native"), iters=2, warmup=1)
    by_algo: dict[str, list[ResultRow]] = {}
    for row in rows:
        by_algo.setdefault(row.algo, []).append(row)
    assert set(by_algo) == {"ring", "native", "native:ring", "native:*/ll"}
    assert all(r.wrong == 0 for r in rows)
    assert {(r.nccl_algo, r.nccl_proto) for r in by_algo["ring"]} == {("", "")}
    assert {(r.nccl_algo, r.nccl_proto) for r in by_algo["native"]} == {("Tree", "LL128")}
    # What NCCL logged, not what was asked for: the forced ring logs Ring/LL, the forced LL gets its algorithm.
    assert {(r.nccl_algo, r.nccl_proto) for r in by_algo["native:ring"]} == {("Ring", "LL")}
    assert {(r.nccl_algo, r.nccl_proto) for r in by_algo["native:*/ll"]} == {("Ring", "LL")}
    assert fake.log == [
        ("create", "native:ring"),
        ("destroy", "native:ring"),
        ("create", "native:*/ll"),
        ("destroy", "native:*/ll"),
    ]
    assert not any(e["kind"] == "note" and "graph" in e["text"] for e in events)


def test_forced_fields_stay_when_nccl_logs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_rank_gloo: None
) -> None:
    fake = FakeGroups()
    monkeypatch.setattr(nccl, "variant_group", fake.variant_group)
    (tmp_path / "empty").mkdir()
    rows, _ = _sweep_worker(tmp_path, ("native", "native:tree/ll128"), tmp_path / "empty", max_bytes=64)
    assert [(r.algo, r.nccl_algo, r.nccl_proto) for r in rows] == [
        ("native", "", ""),
        ("native:tree/ll128", "Tree", "LL128"),
    ]


# Checks and set-up in the parent ---------------------------------------------------------------


@pytest.fixture
def fake_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA build with 2 GPUs and NCCL 2.18.3, as far as the checks made before launching can tell."""
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    monkeypatch.setattr(environment, "nccl_version", lambda: "2.18.3")
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS", sweep.NO_CUDA_KERNELS_ENV):
        monkeypatch.delenv(name, raising=False)


def test_a_variant_newer_than_this_nccl_is_refused(fake_gpus: None) -> None:
    config = SweepConfig(world_size=2, backend="nccl", algos=("native:pat",))
    with pytest.raises(UnknownNameError, match=r"NCCL 2\.18\.3 \(it arrived in 2\.23\)") as info:
        plan.resolve_algos(config, [Op.ALL_GATHER], "nccl")
    assert "nvlstree" in str(info.value)


def test_variants_are_stored_by_their_canonical_name(fake_gpus: None) -> None:
    config = SweepConfig(world_size=2, backend="nccl", algos=("native:NVLS", "native:Ring/LL128", "native:ring/ll128"))
    per_op = plan.resolve_algos(config, [Op.ALL_REDUCE], "nccl")
    assert per_op[Op.ALL_REDUCE] == ["native:nvls", "native:ring/ll128"]


def test_impossible_op_algorithm_pairs_are_skipped_with_one_line(fake_gpus: None) -> None:
    # NCCL src/graph/tuning.cc (ncclTopoTuneModel): broadcast and reduce run Ring only; all-reduce never PAT.
    config = SweepConfig(world_size=2, backend="nccl", algos=("native:tree", "native:ring"))
    skipped: list[str] = []
    per_op = plan.resolve_algos(config, [Op.ALL_REDUCE, Op.BROADCAST, Op.REDUCE], "nccl", skipped)
    assert per_op == {
        Op.ALL_REDUCE: ["native:tree", "native:ring"],
        Op.BROADCAST: ["native:ring"],
        Op.REDUCE: ["native:ring"],
    }
    assert skipped == [
        "native:tree broadcast: NCCL runs broadcast with Ring only, never Tree; skipped",
        "native:tree reduce: NCCL runs reduce with Ring only, never Tree; skipped",
    ]


def test_a_variant_nccl_runs_for_none_of_the_ops_is_one_line(fake_gpus: None) -> None:
    # tuning.cc: if (comm->nNodes == 1 && a == NCCL_ALGO_NVLS_TREE) disable = 1;
    config = SweepConfig(world_size=2, backend="nccl", algos=("native:nvlstree",))
    with pytest.raises(NotApplicableError, match="NCCL disables NVLSTree on a single node"):
        plan.validate(config)


def test_skipped_pairs_reach_the_user_before_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_gpus: None
) -> None:
    fake = FakeLaunch()
    monkeypatch.setattr(sweep, "launch", fake)
    monkeypatch.setattr(cuda_kernels, "build_extension", lambda say: kernel_build.BuildResult(ModuleType("ext")))
    events: list[SweepProgress] = []
    config = SweepConfig(
        world_size=2, backend="nccl", ops=("all",), algos=("native:pat", "native:ring"), stream=tmp_path / "s.jsonl"
    )
    monkeypatch.setattr(environment, "nccl_version", lambda: "2.30.7")
    sweep.run_sweep(config, events.append)
    notes = [e.text for e in events if e.kind == "note"]
    assert notes[0].startswith("native:pat all-reduce: NCCL runs all-reduce with Ring, Tree,")
    # Two local ranks are one node: PAT needs one GPU per node (ncclPatEnable), so all-gather goes too.
    assert "native:pat all-gather: NCCL runs PAT with one GPU per node only (2 ranks on 1 node); skipped" in notes
    # Five of the ops NCCL tunes, then one line for those it runs as grouped send/recv (nothing to force)
    # and one for scan and exscan, which NCCL does not have.
    assert len([n for n in notes if n.startswith("native:pat")]) == 7
    assert "native:pat scan, exscan: NCCL has no scan; skipped" in notes
    assert "native:pat all-to-all, scatter, gather, sendrecv, barrier: NCCL runs these as grouped" in "\n".join(notes)
    assert dict(fake.jobs[0].algos)[Op.ALL_GATHER] == ("native:ring",)


def test_an_unknown_nccl_version_checks_the_newest_table(fake_gpus: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment, "nccl_version", lambda: "")
    config = SweepConfig(world_size=2, backend="nccl", algos=("native:nvls",))
    assert plan.resolve_algos(config, [Op.ALL_REDUCE], "nccl")[Op.ALL_REDUCE] == ["native:nvls"]


def test_nccl_refusal_is_told_from_a_dead_peer() -> None:
    # torch/csrc/distributed/c10d/NCCLUtils.hpp C10D_NCCL_CHECK + NCCL src/init.cc ncclGetErrorString.
    refused = dist.DistBackendError(
        "NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:317, invalid usage (run with "
        "NCCL_DEBUG=WARN for details), NCCL version 2.27.5\nncclInvalidUsage: This usually reflects invalid usage"
    )
    dead = dist.DistBackendError(
        "NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error "
        "(run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5"
    )
    assert nccl.nccl_refused(refused) and not nccl.nccl_refused(dead)


def test_a_variant_nccl_refuses_fails_its_points_not_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_rank_gloo: None
) -> None:
    fake = FakeGroups()

    @contextlib.contextmanager
    def refusing(variant: NativeVariant, ranks: list[int] | None = None) -> Iterator[Any]:
        if variant.algo == "NVLS":
            # What torch raises when NCCL's communicator set-up returns ncclInvalidUsage (NCCLUtils.hpp).
            raise dist.DistBackendError(
                "NCCL error in: NCCLUtils.hpp:317, invalid usage (run with NCCL_DEBUG=WARN for details)"
            )
        with fake.variant_group(variant, ranks) as group:
            yield group

    monkeypatch.setattr(nccl, "variant_group", refusing)
    rows, events = _sweep_worker(tmp_path, ("native:nvls", "native:ring"))
    assert [(r.algo, r.size_bytes) for r in rows] == [("native:ring", 64), ("native:ring", 256)]
    notes = [e["text"] for e in events if e["kind"] == "note"]
    assert notes == [
        "native:nvls (all its points): gloo cannot run it (DistBackendError: NCCL error in: NCCLUtils.hpp:317, "
        "invalid usage (run with NCCL_DEBUG=WARN for details)); skipped"
    ]
    assert fake.log == [("create", "native:ring"), ("destroy", "native:ring")]


class FakeLaunch:
    """Stands in for ``launch``: records the job and the environment the ranks would inherit."""

    def __init__(self, error: Exception | None = None, warn: str = "") -> None:
        self.jobs: list[SweepJob] = []
        self.env: dict[str, str] = {}
        self.error = error
        self.warn = warn

    def __call__(self, world_size: int | None, fn: Any, job: SweepJob, **kwargs: Any) -> list[Any]:
        self.jobs.append(job)
        self.env = dict(os.environ)
        if self.warn and job.nccl_log_dir is not None:
            line = f"host:7:7 [1] NCCL WARN {self.warn}\n"
            (job.nccl_log_dir / "nccl.host.7.log").write_text(line)
        if self.error is not None:
            raise self.error
        return [[], []]


def _builds(monkeypatch: pytest.MonkeyPatch, result: object) -> list[str]:
    calls: list[str] = []

    def build(say: kernel_build.Say) -> kernel_build.BuildResult:
        calls.append(os.environ.get("NCCL_DEBUG_FILE", ""))
        return kernel_build.BuildResult(result if isinstance(result, ModuleType) else None, "" if result else "no")

    monkeypatch.setattr(cuda_kernels, "build_extension", build)
    return calls


def _nccl_config(tmp_path: Path, algos: tuple[str, ...]) -> SweepConfig:
    return SweepConfig(world_size=2, backend="nccl", algos=algos, stream=tmp_path / "s.jsonl")


def test_parent_builds_kernels_and_sets_up_the_tuning_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_gpus: None
) -> None:
    fake = FakeLaunch()
    monkeypatch.setattr(sweep, "launch", fake)
    builds = _builds(monkeypatch, ModuleType("ext"))
    sweep.run_sweep(_nccl_config(tmp_path, ("ring", "native", "native:tree")))
    assert len(builds) == 1
    job = fake.jobs[0]
    assert job.nccl_log_dir is not None
    assert fake.env["NCCL_DEBUG"] == "INFO" and fake.env["NCCL_DEBUG_SUBSYS"] == "TUNING"
    assert fake.env["NCCL_DEBUG_FILE"].startswith(str(job.nccl_log_dir))
    assert sweep.NO_CUDA_KERNELS_ENV not in fake.env
    # All restored and removed afterwards.
    assert "NCCL_DEBUG_FILE" not in os.environ and "NCCL_DEBUG" not in os.environ
    assert not job.nccl_log_dir.exists()


def test_a_failed_build_is_not_retried_by_the_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_gpus: None
) -> None:
    fake = FakeLaunch()
    monkeypatch.setattr(sweep, "launch", fake)
    builds = _builds(monkeypatch, None)
    sweep.run_sweep(_nccl_config(tmp_path, ("ring",)))
    assert len(builds) == 1
    assert fake.env[sweep.NO_CUDA_KERNELS_ENV] == "1"
    assert fake.jobs[0].nccl_log_dir is None, "no native point: no NCCL log"
    assert sweep.NO_CUDA_KERNELS_ENV not in os.environ


def test_only_native_points_build_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_gpus: None) -> None:
    monkeypatch.setattr(sweep, "launch", FakeLaunch())
    builds = _builds(monkeypatch, ModuleType("ext"))
    sweep.run_sweep(_nccl_config(tmp_path, ("native", "native:ring")))
    assert builds == []


def test_the_users_nccl_debug_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_gpus: None) -> None:
    fake = FakeLaunch()
    monkeypatch.setattr(sweep, "launch", fake)
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    events: list[SweepProgress] = []
    sweep.run_sweep(_nccl_config(tmp_path, ("native",)), progress=events.append)
    assert fake.jobs[0].nccl_log_dir is None
    assert "NCCL_DEBUG_FILE" not in fake.env
    assert any(e.kind == "note" and "NCCL_DEBUG" in e.text for e in events)


def test_a_rank_failure_shows_nccls_warnings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_gpus: None) -> None:
    failure = RankError(1, "host", "measuring all-reduce native 1 KiB", "DistBackendError: NCCL error")
    monkeypatch.setattr(sweep, "launch", FakeLaunch(error=failure, warn="Cuda failure 'out of memory'"))
    with pytest.raises(RankError) as info:
        sweep.run_sweep(_nccl_config(tmp_path, ("native",)))
    assert info.value.rank == 1 and info.value.doing == failure.doing
    assert info.value.problem == "DistBackendError: NCCL error; NCCL said: Cuda failure 'out of memory'"


def test_gloo_sets_up_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeLaunch()
    monkeypatch.setattr(sweep, "launch", fake)
    builds = _builds(monkeypatch, ModuleType("ext"))
    sweep.run_sweep(SweepConfig(world_size=2, backend="gloo", algos=("ring", "native"), stream=tmp_path / "s.jsonl"))
    assert builds == [] and fake.jobs[0].nccl_log_dir is None
    assert "NCCL_DEBUG_FILE" not in fake.env


def test_nccl_logs_one_untimed_call_per_native_point_and_nothing_while_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_rank_gloo: None
) -> None:
    # The contract (NCCL src/debug.cc, 2.24+): NCCL reads NCCL_DEBUG/NCCL_DEBUG_FILE at its first log
    # call and again after ncclResetDebugInit(); rank 0 writes one TUNING line per collective call
    # (src/enqueue.cc). The fake NCCL below logs by the environment it read at its last reset.
    from collbench.runtime.cuda import nccl_log

    fake = FakeGroups()
    monkeypatch.setattr(nccl, "variant_group", fake.variant_group)
    read_env: dict[str, str] = {}
    resets: list[str] = []

    def reset() -> None:
        resets.append(os.environ["NCCL_DEBUG"])
        read_env.update(NCCL_DEBUG=os.environ["NCCL_DEBUG"], NCCL_DEBUG_FILE=os.environ["NCCL_DEBUG_FILE"])

    monkeypatch.setattr(nccl_log, "find_reset", lambda: reset)
    log_dir = tmp_path / "nccl"
    log_dir.mkdir()
    real_native_call = worker._native_call
    timed_lines = {"count": 0}

    def logging_native_call(bufs: PointBuffers, *args: Any) -> Callable[[], None]:
        call = real_native_call(bufs, *args)
        inp = bufs.input

        def logged() -> None:
            if read_env.get("NCCL_DEBUG") == "INFO":
                path = Path(read_env["NCCL_DEBUG_FILE"].replace("%h", "host").replace("%p", str(os.getpid())))
                with path.open("a") as f:
                    f.write(_tuning_line("AllReduce", inp.numel() * inp.element_size(), "RING", "LL"))
                timed_lines["count"] += 1
            call()

        return logged

    monkeypatch.setattr(worker, "_native_call", logging_native_call)
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS"):
        monkeypatch.setenv(name, "")
    rows, events = _sweep_worker(tmp_path, ("native", "native:ring"), log_dir, iters=5, warmup=2)
    # 4 points x (1 check call + 2 warm-up + 5 timed): only the 4 untimed calls were logged.
    assert len(rows) == 4 and timed_lines["count"] == 4
    assert {(r.nccl_algo, r.nccl_proto) for r in rows} == {("Ring", "LL")}
    assert resets == ["WARN"] + ["INFO", "WARN"] * 4
    assert not [e for e in events if e["kind"] == "note"]


def test_an_nccl_without_the_reset_says_its_log_stays_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_rank_gloo: None
) -> None:
    from collbench.runtime.cuda import nccl_log

    monkeypatch.setattr(nccl_log, "find_reset", lambda: None)
    monkeypatch.setattr(nccl, "variant_group", FakeGroups().variant_group)
    (tmp_path / "nccl").mkdir()
    _, events = _sweep_worker(tmp_path, ("native",), tmp_path / "nccl", max_bytes=64)
    assert [e["text"] for e in events if e["kind"] == "note"] == [worker.LOG_STAYS_ON]


def test_a_sweep_under_a_launcher_takes_its_node_count_from_the_jobs_membership(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_rank_gloo: None
) -> None:
    # Every sweep (each round and tie round of a tune) gathered every rank's node to every rank
    # (all_gather_object: O(ranks) a rank); under a launcher the job's membership counted them once.
    gathered: list[object] = []
    real = dist.all_gather_object

    def counting(out: list[Any], obj: Any, group: Any = None) -> None:
        gathered.append(obj)
        real(out, obj, group=group)

    monkeypatch.setattr(dist, "all_gather_object", counting)
    job = plan.validate(
        SweepConfig(
            world_size=1,
            backend="gloo",
            stream=tmp_path / "s.jsonl",
            algos=("native",),
            min_bytes=64,
            max_bytes=64,
            iters=1,
        )
    )
    cpu = torch.device("cpu")
    ctx = RankContext(rank=0, world_size=1, local_rank=0, backend="gloo", device=cpu, timeout_s=30)
    ctx.control = dist.group.WORLD
    ctx.nodes = 3  # what ranks.py sets from session.membership.nodes
    rows = worker.sweep_worker(ctx, job)
    assert rows and {r.nodes for r in rows} == {3} and gathered == []
    # Local ranks (no membership): the ranks' nodes gathered, as before.
    ctx.nodes = None
    job = dataclasses.replace(job, stream_path=tmp_path / "t.jsonl")
    assert {r.nodes for r in worker.sweep_worker(ctx, job)} == {1} and gathered == [ctx.node]

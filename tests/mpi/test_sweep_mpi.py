"""`collbench sweep --backend mpi` against the real Open MPI: every forced coll/tuned algorithm measured,
the observing shim (ompi_observe_shim.c) showing that each one is what ran, every result checked.

The function each forced algorithm must reach is tests/mpi/ompi_observer.py's FORCED, written out
there from Open MPI v4.1.4's ``ompi_coll_tuned_<coll>_intra_do_this`` (coll_tuned_<coll>_decision.c),
independently of collbench.ompi.algorithms: the shim reports the outermost ``ompi_coll_base_*`` call
coll/tuned made.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from ompi_observer import FORCED, B, need_open_mpi
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import ConfigError, RankError
from collbench.ompi.algorithms import OPEN_MPI_4_1, parse_ompi_info
from collbench.results.io import read_jsonl
from collbench.results.row import ResultRow
from collbench.runtime.mpi.ompi_sweep import run_mpi_sweep
from collbench.runtime.mpi.ompi_tools import MPIRUN_ARGS_ENV
from collbench.runtime.sweep.plan import SweepConfig, validate

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.mpi

COLL = {"all-reduce": "allreduce", "broadcast": "bcast", "reduce": "reduce", "all-gather": "allgather"}
COLL.update({"reduce-scatter": "reduce_scatter", "all-to-all": "alltoall", "gather": "gather", "scatter": "scatter"})
COLL.update({"barrier": "barrier", "scan": "scan", "exscan": "exscan"})


def _cc(tmp_path: Path, source: str, out: str, compiler: str) -> Path:
    built = tmp_path / out
    subprocess.run(
        [compiler, "-O1", "-Wall", "-shared", "-fPIC", "-o", built, HERE / source, "-ldl"], check=True, timeout=120
    )
    return built


def _sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preload: Path | None, **options: Any
) -> tuple[list[ResultRow], list[dict[str, Any]]]:
    monkeypatch.setenv("COLLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    if preload is not None:
        monkeypatch.setenv(MPIRUN_ARGS_ENV, f"-x LD_PRELOAD={preload}")
    defaults: dict[str, Any] = {
        "backend": "mpi",
        "world_size": 2,
        "min_bytes": 64,
        "max_bytes": 4096,
        "step_factor": 64.0,
        "iters": 3,
        "warmup": 1,
        "in_place": (False, True),
        "stream": tmp_path / "rows.jsonl",
    }
    defaults.update(options)
    events: list[dict[str, Any]] = []
    rows = run_mpi_sweep(validate(SweepConfig(**defaults)), events.append)
    return rows, events


def test_every_forced_algorithm_is_measured_is_what_ran_and_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = need_open_mpi()
    shim = _cc(tmp_path, "ompi_observe_shim.c", "shim.so", os.environ.get("CC", "cc"))
    rows, events = _sweep(tmp_path, monkeypatch, shim, ops=("all",), algos=("all",))
    measured = {(r.op, r.algo) for r in rows}
    # Every algorithm Open MPI 4.1 can be forced to run for collbench's ops, and its own choice per op.
    # sendrecv (MPI_Sendrecv) is point-to-point: Open MPI's own call only, no coll/tuned function.
    assert measured == set(FORCED) | {(op, "native") for op in COLL} | {("sendrecv", "native")}
    ran = [(e["row"]["op"], e["row"]["algo"], e["ran"]) for e in events if e["kind"] == "row"]
    # 2 sizes (barrier: one, at 0 bytes), out of place and in place
    assert len(ran) == len(rows) == sum(2 if op == "barrier" else 4 for op, _ in measured)
    assert {(r.size_bytes, r.count) for r in rows if r.op == "barrier"} == {(0, 0)}
    for op, algo, function in ran:
        if op == "sendrecv":
            assert function == "none", function
        elif algo == "native":
            assert function.startswith(f"{B}{COLL[op]}_"), (op, function)  # Open MPI's fixed decision
        else:
            assert function == FORCED[(op, algo)], (op, algo, function)
    assert all(r.wrong == 0 for r in rows), [(r.op, r.algo, r.size_bytes, r.wrong) for r in rows if r.wrong]
    # Rows like every other backend's: read back from the stream through the field checks.
    streamed = list(read_jsonl(tmp_path / "rows.jsonl"))
    assert streamed == rows
    for row in rows:
        assert ResultRow.from_dict(row.to_dict()) == row
        assert (row.backend, row.backend_version, row.world_size, row.nodes) == ("mpi", version, 2, 1)
        assert row.iters == 3 and row.time_us_min <= row.time_us <= row.time_us_max
        assert (row.busbw_gbps > 0) == (row.op != "barrier"), row  # barrier: latency only
    # A forced segment size is kept where the algorithm reads one, and only there.
    assert {r.segment_bytes for r in rows} == {None}
    # Fan-outs the rows do not name are said once, with Open MPI's value.
    notes = [e["text"] for e in events if e["kind"] == "note"]
    for line in (
        "native:chain bcast runs with Open MPI's chain fan-out 4 (coll_tuned_bcast_algorithm_chain_fanout)",
        "native:chain reduce runs with Open MPI's chain fan-out 4 (coll_tuned_reduce_algorithm_chain_fanout)",
        "native:knomial bcast runs with Open MPI's radix 4 (coll_tuned_bcast_algorithm_knomial_radix)",
        "native:linear_sync alltoall runs with Open MPI's outstanding-request limit 0 (none) "
        "(coll_tuned_alltoall_algorithm_max_requests)",
        "native:linear_nb scatter runs with Open MPI's blocking-send interval 0 (none) "
        "(coll_tuned_scatter_algorithm_max_requests)",
    ):
        assert line in notes


def test_segment_size_is_forced_where_the_algorithm_takes_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_open_mpi()
    rows, _ = _sweep(
        tmp_path,
        monkeypatch,
        None,
        ops=("all-reduce",),
        algos=("native:ring", "native:segmented_ring"),
        segment_bytes=1024,
        max_bytes=64,
    )
    assert {(r.algo, r.segment_bytes) for r in rows} == {("native:ring", None), ("native:segmented_ring", 1024)}


def test_a_wrong_result_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_open_mpi()
    broken = _cc(tmp_path, "corrupt_allreduce.c", "corrupt.so", "mpicc")
    rows, _ = _sweep(tmp_path, monkeypatch, broken, ops=("all-reduce", "broadcast"), algos=("native", "native:ring"))
    # Rank 1's last element of every all-reduce is off by one; broadcasts are untouched.
    assert {(r.op, r.wrong) for r in rows} == {("all-reduce", 1), ("broadcast", 0)}


def test_a_wrong_block_or_shifted_result_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_open_mpi()
    broken = _cc(tmp_path, "corrupt_blocks.c", "corrupt.so", "mpicc")
    ops = ("all-to-all", "gather", "scatter", "sendrecv", "barrier")
    rows, _ = _sweep(tmp_path, monkeypatch, broken, world_size=3, ops=ops, algos=("native",))
    # One element off on one rank (the root's for gather) per call; barrier has nothing to check.
    wrong = {(r.op, r.wrong) for r in rows}
    assert wrong == {("all-to-all", 1), ("gather", 1), ("scatter", 1), ("sendrecv", 1), ("barrier", 0)}, rows


def test_block_ops_are_whole_blocks_and_sendrecv_takes_no_forced_algorithm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_open_mpi()
    rows, _ = _sweep(
        tmp_path,
        monkeypatch,
        None,
        world_size=3,
        ops=("all-to-all", "sendrecv"),
        algos=("native", "native:pairwise"),
        min_bytes=64,
        max_bytes=64,
    )
    # 64 B of float32 is 16 elements: 15 on 3 ranks, as nccl-tests' alltoall counts; sendrecv keeps 16.
    assert {(r.op, r.algo, r.count, r.size_bytes) for r in rows} == {
        ("all-to-all", "native", 15, 60),
        ("all-to-all", "native:pairwise", 15, 60),
        ("sendrecv", "native", 16, 64),
    }
    job = validate(SweepConfig(backend="mpi", world_size=3, ops=("all-to-all", "sendrecv"), algos=("native:pairwise",)))
    assert any("native:pairwise sendrecv" in n and "point-to-point" in n for n in job.notes), job.notes


def test_an_algorithm_open_mpi_refuses_is_skipped_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_open_mpi()
    rows, events = _sweep(
        tmp_path, monkeypatch, None, world_size=3, ops=("all-gather",), algos=("native:two_proc", "native:ring")
    )
    assert {r.algo for r in rows} == {"native:ring"}
    notes = [e["text"] for e in events if e["kind"] == "note" and "two_proc" in e["text"]]
    assert len(notes) == 1 and "MPI_ERR_UNSUPPORTED_OPERATION" in notes[0] and "3 ranks" in notes[0]


def test_resume_measures_only_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_open_mpi()
    first, _ = _sweep(tmp_path, monkeypatch, None, ops=("all-reduce",), algos=("native:ring",))
    again, events = _sweep(
        tmp_path, monkeypatch, None, ops=("all-reduce",), algos=("native:ring", "native"), resume=True
    )
    assert again[: len(first)] == first
    assert {e["row"]["algo"] for e in events if e["kind"] == "row"} == {"native"}


def test_ompi_info_lists_what_collbench_names(tmp_path: Path) -> None:
    need_open_mpi()
    text = subprocess.run(
        ["ompi_info", "--param", "coll", "tuned", "--level", "9", "--parsable"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert parse_ompi_info(text) == OPEN_MPI_4_1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--algo", "native:nosuch"],
            "unknown Open MPI algorithm for all-reduce 'native:nosuch'; known: native:basic_linear",
        ),
        (["--algo", "ring"], "ring is collbench's own: run it with --backend gloo"),
        (["-d", "bfloat16"], "MPI has no bfloat16 type"),
        (["-o", "avg"], "MPI has no avg reduction"),
        (["-e", "8G"], "is 2147483648 float32 elements; an MPI count is a C int (at most 2147483647)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    need_open_mpi()
    result = CliRunner().invoke(app, ["sweep", "--backend", "mpi", "--ranks", "2", *args])
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_no_mpirun_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no Open MPI programs
    result = CliRunner().invoke(app, ["sweep", "--backend", "mpi", "--ranks", "2"])
    assert result.exit_code == 2, result.output
    assert "needs Open MPI's mpirun, mpicc, ompi_info on PATH" in " ".join(result.output.split())


def test_ranks_measure_at_real_time_priority_where_permitted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_open_mpi()
    from collbench.runtime.host.rank_priority import permitted
    from collbench.runtime.mpi.harness import HarnessJob, realtime_ranks
    from collbench.runtime.mpi.ompi_tools import build_harness, find_tools, mpirun_command, ompi_environment

    monkeypatch.setenv("COLLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    tools = find_tools()
    built = build_harness(tools, lambda _: None)
    for asked in (True, False):
        cmd = mpirun_command(tools, built, 2, ["float32", "sum", "0", "0", str(int(asked)), "allreduce:0:0"], [])
        with HarnessJob(cmd, 60.0, ompi_environment()) as job:
            assert job.start().realtime == (asked and permitted())
    monkeypatch.setenv("COLLBENCH_REALTIME", "0")
    assert realtime_ranks(2) is False


def test_under_a_launcher_it_is_refused_before_anything_starts() -> None:
    # collbench starts mpirun itself; under one (or torchrun) the CLI leaves world_size to the launcher.
    with pytest.raises(ConfigError, match="starts mpirun itself"):
        validate(SweepConfig(backend="mpi", world_size=None))


def _processes_running(path_part: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if path_part in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue  # a process that ended meanwhile
    return found


def test_a_hung_rank_ends_the_job_and_keeps_what_was_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_open_mpi()
    from collbench.runtime.mpi.harness import HarnessJob

    hang = _cc(tmp_path, "hang_reduce.c", "hang.so", "mpicc")
    started: list[int] = []
    real_init = HarnessJob.__init__

    def noting_init(self: HarnessJob, cmd: list[str], timeout_s: float, env: dict[str, str]) -> None:
        real_init(self, cmd, timeout_s, env)
        started.append(self._proc.pid)

    monkeypatch.setattr(HarnessJob, "__init__", noting_init)
    with pytest.raises(RankError, match=r"measuring reduce native 64 B out-of-place: no answer within 5 s"):
        _sweep(tmp_path, monkeypatch, hang, ops=("all-reduce", "reduce"), algos=("native",), timeout_s=5.0)
    # What was measured before the hang is in the stream; no rank is left running, and mpirun, ended
    # with SIGTERM, removed its session directory (a SIGKILL leaves /tmp/ompi.<host>.<uid>/pid.<pid>).
    assert {(r.op, r.wrong) for r in read_jsonl(tmp_path / "rows.jsonl")} == {("all-reduce", 0)}
    assert _processes_running(str(tmp_path / "cache")) == []
    assert len(started) == 1 and list(Path(tempfile.gettempdir()).glob(f"ompi.*/pid.{started[0]}")) == []


@pytest.mark.parametrize(("dtype", "redop"), [("int32", "prod"), ("float64", "min"), ("int64", "max")])
def test_every_dtype_and_reduction_mpi_has_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str, redop: str
) -> None:
    need_open_mpi()
    rows, _ = _sweep(
        tmp_path, monkeypatch, None, world_size=3, ops=("all",), algos=("native",), dtype=dtype, redop=redop, root=1
    )
    assert {r.op for r in rows} == {*COLL, "sendrecv"} and {(r.dtype, r.redop) for r in rows} == {(dtype, redop)}
    assert all(r.wrong == 0 for r in rows)
    assert {r.root for r in rows if r.op in ("broadcast", "reduce", "gather", "scatter")} == {1}


def test_the_cli_runs_it_and_writes_the_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_open_mpi()
    monkeypatch.setenv("COLLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "rows.csv"
    args = ["sweep", "--backend", "mpi", "--ranks", "2", "--algo", "native,native:ring", "-b", "1K", "-e", "1K"]
    result = CliRunner().invoke(app, [*args, "-n", "5", "--stream", str(tmp_path / "s.jsonl"), "-O", str(out)])
    assert result.exit_code == 0, result.output
    assert "all-reduce · native:ring · mpi · 2 ranks · float32 · sum" in result.output
    assert "wrong elements: 0 (OK)" in result.output
    from collbench.results.io import read_rows

    assert {(r.algo, r.in_place, r.iters) for r in read_rows(out)} == {
        (algo, in_place, 5) for algo in ("native", "native:ring") for in_place in (False, True)
    }

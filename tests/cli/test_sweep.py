"""`collbench sweep` through CliRunner: bad inputs exit 2 before any rank starts; tiny sweeps in every format."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows

RUNNER = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-b", "1M", "-e", "1K"], "above"),
        (["--op", "all-to-everyone"], "unknown op"),
        (["--algo", "butterfly"], "unknown algorithm"),
        (["-d", "float8"], "unknown dtype"),
        # -d is one dtype: a list read as one unknown name that listed bfloat16 among the known.
        (["-d", "float32,bfloat16"], "takes one dtype a sweep, got 2: float32, bfloat16; run one sweep per dtype"),
        (["-o", "xor"], "unknown reduction"),
        (["-b", "6", "-d", "float32"], "not a multiple"),
        (["--ranks", "0"], "at least 1"),
        (["-b", "twelve"], "not a size"),
        (["-e", "1.1K"], "whole number of bytes"),
        (["-n", "many"], "auto"),
        (["-o", "avg", "-d", "int32"], "avg of int32 is refused: NCCL's is the sum divided by the rank count"),
        (["--root", "5"], "not a rank"),
        (["--backend", "mpich2"], "known: gloo, nccl, mpi, mpich, auto"),
        (["--format", "xml"], "--format"),
        (["--output", "out.txt"], ".csv"),
        (["--op", "broadcast", "--algo", "rabenseifner"], "does none of the ops"),
        # One node (no --topology): every rank started, skipped everything, and failed with gloo's noise.
        (["--algo", "hierarchical"], "needs ranks on two or more nodes, and with no --topology"),
        (["--resume", "--stream", "nowhere/none.jsonl"], "resume"),
        # Measured gloo's CPU ranks as ever and said nothing of the option.
        (["--backend", "gloo", "--cuda-graph"], "--cuda-graph captures GPU work; gloo's ranks run on the CPU"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import collbench.runtime.launch.ranks as launch_module

    def no_launch(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("no rank may start on bad input")

    monkeypatch.setattr(launch_module, "_launch_local", no_launch)
    result = RUNNER.invoke(app, ["sweep", "--ranks", "2", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without GPUs")
def test_nccl_without_gpus_is_refused() -> None:
    result = RUNNER.invoke(app, ["sweep", "--ranks", "2", "--backend", "nccl"])
    assert result.exit_code == 2
    assert "nccl" in result.output and "GPU" in result.output


TINY = [
    "sweep",
    "--ranks",
    "2",
    "--backend",
    "gloo",
    "--algo",
    "ring,native",
    "-b",
    "8",
    "-e",
    "64",
    "-f",
    "8",
    "-n",
    "2",
    "-w",
    "1",
]


def test_parquet_output_without_pyarrow_is_refused_before_a_rank_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain `pip install collbench` has no Parquet engine: `--output run.parquet` measured every point
    and then ended in pandas' ImportError traceback (exit 1; the rows were only in the stream)."""
    import importlib.util

    import collbench.runtime.launch.ranks as launch_module

    def no_launch(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("no rank may start on bad input")

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("pyarrow", "fastparquet") else find_spec(name, *a),
    )
    monkeypatch.setattr(launch_module, "_launch_local", no_launch)
    result = RUNNER.invoke(app, ["sweep", "--ranks", "2", "--output", "run.parquet"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "error: --output run.parquet: Parquet needs pyarrow (pip install pyarrow, or collbench[parquet]); "
        ".jsonl and .csv need nothing more"
    ], result.output


def test_an_interrupted_sweep_names_its_rows_and_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM/Ctrl-C said only "what was measured so far is on disk": not where, nor how to go on."""
    import collbench.runtime.sweep.run as run_module
    from collbench.results.io import append_jsonl, read_rows

    stream = tmp_path / "s.jsonl"
    kept = read_rows(Path(__file__).parents[2] / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl")[:3]

    def measured_three_then_stopped(*_args: object, **_kwargs: object) -> None:
        for row in kept:
            append_jsonl(stream, row)
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "run_sweep", measured_three_then_stopped)
    result = RUNNER.invoke(app, ["sweep", "--ranks", "2", "--stream", str(stream)], env={"COLUMNS": "200"})
    assert result.exit_code == 130, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"interrupted: the 3 rows measured so far are in {stream}; the same command with --resume continues from them"
    ), result.output
    # At 80 columns it ran to 105 (and past, with a longer path): wrapped at words, as notes are.
    monkeypatch.chdir(tmp_path)
    stream.unlink()
    result = RUNNER.invoke(app, ["sweep", "--ranks", "2", "--stream", "s.jsonl"], env={"COLUMNS": "80"})
    assert result.exit_code == 130, result.output
    lines = result.output.strip().splitlines()[-2:]
    assert lines == [
        "interrupted: the 3 rows measured so far are in s.jsonl; the same command with",
        "  --resume continues from them",
    ], result.output


def test_table_output_and_files(tmp_path: Path) -> None:
    out = tmp_path / "rows.csv"
    result = RUNNER.invoke(app, [*TINY, "--output", str(out), "--stream", str(tmp_path / "s.jsonl")])
    assert result.exit_code == 0, result.output
    assert "all-reduce · ring" in result.stdout and "all-reduce · native" in result.stdout
    assert "wrong elements: 0 (OK)" in result.stdout
    rows = read_rows(out)
    assert len(rows) == 8 and all(r.wrong == 0 for r in rows)
    assert len(read_rows(tmp_path / "s.jsonl")) == 8


def test_nccl_tests_format_is_parseable(tmp_path: Path) -> None:
    result = RUNNER.invoke(app, [*TINY, "--format", "nccl-tests", "--stream", str(tmp_path / "s.jsonl")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any(line.startswith("#       size         count      type   redop    root     time") for line in lines)
    data = [line.split() for line in lines if line and not line.startswith("#")]
    assert len(data) == 4  # 2 algorithms x sizes 8 and 64, both modes on each line
    for fields in data:
        assert len(fields) == 13
        assert fields[2:5] == ["float", "sum", "-1"]
        assert fields[8] == "0" and fields[12] == "0"
        float(fields[5]), float(fields[10])
    assert sum(line.startswith("# Avg bus bandwidth    : ") for line in lines) == 2


def test_json_format_and_check_off(tmp_path: Path) -> None:
    result = RUNNER.invoke(
        app, [*TINY, "--format", "json", "-c", "0", "--in-place", "--stream", str(tmp_path / "s.jsonl")]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 4
    assert all(r["wrong"] == -1 and r["in_place"] for r in rows)


def test_import_reads_back_what_the_nccl_tests_format_prints(tmp_path: Path) -> None:
    """`sweep --format nccl-tests` output, several blocks and one mode only, imports as the same rows."""
    from collbench.importers.nccl_tests import read_nccl_tests

    log = tmp_path / "sweep.txt"
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            "--ranks",
            "2",
            "--backend",
            "gloo",
            "--op",
            "all-gather,all-reduce",
            "--algo",
            "native,ring",
            "-b",
            "1K",
            "-e",
            "4K",
            "-f",
            "4",
            "-n",
            "3",
            "--out-of-place",
            "--format",
            "nccl-tests",
            "--stream",
            str(tmp_path / "rows.jsonl"),
        ],
    )
    assert result.exit_code == 0, result.output
    log.write_text(result.stdout)
    rows = read_nccl_tests(log)
    assert {(r.op, r.algo, r.backend, r.world_size) for r in rows} == {
        (op, algo, "gloo", 2) for op in ("all-gather", "all-reduce") for algo in ("native", "ring")
    }
    assert all(not r.in_place for r in rows)
    assert sorted((r.op, r.algo, r.size_bytes, r.count) for r in rows) == sorted(
        (op, algo, size, size // 4)
        for op in ("all-gather", "all-reduce")
        for algo in ("native", "ring")
        for size in (1024, 4096)
    )
    # nccl-tests prints the per-rank count for all-gather: 1024 B of float on 2 ranks is 128.
    assert any(line.split()[:2] == ["1024", "128"] for line in result.stdout.splitlines())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-b", "0"], "at least 1 byte"),
        (["-f", "nan"], "finite"),
        (["-f", "inf"], "finite"),
        # Measured -b alone, exit 0 (nccl-tests steps by -i bytes there).
        (["-b", "1K", "-e", "1M", "-f", "1"], "--step-factor 1 never grows -b 1024 toward -e 1048576: give a factor"),
        # An empty list (an unset shell variable) measured nothing into an empty file, exit 0.
        (["--algo", ""], "no algorithm to run; give --algo (ring, native, ... or all)"),
        (["--algo", ","], "no algorithm to run"),
        (["--timeout", "nan"], "--timeout"),
        # Past what datetime.timedelta holds: an OverflowError's traceback (as was tune's and discover's).
        (["--timeout", "1e30"], "--timeout must be a positive number of seconds, at most 604,800 (a week), got 1e+30"),
        # Shorter than a rank starts in: -T 0.01 was torch's DistNetworkError traceback (the store's own client
        # timed out reaching it), -T 0.1 'rank 1 ... stopped answering (hung)' while it started.
        (["--timeout", "0.01"], "--timeout 0.01: give at least 1 s; a rank takes about that to start"),
        (["--budget", "nan"], "--budget"),
        (["--budget", "0"], "--budget"),
        (["--budget", "-1"], "--budget"),
        (["-n", "99999999999999999999"], "--iters"),
        (["--output", "keep.csv"], "--resume"),
        (["--output", "/proc/y.csv", "--stream", "ok.jsonl"], "/proc/y.csv"),
        (["--output", "/proc/x.csv"], "/proc/x.jsonl"),
        (["--stream", "/proc/s.jsonl"], "/proc/s.jsonl"),
        # JSON lines under a name every reader then took as CSV ('s3.csv:2: ... field op: missing').
        (["--stream", "s.csv"], "--stream s.csv: rows stream as JSON lines, and results are read by their suffix"),
        (["--stream", "s.json"], "use a .jsonl name"),
        (["--stream", "adir.jsonl"], "directory"),
        (["--resume", "--stream", "adir.jsonl"], "directory"),
        (["--resume", "--stream", "bin.jsonl"], "UTF-8"),
        (["--resume", "--stream", "list.jsonl"], "not an object"),
        # An --output other than the stream was replaced whatever it held (844 measured rows of a CSV).
        (["--output", "keep.jsonl", "--stream", "s.jsonl"], "keep.jsonl is not empty; pass --overwrite to replace it"),
    ],
)
def test_bad_values_and_files_refused_before_ranks(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import collbench.runtime.launch.ranks as launch_module

    def no_launch(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("no rank may start on bad input")

    monkeypatch.setattr(launch_module, "_launch_local", no_launch)
    monkeypatch.chdir(tmp_path)
    # A stream's row (a JSON object without size_bytes is no row: test_json_that_is_no_results_stream...).
    kept = '{"kept": 1, "size_bytes": 1024}\n'
    (tmp_path / "keep.jsonl").write_text(kept)
    (tmp_path / "adir.jsonl").mkdir()
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "list.jsonl").write_text("[1, 2]\n")
    result = RUNNER.invoke(app, ["sweep", "--ranks", "2", "-e", "1K", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    # Nothing the user had was changed.
    assert (tmp_path / "keep.jsonl").read_text() == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir.jsonl", "bin.jsonl", "keep.jsonl", "list.jsonl"]


def test_resume_of_a_stream_measured_with_other_ranks_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'sweep --ranks 3 --resume' on a 2-rank stream resumed none of its rows and appended 3-rank rows to it.
    Refused before a rank starts, the stream as it was; the stream's own rank count still resumes."""
    import collbench.runtime.launch.ranks as launch_module

    launched: list[object] = []

    def no_launch(*args: object, **_kwargs: object) -> None:
        launched.append(args)
        raise KeyboardInterrupt  # the validated sweep stops here: no rank runs in this test

    monkeypatch.setattr(launch_module, "_launch_local", no_launch)
    monkeypatch.chdir(tmp_path)
    measured = (Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl").read_text()
    (tmp_path / "s.jsonl").write_text(measured)
    result = RUNNER.invoke(app, ["sweep", "--ranks", "3", "-e", "1K", "--stream", "s.jsonl", "--resume"])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        "error: --resume: s.jsonl holds rows measured with 2 ranks and this sweep runs 3; resume it with the ranks it "
        "was measured with, or give --stream FILE for the 3-rank rows"
    )
    assert not launched and (tmp_path / "s.jsonl").read_text() == measured
    RUNNER.invoke(app, ["sweep", "--ranks", "2", "-e", "1K", "--stream", "s.jsonl", "--resume"])
    assert launched, "a resume at the stream's own ranks passes the check and starts its ranks"


def test_sweep_sizes_always_ends() -> None:
    from collbench.runtime.sweep.plan import sweep_sizes

    assert sweep_sizes(1, 4, 1.5, 1) == [1, 2, 3]
    assert sweep_sizes(1024, 1024, 4.0, 4) == [1024]
    assert sweep_sizes(4, 1 << 20, 1e300, 4) == [4]


def test_a_sweep_with_every_point_skipped_is_one_error_line_not_an_empty_success(tmp_path: Path) -> None:
    # 4 and 8 bytes are less than one float32 per rank of a 3-rank all-to-all: nothing is measured.
    args = ["sweep", "--ranks", "3", "--op", "all-to-all", "--algo", "pairwise", "-b", "4", "-e", "8", "-f", "2"]
    result = RUNNER.invoke(app, [*args, "-n", "2", "--stream", str(tmp_path / "s.jsonl")])
    # A mistake every rank finds alike is the user's: exit 2 and one error line, not a rank failure (3).
    assert result.exit_code == 2, result.output
    assert "error: nothing to measure: every point was skipped" in result.output
    assert "failed while" not in result.output
    assert "less than one element per rank" in result.output
    assert "Traceback" not in result.output
    # A refused sweep leaves nothing behind: the empty stream it made goes with the refusal.
    assert not (tmp_path / "s.jsonl").exists()


@pytest.mark.parametrize("flags", [[], ["--overwrite"]])
@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("tuned.yaml", "# collbench tuning profile\nschema_version: 2\nbackend: gloo\n"),
        ("all_reduce.log", "# nccl-tests 2.19\n#  size count type redop root time algbw busbw #wrong\n"),
        ("rows.csv", "op,algo,size_bytes,time_us\nall-reduce,ring,1024,12.5\n"),
    ],
)
def test_a_stream_that_is_no_results_stream_is_kept_even_with_overwrite(
    name: str, text: str, flags: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--stream tuned.yaml` said 'tuned.yaml holds 3 measured rows; pass ... --overwrite', counting a
    profile's lines as rows, and with --overwrite emptied the profile and streamed rows into it."""
    import collbench.runtime.launch.ranks as launch_module

    def no_launch(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("no rank may start on bad input")

    monkeypatch.setattr(launch_module, "_launch_local", no_launch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(text)
    result = RUNNER.invoke(app, ["sweep", "--ranks", "2", "-e", "1K", "--stream", name, *flags])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: {name} is not a results stream (its first line is not a results row: a profile, log, CSV or "
        "fits?); --overwrite empties streams only: give --stream a new file"
    )
    assert (tmp_path / name).read_text() == text


@pytest.mark.parametrize("kind", ["fits", "nvml", "topology"])
def test_json_that_is_no_results_stream_is_kept_even_with_overwrite(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON collbench writes that holds no rows opens with '{' as a row does: `--stream fits.json
    --overwrite` emptied the fits of the published H100 log and streamed rows into it."""
    import collbench.runtime.launch.ranks as launch_module

    def no_launch(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("no rank may start on bad input")

    monkeypatch.setattr(launch_module, "_launch_local", no_launch)
    monkeypatch.chdir(tmp_path)
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    if kind == "fits":
        log = fixtures / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"
        made = RUNNER.invoke(app, ["fit", str(log), "--json"])
        assert made.exit_code == 0, made.output
        text = made.stdout
    elif kind == "nvml":
        text = (fixtures / "nvml" / "h100-single.json").read_text()
    else:
        made = RUNNER.invoke(app, ["discover", "--replay", str(fixtures / "nvml" / "h100-single.json"), "--json"])
        assert made.exit_code == 0, made.output
        text = json.dumps(json.loads(made.stdout))  # one line, as a row: still no row
    (tmp_path / "file.json").write_text(text)
    result = RUNNER.invoke(app, ["sweep", "--ranks", "2", "-e", "1K", "--stream", "file.json", "--overwrite"])
    assert result.exit_code == 2, result.output
    assert "error: file.json is not a results stream" in result.output
    assert (tmp_path / "file.json").read_text() == text


def test_a_stream_of_rows_is_still_overwritten_or_resumed_as_before(tmp_path: Path) -> None:
    from collbench.results.journal import first_line_kind

    rows = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
    whole = rows.read_text().splitlines()[0]
    cases = {"rows.jsonl": rows.read_text(), "torn.jsonl": whole[:100], "blank.jsonl": "\n\n"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    assert [first_line_kind(tmp_path / name) for name in cases] == ["row", "row", "none"]


def test_a_resumed_sweep_counts_the_rows_it_took_from_the_stream(tmp_path: Path) -> None:
    # A resumed sweep printed the stream's earlier rows as its own; one whose every point was there
    # started its ranks, measured nothing and said nothing of it.
    stream = tmp_path / "rows.jsonl"
    base = ["sweep", "--ranks", "2", "--algo", "ring", "--out-of-place", "-n", "3", "-b", "1K", "--stream", str(stream)]
    first = RUNNER.invoke(app, [*base, "-e", "1K"])
    assert first.exit_code == 0, first.output
    assert "resumed from it" not in first.stdout
    # Counted by key, not by timestamp: a row stamped ahead of this command's clock (a host whose clock
    # was ahead, then stepped back) is still one the stream held.
    ahead = [dict(json.loads(line), timestamp=time.time() + 3600) for line in stream.read_text().splitlines()]
    stream.write_text("".join(json.dumps(row) + "\n" for row in ahead))
    grown = RUNNER.invoke(app, [*base, "-e", "4K", "-f", "4", "--resume"])
    assert grown.exit_code == 0, grown.output
    assert "(1 of 2 rows resumed from it, 1 measured now)" in " ".join(grown.stdout.split())
    again = RUNNER.invoke(app, [*base, "-e", "4K", "-f", "4", "--resume"])
    assert again.exit_code == 0, again.output
    assert "(2 of 2 rows resumed from it, none measured now: every point was there)" in " ".join(again.stdout.split())
    assert len(read_rows(stream)) == 2


def test_resume_of_a_stream_of_another_topology_is_refused_and_the_stream_kept(tmp_path: Path) -> None:
    # A stream from another machine (or swept with another --topology) at the same rank count was resumed
    # as this machine's: its rows kept, the rest measured here and appended, one file of two machines.
    stream = tmp_path / "rows.jsonl"
    base = ["sweep", "--ranks", "2", "--algo", "ring", "--out-of-place", "-n", "3", "-b", "1K", "--stream", str(stream)]
    first = RUNNER.invoke(app, [*base, "-e", "1K"])
    assert first.exit_code == 0, first.output
    (row,) = [json.loads(line) for line in stream.read_text().splitlines()]
    here = row["topology_fingerprint"]
    stream.write_text(json.dumps(dict(row, topology_fingerprint="deadbeef0000")) + "\n")
    kept = stream.read_text()
    result = RUNNER.invoke(app, [*base, "-e", "4K", "-f", "4", "--resume"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert (
        f"error: --resume: {stream} holds rows of topology deadbeef0000 and this sweep's is {here} (another "
        "machine, or another --topology)"
    ) in " ".join(result.output.split())
    assert stream.read_text() == kept


def test_an_output_is_named_once(tmp_path: Path) -> None:
    # '-O rows.jsonl' streams into that file itself: 'rows streamed to rows.jsonl' then 'wrote 2 rows to
    # rows.jsonl' read as two files. A CSV output is another file beside its stream, said as written.
    base = ["sweep", "--ranks", "2", "--algo", "ring", "--out-of-place", "-n", "3", "-b", "1K", "-e", "4K", "-f", "4"]
    for name, written in (("rows.jsonl", False), ("rows.csv", True)):
        result = RUNNER.invoke(app, [*base, "-O", str(tmp_path / name)], env={"COLUMNS": "400"})
        assert result.exit_code == 0, result.output
        assert f"rows streamed to {tmp_path / 'rows.jsonl'}" in result.stdout
        assert (f"wrote 2 rows to {tmp_path / name}" in result.stdout) is written, result.stdout
        assert len(read_rows(tmp_path / name)) == 2
        (tmp_path / "rows.jsonl").unlink()

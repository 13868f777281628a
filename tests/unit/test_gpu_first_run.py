"""benchmarks/gpu_first_run.py without a GPU: its dry run here, its run loop on fake checks, its comparison.

The run loop is driven with checks that are small Python commands (one passes, one fails, one overruns
its limit) and a machine faked to one GPU, so that what the script does with a real check's exit
code, output and overrun is checked here; the real checks themselves need a GPU.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from collbench.topology.nvidia_smi import parse_nvidia_smi_topo
from collbench.topology.sources import discover_topology

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
_NAME = "collbench_bench_gpu_first_run"


def _load() -> ModuleType:
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    spec = importlib.util.spec_from_file_location(_NAME, REPO / "benchmarks" / "gpu_first_run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


first_run = _load()
NAMES = [
    "kernel-build",
    "kernel-fallback",
    "pytest-gpu",
    "bench-gpu-reduce",
    "device-check-256M",
    "device-check-1G",
    "sweep-nccl",
    "tune-quick-nccl",
    "tune-quick-default",
    "nvidia-smi-topo",
    "discover-vs-nvidia-smi",
]


def test_dry_run_here_lists_every_check_and_why_it_is_skipped() -> None:
    import torch

    made = [REPO / "gpu-first-run.md", REPO / "gpu-first-run-files"]
    before = [path.exists() for path in made]
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_first_run.py", "--dry-run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("machine: 0 x no GPU; torch ")
    listed = [line.split(". ", 1)[1].split(" (", 1)[0] for line in lines[1::2]]
    assert listed == NAMES
    assert torch.version.cuda is None  # this machine: a CPU-only torch
    why = f"skipped here: no CUDA GPU: torch {torch.__version__} is a CPU-only build"
    assert all(line.endswith(why) for line in lines[1::2]), lines
    commands = [line.strip() for line in lines[2::2]]
    cache = "COLLBENCH_CACHE_DIR=gpu-first-run-files/kernel-cache"
    assert commands[0] == f"{cache} python benchmarks/gpu_first_run.py --body kernel-build"
    assert commands[2] == f"{cache} python -m pytest -q -rs -p no:cacheprovider tests/gpu"
    assert "sweep --backend nccl --ranks 1 --op all-reduce,reduce --algo ring,native -b 1G -e 1G" in commands[5]
    assert [path.exists() for path in made] == before  # a dry run writes nothing


def test_on_one_gpu_only_the_nccl_tune_is_skipped() -> None:
    one = first_run.Machine(gpus=1, names=("NVIDIA H100 80GB HBM3",), torch_version="2.11.0", torch_cuda="13.0")
    reasons = {c.name: c.skip_reason(one) for c in first_run.checks(1, Path("/tmp/x"))}
    assert reasons.pop("tune-quick-nccl") == (
        "needs 2+ GPUs (a tune needs 2 ranks and NCCL runs one rank per GPU); this machine has 1"
    )
    assert reasons.pop("nvidia-smi-topo") == reasons.pop("discover-vs-nvidia-smi") == "nvidia-smi is not on PATH"
    assert set(reasons.values()) == {None}
    with_smi = first_run.Machine(gpus=8, torch_version="2.11.0", torch_cuda="13.0", nvidia_smi="/usr/bin/nvidia-smi")
    assert {c.skip_reason(with_smi) for c in first_run.checks(8, Path("/tmp/x"))} == {None}
    assert "--ranks 8" in first_run.checks(8, Path("/tmp/x"))[6].shown()


def test_the_run_records_passes_failures_and_overruns_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    py = sys.executable
    fake = [
        first_run.Check(name="ok", what="passes", command=(py, "-c", "print('figure: 42 GB/s')"), timeout_s=60),
        first_run.Check(
            name="bad", what="fails", command=(py, "-c", "import sys; print('wrong: 3'); sys.exit(3)"), timeout_s=60
        ),
        first_run.Check(
            name="slow",
            what="overruns",
            command=(py, "-c", "import time\nprint('started', flush=True)\ntime.sleep(600)"),
            timeout_s=2,
        ),
        first_run.Check(name="pair", what="needs two", command=(py, "-c", "pass"), timeout_s=60, min_gpus=2),
        first_run.Check(name="after", what="still runs", command=(py, "-c", "print('after')"), timeout_s=60),
    ]
    monkeypatch.setattr(
        first_run, "probe_machine", lambda: first_run.Machine(gpus=1, torch_version="t", torch_cuda="13.0")
    )
    monkeypatch.setattr(first_run, "checks", lambda gpus, files: fake)
    out = tmp_path / "r.md"
    assert first_run.main(["-O", str(out)]) == 1
    text = out.read_text()
    table = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [line.split(" | ")[1:4] for line in table] == [
        ["ok", "passed", "0"],
        ["bad", "failed", "3"],
        ["slow", "timed out", table[2].split(" | ")[3]],
        ["pair", "skipped", ""],
        ["after", "passed", "0"],
    ]
    assert "figure: 42 GB/s" in text and "wrong: 3" in text and "exit code 3" in text
    assert "started" in text and "stopped after 2 s" in text
    assert "Not run: needs 2+ GPUs" in text
    assert (tmp_path / "r-files" / "bad.log").read_text() == "wrong: 3\n"


def test_only_long_output_is_cut_to_its_tail() -> None:
    short = "\n".join(f"line {i}" for i in range(10))
    assert first_run.shown_output(short) == (short, 0)
    long = "\n".join(f"line {i}" for i in range(first_run.OUTPUT_LINES + 50))
    shown, left_out = first_run.shown_output(long)
    assert (
        left_out == 50 and shown.splitlines()[0] == "line 50" and shown.endswith(f"line {first_run.OUTPUT_LINES + 49}")
    )


def test_discover_and_nvidia_smi_of_one_machine_agree() -> None:
    # A DGX H100 recorded through NVML and an HGX H100's published `nvidia-smi topo -m`: the same board.
    nvml = discover_topology(nvml_replay=FIXTURES / "nvml" / "dgx-h100.json")
    text = (FIXTURES / "topologies" / "hgx-h100x8-nv18-nics.topo.txt").read_text()
    smi = parse_nvidia_smi_topo(text, "hgx")
    assert first_run.topology_differences(smi, nvml) == []


def test_discover_and_nvidia_smi_of_two_machines_differ_line_by_line() -> None:
    nvml = discover_topology(nvml_replay=FIXTURES / "nvml" / "pcie-a6000x8.json")
    text = (FIXTURES / "topologies" / "hgx-h100x8-nv18-nics.topo.txt").read_text()
    differences = first_run.topology_differences(parse_nvidia_smi_topo(text, "hgx"), nvml)
    assert any(line.startswith("GPU0-GPU1: nvidia-smi ") and "NVML pix" in line for line in differences), differences
    one = discover_topology(nvml_replay=FIXTURES / "nvml" / "h100-single.json")
    assert first_run.topology_differences(parse_nvidia_smi_topo(text, "hgx"), one)[0] == (
        "GPUs: nvidia-smi shows 8, NVML 1"
    )


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line on stderr of a run refused before it starts (exit code 2)."""
    assert first_run.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == "", captured
    return lines[0]


@pytest.fixture
def no_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused run never gets as far as probing the machine."""

    def probe() -> None:
        raise AssertionError("the machine was probed before the options were checked")

    monkeypatch.setattr(first_run, "probe_machine", probe)


@pytest.mark.usefixtures("no_machine")
def test_a_report_that_cannot_be_written_is_one_line_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _refused(["-O", str(tmp_path)], capsys) == f"error: {tmp_path}: is a directory; give a file name"
    blocker = tmp_path / "afile"
    blocker.write_text("")
    line = _refused(["-O", str(blocker / "r.md")], capsys)
    assert line == f"error: {blocker / 'r.md'}: cannot write here ({blocker} is not a directory)"
    assert _refused(["-O", "/proc/version"], capsys) == (
        "error: /proc/version: cannot write here: /proc refuses new files (a kernel file system such as /proc or /sys)"
    )
    fifo = tmp_path / "r.fifo"
    os.mkfifo(fifo)
    line = _refused(["-O", str(fifo)], capsys)
    assert line == f"error: {fifo}: is a FIFO, not a regular file; collbench writes only regular files"


@pytest.mark.usefixtures("no_machine")
@pytest.mark.parametrize("minutes", ["-5", "0", "nan", "inf", "-inf"])
def test_minutes_must_be_finite_and_above_zero(minutes: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused([f"--minutes={minutes}", "--dry-run"], capsys)
    assert line == f"error: --minutes {float(minutes)}: give a number of minutes above 0"


@pytest.mark.usefixtures("no_machine")
@pytest.mark.parametrize("only", [",", "", " , "])
def test_only_naming_no_check_is_refused(only: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(["--only", only, "--dry-run"], capsys)
    assert line == f"error: --only {only!r} names no check; give check names separated by commas"


def test_an_earlier_report_and_its_files_are_never_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    py = sys.executable
    fake = [first_run.Check(name="ok", what="passes", command=(py, "-c", "print('new run')"), timeout_s=60)]
    monkeypatch.setattr(
        first_run, "probe_machine", lambda: first_run.Machine(gpus=1, torch_version="t", torch_cuda="13.0")
    )
    monkeypatch.setattr(first_run, "checks", lambda gpus, files: fake)
    earlier = tmp_path / "r.md"
    earlier.write_text("the earlier run's report\n")
    (tmp_path / "r-2-files").mkdir()  # an earlier run's logs alone also keep their name taken
    (tmp_path / "r-2-files" / "ok.log").write_text("earlier log\n")
    assert first_run.main(["-O", str(earlier)]) == 0
    assert earlier.read_text() == "the earlier run's report\n"
    assert (tmp_path / "r-2-files" / "ok.log").read_text() == "earlier log\n"
    assert "new run" in (tmp_path / "r-3.md").read_text()
    assert (tmp_path / "r-3-files" / "ok.log").read_text() == "new run\n"
    captured = capsys.readouterr()
    assert f"note: {earlier} or its files exist; this run's report goes to {tmp_path / 'r-3.md'}" in captured.err
    assert f"report: {tmp_path / 'r-3.md'}" in captured.out

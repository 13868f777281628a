"""benchmarks/gpu_first_run.py without a GPU: the whole run on a simulated one-GPU torch, its pieces.

The simulated machine is a ``sitecustomize`` on the children's ``PYTHONPATH`` that gives this CPU-only
torch the answers torch documents for one GPU (torch/cuda/__init__.py: ``is_available()`` True,
``device_count()`` 1, ``get_device_name(0)``, ``get_device_capability(0)`` (9, 0) for an H200;
``torch.version.cuda``; torch/cuda/nccl.py: ``version()`` a tuple), and an ``nvidia-smi`` on ``PATH``
that prints one GPU. Every step then runs its real command: those that need a real GPU fail (their
failure recorded, the run going on) or are cut by the budget. What is checked is the script's own
contract: the steps' order, the budget (each step's limit cut to what is left, the run inside it),
at most six files directly under --out, the summary printed last.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
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
ORDER = [
    "environment",
    "nvml-record",
    "discover-vs-smi",
    "kernel-build",
    "nccl-plugin",
    "device-check-1G",
    "bench-reduce",
    "pytest-gpu",
    "tune",
]

_ONE_GPU = """
import torch
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.cuda.get_device_name = lambda device=None: "NVIDIA H200"
torch.cuda.get_device_capability = lambda device=None: (9, 0)
torch.version.cuda = "13.0"
torch.cuda.nccl.version = lambda: (2, 27, 7)
"""

_NVIDIA_SMI = """#!/bin/sh
case "$1" in
topo) printf '\\tGPU0\\tCPU Affinity\\tNUMA Affinity\\tGPU NUMA ID\\nGPU0\\t X \\t0-15\\t0\\t\\tN/A\\n' ;;
*) echo "0, NVIDIA H200, 580.159.04, 143771 MiB, 00000000:18:00.0" ;;
esac
"""


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
checks = sys.modules["first_run_checks"]


@pytest.fixture
def one_gpu(tmp_path: Path) -> dict[str, str]:
    """The environment of a child that sees one simulated H200 and an nvidia-smi."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_ONE_GPU)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(_NVIDIA_SMI)
    smi.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "COLLBENCH"))}
    env.update(PYTHONPATH=f"{site}{os.pathsep}{REPO}", PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    return env


def test_the_whole_run_on_one_simulated_gpu(one_gpu: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    minutes = 1.0
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_first_run.py", "--out", str(out), "--minutes", str(minutes)],
        cwd=REPO,
        env=one_gpu,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr  # steps that need a real GPU fail here
    # At most six files, directly under --out, all of them named in the script's list.
    written = sorted(p.name for p in out.iterdir())
    assert all((out / name).is_file() for name in written) and set(written) <= set(first_run.OUT_FILES), written
    assert len(written) <= 6 and {"summary.md", "logs.tar.gz"} <= set(written)
    summary = (out / "summary.md").read_text()
    assert done.stdout.endswith(summary)  # printed last
    assert "- machine: 1 x NVIDIA H200; torch " in summary and "(CUDA 13.0, NCCL 2.27.7)" in summary
    rows = [line.split(" | ") for line in summary.splitlines() if re.match(r"\| \d+ \| ", line)]
    assert [row[1] for row in rows] == ORDER
    started = [line.split(". ", 1)[1].split(" (", 1)[0] for line in done.stdout.splitlines() if line.startswith("== ")]
    assert started == [name for name in ORDER if name in started] and started[0] == "environment"
    # The budget: the run's own count stays inside it; no step past its limit (plus the kill's grace).
    spent = int(re.search(r"; (\d+) s of the (\d+) s budget", summary).group(1))  # type: ignore[union-attr]
    assert spent <= minutes * 60
    for row in rows:
        status, seconds, limit = row[2], float(row[3]), float(row[4])
        if status in ("passed", "failed", "timed out"):
            assert seconds <= limit + first_run.GRACE_S + 1, row
    nominal = {step.name: step.limit_s for step in first_run.steps(1, out, out)}
    assert all(float(row[4]) <= nominal[row[1]] for row in rows)  # a step's own limit, or less when less was left
    # A 1-minute budget cuts the later steps: their limits shrink to what is left (or they are not run),
    # whatever the speed of this machine (whether a step then times out is a wall time: not asserted).
    assert any(row[2] == "not run" or float(row[4]) < nominal[row[1]] for row in rows), rows
    assert "cuda:0 NVIDIA H200, compute capability 9.0" in (summary + done.stdout) or "environment | passed" in summary


def test_the_dry_run_cuts_later_steps_to_the_budget(one_gpu: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_first_run.py", "--dry-run", "--out", str(tmp_path / "o")],
        cwd=REPO,
        env=one_gpu,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("machine: 1 x NVIDIA H200; torch ") and lines[0].endswith("; budget 480 s")
    listed = [line.split(". ", 1)[1].split(":", 1)[0] for line in lines[1::2]]
    assert listed == ORDER
    limits = [int(m.group(1)) for line in lines[1::2] if (m := re.search(r"at most (\d+) s of its", line))]
    assert "skipped" not in done.stdout  # nothing skipped on the simulated machine
    # Were every step to take its whole limit (and the kill's grace), the run would still end in time.
    assert sum(limits) + first_run.GRACE_S * len(limits) <= 480 - first_run.WRAP_UP_S
    assert "at most 60 s of its 60" in lines[1] and "kernel-build: at most 180 s of its 180" in done.stdout
    assert re.search(
        r"tune: (at most \d+ s of its 180|not reached if every step before it takes its whole limit)", done.stdout
    )
    assert not (tmp_path / "o").exists()  # a dry run writes nothing


def test_an_out_folder_holding_files_is_never_written_into(tmp_path: Path) -> None:
    (tmp_path / "o").mkdir()
    assert first_run.free_out(tmp_path / "o") == tmp_path / "o"  # empty: used
    (tmp_path / "o" / "summary.md").write_text("an earlier run\n")
    (tmp_path / "o-2").mkdir()
    (tmp_path / "o-2" / "x").write_text("")
    assert first_run.free_out(tmp_path / "o") == tmp_path / "o-3"


@pytest.mark.parametrize("minutes", ["-5", "0", "nan", "inf"])
def test_minutes_must_be_finite_and_above_zero(minutes: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert first_run.main([f"--minutes={minutes}", "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: --minutes {float(minutes)}: give a number of minutes above 0\n"


def test_a_file_as_out_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_text("")
    assert first_run.main(["--out", str(tmp_path / "f")]) == 2
    assert capsys.readouterr().err == f"error: --out {tmp_path / 'f'}: is a file; give a folder (new or empty)\n"


def test_kernel_reuse_says_built_once_or_rebuilt() -> None:
    step = first_run.steps(1, Path("/o"), Path("/w"))

    def outcome(index: int, kernels: dict[str, int]) -> object:
        return first_run.Outcome(step[index], "passed", kernels=kernels)

    once = [outcome(0, {}), outcome(3, {"a.so": 1}), outcome(5, {"a.so": 1}), outcome(7, {"a.so": 1})]
    assert (
        first_run.kernel_reuse(once)
        == "kernels: built once, by kernel-build; 2 later step(s) used that build unchanged"
    )
    again = [outcome(3, {"a.so": 1}), outcome(7, {"a.so": 2})]
    assert first_run.kernel_reuse(again) == "kernels: built by kernel-build, then built again by pytest-gpu"
    assert first_run.kernel_reuse([outcome(0, {})]) == "kernels: no step built them"


def test_discover_and_nvidia_smi_of_one_machine_agree() -> None:
    # A DGX H100 recorded through NVML and an HGX H100's published `nvidia-smi topo -m`: the same board.
    nvml = discover_topology(nvml_replay=FIXTURES / "nvml" / "dgx-h100.json")
    text = (FIXTURES / "topologies" / "hgx-h100x8-nv18-nics.topo.txt").read_text()
    assert checks.topology_differences(parse_nvidia_smi_topo(text, "hgx"), nvml) == []


def test_discover_and_nvidia_smi_of_two_machines_differ_line_by_line() -> None:
    nvml = discover_topology(nvml_replay=FIXTURES / "nvml" / "pcie-a6000x8.json")
    text = (FIXTURES / "topologies" / "hgx-h100x8-nv18-nics.topo.txt").read_text()
    differences = checks.topology_differences(parse_nvidia_smi_topo(text, "hgx"), nvml)
    assert any(line.startswith("GPU0-GPU1: nvidia-smi ") and "NVML pix" in line for line in differences), differences
    one = discover_topology(nvml_replay=FIXTURES / "nvml" / "h100-single.json")
    assert checks.topology_differences(parse_nvidia_smi_topo(text, "hgx"), one)[0] == "GPUs: nvidia-smi shows 8, NVML 1"


_LOAD = """
import sys
from torch.utils import cpp_extension
cpp_extension.load(name="collbench_reduce_ext", sources=[sys.argv[1]], build_directory=sys.argv[2],
                   is_python_module=False, verbose=False)
"""


def test_a_later_process_loads_the_shared_build_without_rebuilding(tmp_path: Path) -> None:
    # The premise of the shared cache: torch's loader in a new process runs ninja again, which finds
    # nothing changed (torch writes build.ninja only when its text changes: _maybe_write in
    # torch/utils/cpp_extension.py), so the library stays the one the first process built. A C++
    # source with no includes stands in for the CUDA kernels (this torch cannot build CUDA).
    if shutil.which("c++") is None or shutil.which("ninja") is None:
        pytest.skip("needs a C++ compiler and ninja")
    source = tmp_path / "probe.cpp"
    source.write_text('extern "C" int collbench_probe() { return 7; }\n')
    cache = tmp_path / "cache"
    cache.mkdir()
    step = first_run.steps(1, tmp_path, tmp_path)
    outcomes = []
    for index in (3, 5, 7):  # kernel-build, device-check-1G, pytest-gpu: three processes
        done = subprocess.run([sys.executable, "-c", _LOAD, str(source), str(cache)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        outcomes.append(first_run.Outcome(step[index], "passed", kernels=first_run.built_kernels(cache)))
    assert outcomes[0].kernels == outcomes[-1].kernels != {}
    assert first_run.kernel_reuse(outcomes) == (
        "kernels: built once, by kernel-build; 2 later step(s) used that build unchanged"
    )


def test_the_plugin_step_exports_a_profile_that_gives_nccl_rules() -> None:
    # The plugin says "N rules from FILE" only where its file holds rules; a profile whose winners have
    # no NCCL equivalent gives comments alone, and the step (which looks for that line) failed on the
    # H200 although NCCL loaded the plugin (first run of 2026-11-29).
    command = ["export", "nccl-tuner", str(checks.PLUGIN_PROFILE), "--from-other-backend", "-O", "-"]
    result = subprocess.run(
        [sys.executable, "-m", "collbench.cli.app", *command],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rules = [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    assert rules and all(line.startswith("allreduce,") for line in rules), result.stdout

"""Building the CUDA kernels out loud (collbench.runtime.cuda.kernel_build), without a GPU.

The contracts faked here are torch's (torch/utils/cpp_extension.py, torch 2.13): ``_jit_compile``
serialises builds with ``FileBaton(os.path.join(build_directory, 'lock'))``, an empty file that
``FileBaton.wait`` (torch/utils/file_baton.py) spins on while it exists; ``_check_cuda_version``
refuses an nvcc whose major version differs from ``torch.version.cuda``'s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from types import ModuleType

import pytest

from collbench.runtime.cuda import kernel_build
from collbench.runtime.cuda.kernel_build import BuildResult, build, clear_stale_lock, mismatch_reason, nvcc_version


def _lock(build_dir: Path, age_s: float, owner_pid: int | None) -> Path:
    build_dir.mkdir(parents=True, exist_ok=True)
    lock = build_dir / kernel_build.TORCH_LOCK
    lock.write_bytes(b"")  # torch's lock is empty: os.open(path, O_CREAT | O_EXCL)
    then = time.time() - age_s
    os.utime(lock, (then, then))
    if owner_pid is not None:
        (build_dir / kernel_build.OWNER_FILE).write_text(f"{owner_pid} {then:.0f}\n")
    return lock


def test_a_lock_whose_builder_died_is_removed(tmp_path: Path) -> None:
    lock = _lock(tmp_path, 5.0, owner_pid=4242)
    note = clear_stale_lock(tmp_path, alive=lambda pid: False)
    assert note == f"removed a stale CUDA kernel build lock ({lock}): its builder (pid 4242) is gone"
    assert not lock.exists() and not (tmp_path / kernel_build.OWNER_FILE).exists()


def test_a_lock_of_a_running_build_is_left_alone(tmp_path: Path) -> None:
    lock = _lock(tmp_path, 5.0, owner_pid=os.getpid())
    assert clear_stale_lock(tmp_path) is None and lock.exists()
    # No owner file (torch's own lock, another tool's build): young, left; old, removed.
    (tmp_path / kernel_build.OWNER_FILE).unlink()
    assert clear_stale_lock(tmp_path) is None and lock.exists()
    os.utime(lock, (time.time() - kernel_build.STALE_LOCK_S - 60,) * 2)
    assert "min old" in (clear_stale_lock(tmp_path) or "") and not lock.exists()
    assert clear_stale_lock(tmp_path) is None  # nothing there


def test_a_killed_builder_is_seen_as_gone(tmp_path: Path) -> None:
    proc = subprocess.Popen(["sleep", "30"])
    proc.kill()
    proc.wait()
    assert not kernel_build.pid_alive(proc.pid)
    assert kernel_build.pid_alive(os.getpid())


def test_mismatched_cuda_major_is_said_with_the_fix() -> None:
    reason = mismatch_reason("12.8", (13, 0), "/usr/local/cuda")
    assert reason == (
        "the CUDA toolkit at /usr/local/cuda is CUDA 13.0 but this torch was built for CUDA 12.8; "
        "set CUDA_HOME to a CUDA 12.x toolkit"
    )
    assert mismatch_reason("13.0", (13, 1), "/usr/local/cuda") is None
    assert mismatch_reason(None, (13, 0), "/x") is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (installed by .ci/run)")
def test_nvcc_version_reads_the_real_toolkit() -> None:
    nvcc = Path(shutil.which("nvcc") or "").resolve()
    version = nvcc_version(str(nvcc.parent.parent))
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout
    assert version is not None and f"release {version[0]}.{version[1]}" in out
    assert nvcc_version(None) is None and nvcc_version("/nonexistent") is None


def _fake_nvcc(tmp_path: Path, release: str) -> str:
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    nvcc.chmod(0o755)
    return str(home)


def test_build_says_what_happens_and_how_long(tmp_path: Path) -> None:
    said: list[str] = []
    build_dir = tmp_path / "build"

    def load() -> ModuleType:
        # What torch's loader does: it leaves <name>.so behind; the owner file is there meanwhile.
        assert (build_dir / kernel_build.OWNER_FILE).read_text().split()[0] == str(os.getpid())
        (build_dir / "ext.so").write_bytes(b"")
        return ModuleType("ext")

    home = _fake_nvcc(tmp_path, "12.8")
    result = build(build_dir, "ext", load, said.append, torch_cuda="12.8", cuda_home=home)
    assert result.module is not None and not (build_dir / kernel_build.OWNER_FILE).exists()
    assert said[0] == (
        f"building collbench's CUDA reduction kernels into {build_dir} (first time only; about 30 s to minutes)"
    )
    assert said[1].startswith("built collbench's CUDA reduction kernels in ") and said[1].endswith(" s")
    said.clear()
    assert build(build_dir, "ext", load, said.append, torch_cuda="12.8", cuda_home=home).module is not None
    assert said == []  # cached: nothing to say


def test_build_removes_a_stale_lock_then_builds(tmp_path: Path) -> None:
    said: list[str] = []
    build_dir = tmp_path / "build"
    _lock(build_dir, 10.0, owner_pid=999_999_999)  # no such pid
    result = build(build_dir, "ext", lambda: ModuleType("ext"), said.append, torch_cuda="12.8", cuda_home=None)
    assert result.module is not None
    assert said[0].startswith("removed a stale CUDA kernel build lock") and "pid 999999999" in said[0]


def test_build_falls_back_in_one_line_naming_the_fix(tmp_path: Path) -> None:
    said: list[str] = []
    home = _fake_nvcc(tmp_path, "13.0")

    def never() -> ModuleType:
        raise AssertionError("torch's loader must not be asked: it would refuse the toolkit")

    result = build(tmp_path / "b", "ext", never, said.append, torch_cuda="12.8", cuda_home=home)
    assert result == BuildResult(None, result.reason) and "set CUDA_HOME to a CUDA 12.x toolkit" in result.reason
    assert said == [
        f"collbench's CUDA reduction kernels are not used: {result.reason}; own algorithms reduce with torch's ops"
    ]

    def broken() -> ModuleType:
        raise RuntimeError("Error building extension 'ext'\nlong compiler output")

    said.clear()
    result = build(tmp_path / "b", "ext", broken, said.append, torch_cuda="13.0", cuda_home=home)
    assert result.module is None and len(said) == 2  # "building ...", then why it fell back
    # No compiler error line in that output: the loader's first line, and where the rest is kept.
    assert "(RuntimeError: Error building extension 'ext'); the whole build output is in" in said[1]
    assert "check CUDA_HOME" in said[1]
    assert "long compiler output" in (tmp_path / "b" / kernel_build.FAILURE_LOG).read_text()


def test_reduce_path_names_the_path_the_executor_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from collbench.runtime.cuda import kernels as cuda_kernels

    cuda = torch.device("cuda", 0)  # a name only: the predicate never touches the device
    monkeypatch.delenv("COLLBENCH_NO_CUDA_KERNELS", raising=False)
    monkeypatch.setattr(cuda_kernels, "load_extension", lambda: ModuleType("ext"))
    assert cuda_kernels.reduce_path(cuda, torch.float32) == "cuda-kernel"
    assert cuda_kernels.reduce_path(cuda, torch.float64) == "torch-ops"  # not a kernel dtype
    assert cuda_kernels.reduce_path(torch.device("cpu"), torch.float32) == "torch-ops"
    monkeypatch.setenv("COLLBENCH_NO_CUDA_KERNELS", "1")  # what the parent sets after a failed build
    assert cuda_kernels.reduce_path(cuda, torch.float32) == "torch-ops"
    monkeypatch.delenv("COLLBENCH_NO_CUDA_KERNELS")
    monkeypatch.setattr(cuda_kernels, "load_extension", lambda: None)
    assert cuda_kernels.reduce_path(cuda, torch.float16) == "torch-ops"


def test_rows_record_the_reduce_path_and_check_it_on_read(tmp_path: Path) -> None:
    from collbench.results.io import read_rows, write_rows
    from collbench.results.row import ResultRow
    from collbench.runtime.sweep.plan import SweepConfig
    from collbench.runtime.sweep.run import run_sweep

    config = SweepConfig(
        world_size=2,
        backend="gloo",
        ops=("all-reduce", "all-gather"),
        algos=("ring", "native"),
        min_bytes=1024,
        max_bytes=1024,
        iters=1,
        warmup=0,
        stream=tmp_path / "s.jsonl",
        timeout_s=120,
    )
    rows = run_sweep(config)
    paths = {(r.op, r.algo): r.reduce_path for r in rows}
    assert paths == {
        ("all-reduce", "ring"): "torch-ops",
        ("all-reduce", "native"): None,
        ("all-gather", "ring"): None,
        ("all-gather", "native"): None,
    }
    data = rows[0].to_dict()
    assert ResultRow.from_dict(data).reduce_path == "torch-ops"
    # CSV writes None as an empty cell: it reads back as None, not as an unknown path.
    write_rows(tmp_path / "r.csv", rows)
    assert [r.reduce_path for r in read_rows(tmp_path / "r.csv")] == [r.reduce_path for r in rows]
    with pytest.raises(ValueError, match="unknown reduce path 'gpu'"):
        ResultRow.from_dict({**data, "reduce_path": "gpu"})

"""The memory estimate made before any rank starts (collbench.runtime.sweep.memory), and the bounded check."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from collbench.errors import ConfigError
from collbench.runtime.executor import buffers
from collbench.runtime.executor.buffers import (
    CHUNK_ELEMS,
    check_buffers,
    check_chunks,
    fill,
    make_buffers,
)
from collbench.runtime.sweep import memory, plan
from collbench.runtime.sweep import run as sweep
from collbench.runtime.sweep.plan import SweepConfig
from collbench.schedules.ops import Op

MiB = 1 << 20


def _fake_proc(tmp_path: Path, available_kib: int) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text(f"MemTotal:       32000000 kB\nMemAvailable:   {available_kib} kB\n")
    return proc


def test_host_memory_takes_the_tighter_of_meminfo_and_cgroup_v2(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, 8 * 1024 * 1024)  # 8 GiB
    cgroup = tmp_path / "cg"
    cgroup.mkdir()
    (cgroup / "memory.max").write_text(f"{4 << 30}\n")
    (cgroup / "memory.current").write_text(f"{1 << 30}\n")
    assert memory.host_memory(proc, cgroup) == memory.HostMemory(3 << 30, "cgroup memory.max")
    (cgroup / "memory.max").write_text("max\n")  # no limit
    assert memory.host_memory(proc, cgroup) == memory.HostMemory(8 << 30, "MemAvailable")


def test_host_memory_reads_cgroup_v1_and_ignores_its_no_limit(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, 8 * 1024 * 1024)
    v1 = tmp_path / "cg" / "memory"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text(f"{2 << 30}\n")
    (v1 / "memory.usage_in_bytes").write_text(f"{512 * MiB}\n")
    assert memory.host_memory(proc, tmp_path / "cg") == memory.HostMemory(1536 * MiB, "cgroup memory.limit_in_bytes")
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    assert memory.host_memory(proc, tmp_path / "cg") == memory.HostMemory(8 << 30, "MemAvailable")
    assert memory.host_memory(tmp_path / "none", tmp_path / "none") is None


def test_point_bytes_counts_buffers_and_scratch() -> None:
    count = 1 << 20
    # Native: input + output only (NCCL's own buffers are not ours to count).
    assert memory.point_bytes(Op.ALL_REDUCE, "native", count, elem_bytes=4, world_size=4, in_place=False) == (
        8 * MiB,
        8 * MiB,
    )
    assert memory.point_bytes(Op.ALL_REDUCE, "native", count, elem_bytes=4, world_size=4, in_place=True)[0] == 4 * MiB
    # Ring: each step receives one chunk of count/4 elements into scratch.
    ring = memory.point_bytes(Op.ALL_REDUCE, "ring", count, elem_bytes=4, world_size=4, in_place=False)
    assert ring == (9 * MiB, 9 * MiB)
    # Direct: the root receives every other rank's buffer at once; the others receive in place.
    most, least = memory.point_bytes(Op.ALL_REDUCE, "direct", count, elem_bytes=4, world_size=4, in_place=False)
    assert most == 8 * MiB + 3 * 4 * MiB and least < most


def _job(**kw: Any) -> plan.SweepJob:
    return plan.validate(SweepConfig(backend="gloo", **kw))


def test_a_sweep_that_cannot_fit_is_refused_in_one_line() -> None:
    job = _job(world_size=8, algos=("ring",), min_bytes=1 << 30, max_bytes=1 << 30)
    with pytest.raises(ConfigError) as info:
        memory.check_host_memory(job, 8, 8, memory.HostMemory(4 << 30, "cgroup memory.max"))
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("8 ranks need about ") and "for all-reduce ring 1 GiB out-of-place" in text
    assert "cgroup memory.max leaves 4.0 GiB" in text
    # The same sweep fits where there is room: nothing raised.
    memory.check_host_memory(job, 8, 8, memory.HostMemory(64 << 30, "MemAvailable"))


def test_run_sweep_refuses_before_any_rank_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_launch(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("ranks started")

    monkeypatch.setattr(sweep, "launch", no_launch)
    monkeypatch.setattr(memory, "host_memory", lambda: memory.HostMemory(100 * MiB, "MemAvailable"))
    config = SweepConfig(world_size=2, backend="gloo", algos=("ring",), stream=tmp_path / "s.jsonl")
    with pytest.raises(ConfigError, match=r"^2 ranks need about 0\.6 GiB of host memory"):
        sweep.run_sweep(config)


def test_device_memory_is_checked_per_gpu() -> None:
    job = _job(world_size=2, algos=("native",), min_bytes=1 << 30, max_bytes=1 << 30)
    memory.check_device_memory(job, 2, [80 << 30, 80 << 30])
    with pytest.raises(ConfigError, match=r"local rank 1's GPU has 1\.0 GiB free"):
        memory.check_device_memory(job, 2, [80 << 30, 1 << 30])


def test_every_rank_calls_back_once_per_chunk() -> None:
    # A reduce's non-root has nothing to check but keeps step with the root, chunk by chunk.
    count = 3 * CHUNK_ELEMS + 5
    calls = {0: 0, 1: 0}
    for rank in (0, 1):
        b = make_buffers(Op.REDUCE, count, dtype=torch.float32, rank=rank, world_size=2, root=0, in_place=False)
        fill(b, "sum")
        if rank == 0:
            b.output.copy_(buffers.expected_reduction(2, 0, count, redop="sum", dtype=torch.float32))

        def tick(rank: int = rank) -> None:
            calls[rank] += 1

        assert check_buffers(b, "sum", between_chunks=tick) == 0
    assert calls == {0: check_chunks(count), 1: check_chunks(count)} == {0: 4, 1: 4}


_RSS_SCRIPT = textwrap.dedent(
    """
    import resource, sys
    import torch
    from collbench.runtime.executor import buffers
    from collbench.schedules.ops import Op

    count = int(sys.argv[1])
    b = buffers.make_buffers(Op.ALL_REDUCE, count, dtype=torch.float32, rank=0, world_size=2, in_place=False)
    buffers.fill(b, "sum")
    step = buffers.CHUNK_ELEMS
    for start in range(0, count, step):
        stop = min(count, start + step)
        b.output[start:stop].copy_(buffers.expected_reduction(2, start, stop, redop="sum", dtype=torch.float32))
    b.output[count // 2] += 1  # one wrong element, found
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    wrong = buffers.check_buffers(b, "sum")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(wrong, (after - before) * 1024)
    """
)


def test_the_data_check_adds_memory_independent_of_the_size() -> None:
    # 16 MiB of float32: the whole-buffer float64 check added several times the buffer; chunked,
    # the check's peak growth stays within its few chunk temporaries.
    count = 4 * MiB
    out = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(count)], capture_output=True, text=True, timeout=240, check=True
    )
    wrong, grown = (int(x) for x in out.stdout.split())
    assert wrong == 1
    bound = memory.CHECK_TEMPORARIES * CHUNK_ELEMS * 8 + 4 * MiB
    assert grown <= bound, f"the check grew the peak RSS by {grown / MiB:.1f} MiB (bound {bound / MiB:.1f} MiB)"


def test_gpu_free_memory_comes_from_nvml_in_cuda_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # The NVML fake replays nvmlDeviceGetMemoryInfo(handle).free of a recorded 8x A6000 machine.
    from collbench.topology import nvml

    recording = nvml.Recording.load(Path(__file__).resolve().parents[1] / "fixtures" / "nvml" / "pcie-a6000x8.json")
    monkeypatch.setattr(nvml, "PynvmlBackend", lambda: nvml.FakeNvmlBackend(recording))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,2")
    free = memory.gpu_free_bytes(2)
    assert len(free) == 2 and all(f > 40 << 30 for f in free)
    job = _job(world_size=2, algos=("native",), min_bytes=1 << 30, max_bytes=1 << 30)
    memory.check_device_memory(job, 2, free)  # 2 GiB a rank fits in a 48 GiB A6000

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
    with pytest.raises(ConfigError, match=r"^2 ranks need about 0\.5 GiB of host memory before any buffer"):
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


def _fake_cgroup_tree(tmp_path: Path, self_cgroup: str, files: dict[str, str], available_kib: int) -> tuple[Path, Path]:
    """A /proc (meminfo, self/cgroup) and a cgroup mount holding ``files`` (paths under the mount)."""
    proc = _fake_proc(tmp_path, available_kib)
    (proc / "self").mkdir()
    (proc / "self" / "cgroup").write_text(self_cgroup)
    mount = tmp_path / "cg"
    for name, text in files.items():
        (mount / name).parent.mkdir(parents=True, exist_ok=True)
        (mount / name).write_text(text)
    return proc, mount


SLURM_V2 = "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n"
JOB_V2 = "system.slice/slurmstepd.scope/job_42"


def test_host_memory_reads_the_process_own_v2_cgroup_and_its_tightest_ancestor(tmp_path: Path) -> None:
    """Under Slurm (or systemd, or a container) the limit is on the job's cgroup, not the root's."""
    proc, mount = _fake_cgroup_tree(
        tmp_path,
        SLURM_V2,
        {
            "memory.max": "max\n",  # the root: no limit
            f"{JOB_V2}/memory.max": f"{4 << 30}\n",
            f"{JOB_V2}/memory.current": f"{1 << 30}\n",
            f"{JOB_V2}/step_0/memory.max": f"{8 << 30}\n",
            f"{JOB_V2}/step_0/memory.current": f"{1 << 30}\n",
            f"{JOB_V2}/step_0/user/task_0/memory.max": "max\n",
            f"{JOB_V2}/step_0/user/task_0/memory.current": f"{1 << 30}\n",
        },
        64 * 1024 * 1024,
    )
    found = memory.host_memory(proc, mount)
    assert found == memory.HostMemory(3 << 30, f"cgroup memory.max of {JOB_V2}")


def test_reclaimable_page_cache_of_a_cgroup_counts_as_available(tmp_path: Path) -> None:
    proc, mount = _fake_cgroup_tree(
        tmp_path,
        "0::/box\n",
        {
            "box/memory.max": f"{4 << 30}\n",
            "box/memory.current": f"{3 << 30}\n",
            "box/memory.stat": f"anon {1 << 30}\ninactive_file {2 << 30}\n",
        },
        64 * 1024 * 1024,
    )
    assert memory.host_memory(proc, mount) == memory.HostMemory(3 << 30, "cgroup memory.max of box")


def test_host_memory_reads_the_process_own_v1_memory_cgroup(tmp_path: Path) -> None:
    proc, mount = _fake_cgroup_tree(
        tmp_path,
        "9:name=systemd:/\n4:memory:/slurm/uid_1000/job_42\n3:cpuset:/\n0::/\n",
        {
            "memory/memory.limit_in_bytes": "9223372036854771712\n",
            "memory/slurm/uid_1000/job_42/memory.limit_in_bytes": f"{2 << 30}\n",
            "memory/slurm/uid_1000/job_42/memory.usage_in_bytes": f"{512 * MiB}\n",
        },
        64 * 1024 * 1024,
    )
    found = memory.host_memory(proc, mount)
    assert found == memory.HostMemory(1536 * MiB, "cgroup memory.limit_in_bytes of slurm/uid_1000/job_42")


def test_a_container_whose_cgroup_is_its_mount_root_reads_the_root(tmp_path: Path) -> None:
    # In a cgroup namespace /proc/self/cgroup says "/" or a path the mount does not hold.
    for self_cgroup in ("0::/\n", "0::/kubepods/pod1/abc\n"):
        sub = tmp_path / str(len(self_cgroup))
        sub.mkdir()
        proc, mount = _fake_cgroup_tree(
            sub, self_cgroup, {"memory.max": f"{4 << 30}\n", "memory.current": f"{1 << 30}\n"}, 64 * 1024 * 1024
        )
        assert memory.host_memory(proc, mount) == memory.HostMemory(3 << 30, "cgroup memory.max")


def test_64_ranks_in_a_4_gib_slurm_cgroup_are_refused_before_they_start(tmp_path: Path) -> None:
    """64 ranks of torch cost 17.5 GiB before any buffer: the host's free memory said yes, the job's cgroup no."""
    proc, mount = _fake_cgroup_tree(
        tmp_path,
        SLURM_V2,
        {"memory.max": "max\n", f"{JOB_V2}/memory.max": f"{4 << 30}\n", f"{JOB_V2}/memory.current": "300000000\n"},
        100 * 1024 * 1024,  # 100 GiB free on the host
    )
    job = _job(world_size=64, algos=("ring",), min_bytes=1024, max_bytes=1024)
    with pytest.raises(ConfigError, match=r"^64 ranks need about 1\d\.\d GiB .*cgroup memory.max of system.slice"):
        memory.check_host_memory(job, 64, 64, memory.host_memory(proc, mount))


MEASURED_PEAK_RSS_MIB = {
    # (size, ranks) of an int32 ring all-reduce on gloo -> peak RSS of each rank (VmHWM), measured with
    # torch 2.13 on CPU: `collbench sweep --ranks 2 --backend gloo --algo ring -d int32 -b S -e S -n 1 -w 0`.
    # Points past buffers.KEEP_OUTPUT_BYTES keep no copy of their output for the check (with one, 2037
    # and 7420 MiB were measured).
    (512 * MiB, 2): 1586,
    (2048 * MiB, 2): 5423,
}


@pytest.mark.parametrize(("size", "ranks"), sorted(MEASURED_PEAK_RSS_MIB))
def test_the_estimate_covers_what_ranks_were_measured_to_hold(size: int, ranks: int) -> None:
    """What every rank held at its peak must fit the estimate made before they start, by a margin of
    at most 5% (a much larger one would refuse sweeps that fit)."""
    job = _job(world_size=ranks, algos=("ring",), dtype="int32", min_bytes=size, max_bytes=size)
    measured = MEASURED_PEAK_RSS_MIB[(size, ranks)] * MiB * ranks
    with pytest.raises(ConfigError):
        memory.check_host_memory(job, ranks, ranks, memory.HostMemory(measured - 1, "cgroup memory.max"))
    memory.check_host_memory(job, ranks, ranks, memory.HostMemory(int(measured * 1.05), "cgroup memory.max"))


def test_a_2_gib_int32_ring_on_2_ranks_does_not_fit_a_10_gib_cgroup(tmp_path: Path) -> None:
    proc, mount = _fake_cgroup_tree(
        tmp_path,
        "0::/user.slice/run.scope\n",
        {"user.slice/run.scope/memory.max": f"{10 << 30}\n", "user.slice/run.scope/memory.current": "290000000\n"},
        100 * 1024 * 1024,
    )
    job = _job(world_size=2, algos=("ring",), dtype="int32", min_bytes=2 << 30, max_bytes=2 << 30)
    with pytest.raises(ConfigError, match=r"2 ranks need about 10\.6 GiB"):
        memory.check_host_memory(job, 2, 2, memory.host_memory(proc, mount))


_ESTIMATE_SCRIPT = textwrap.dedent(
    """
    import resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    from collbench.runtime.sweep import memory
    from collbench.schedules.ops import Op

    count, segment = int(sys.argv[1]), int(sys.argv[2])
    for algo in ("ring", "tree", "direct"):
        most, least = memory.point_bytes(
            Op.ALL_REDUCE, algo, count, elem_bytes=4, world_size=4, in_place=False, segment_bytes=segment
        )
        print(algo, most, least)
    """
)


@pytest.mark.parametrize(
    ("count", "segment"),
    [((1 << 63) // 4, 4 << 20), ((16 * MiB) // 4, 4), (1 << 40, 4)],
    ids=["2^63 bytes", "16 MiB in 4-byte segments", "4 TiB in 4-byte segments"],
)
def test_the_estimate_is_closed_form_whatever_the_size_or_segment(count: int, segment: int) -> None:
    """One entry per segment was 22.5 GB for -b 2^63 and minutes at 4-byte segments: bounded here to
    3 GiB of address space and 60 s (the estimate of each point must take well under a second)."""
    out = subprocess.run(
        [sys.executable, "-c", _ESTIMATE_SCRIPT, str(count), str(segment)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    ring = out.stdout.split()[1:3]
    assert int(ring[0]) == 2 * count * 4 + (count // 4) * 4  # input, output, one chunk of scratch


def test_a_size_no_machine_holds_is_refused_at_once() -> None:
    with pytest.raises(ConfigError, match=r"^--max-bytes 9223372036854775808 is more than the 4 TiB"):
        _job(world_size=2, min_bytes=1 << 63, max_bytes=1 << 63)
    with pytest.raises(ConfigError, match="more than 10000 sizes"):
        _job(world_size=2, min_bytes=4, max_bytes=1 << 40, step_factor=1.0001)


def test_a_segment_size_past_the_executor_bound_is_said_in_a_note() -> None:
    job = _job(world_size=2, algos=("tree",), segment_bytes=4, min_bytes=16 * MiB, max_bytes=16 * MiB)
    assert any("4194304 segments" in note and "at most 1024" in note for note in job.notes), job.notes
    assert not _job(world_size=2, algos=("tree",), min_bytes=16 * MiB, max_bytes=16 * MiB).notes


def test_more_ranks_than_memory_holds_is_refused_before_any_schedule_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ring schedule for 100,000 ranks has 2e10 steps: the ranks' own cost is compared first."""

    def no_schedule(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a schedule was built")

    monkeypatch.setattr(memory, "largest_point", no_schedule)
    job = _job(world_size=100_000, algos=("ring",))
    with pytest.raises(ConfigError, match=r"^100000 ranks need about 27343\.8 GiB of host memory before any buffer"):
        memory.check_host_memory(job, 100_000, 100_000, memory.HostMemory(64 << 30, "MemAvailable"))
    with pytest.raises(ConfigError, match=r"--ranks 999999999: sweep takes fewer than 2\^20"):
        _job(world_size=999_999_999)
    with pytest.raises(ConfigError, match="--ranks must be at most 131072, got 200000"):
        _job(world_size=200_000)

"""What collbench's measurement adds to NCCL: all-reduce on one GPU, collbench sweep vs a bare loop.

Both sides run the same work and time it the same way, so that the ratio is collbench's overhead
alone: plain ``native`` all-reduce through ``run_sweep`` (its own rank process, barrier, timer,
gathering) against ``dist.all_reduce`` in a plain Python loop in this process, each timed in rounds of
``ROUND_ITERS`` iterations with one pair of CUDA events around each round (collbench's CUDA timer, and
nccl-tests' way); with ``--cuda-graph`` both capture their iterations in a CUDA graph and time its
launches.

What runs on one GPU: NCCL runs no algorithm on one rank (``ncclLaunchOneRank`` in NCCL's
src/enqueue.cc): in place it enqueues nothing, so both sides time torch's dispatch of an empty call
(host work only, labelled so); out of place both copy the input to the output on the GPU first (as
collbench's native call does) and that copy is what the GPU runs. Target: within 5% at every size.
Needs a CUDA GPU with NCCL.

    python benchmarks/bench_gpu_nccl_overhead.py [--sizes 8,1K,64K,1M,16M,256M] [--iters 200] [--cuda-graph]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
MODES = {"in-place": True, "out-of-place": False}


def parse_size(text: str) -> int:
    text = text.strip().upper()
    if text and text[-1] in UNITS:
        return int(text[:-1]) * UNITS[text[-1]]
    return int(text)


def collbench_times(
    sizes: list[int], iters: int, warmup: int, cuda_graph: bool, in_place: bool, work: Path
) -> dict[int, float]:
    """Median microseconds per iteration per size from ``run_sweep`` with one NCCL rank, plain ``native``."""
    from collbench.runtime.sweep.plan import SweepConfig
    from collbench.runtime.sweep.run import run_sweep

    out: dict[int, float] = {}
    for size in sizes:
        config = SweepConfig(
            world_size=1,
            backend="nccl",
            ops=("all-reduce",),
            algos=("native",),
            min_bytes=size,
            max_bytes=size,
            step_factor=2.0,
            iters=iters,
            warmup=warmup,
            in_place=(in_place,),
            cuda_graph=cuda_graph,
            stream=work / f"rows-{size}-{in_place}.jsonl",
        )
        rows = run_sweep(config)
        for row in rows:
            out[row.size_bytes] = row.time_us
    return out


def _rounds_us(call: Callable[[], object], iters: int, cuda_graph: bool) -> list[float]:
    """Microseconds per iteration of each round: what collbench's CUDA timer measures, written out here."""
    import torch

    from collbench.runtime.cuda.timing import round_sizes

    if cuda_graph:
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            for _ in range(iters):
                call()
        graph.replay()  # untimed: the first launch uploads the graph
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        return [start.elapsed_time(stop) * 1000.0 / iters]
    sizes = round_sizes(iters)
    events = [torch.cuda.Event(enable_timing=True) for _ in range(len(sizes) + 1)]
    torch.cuda.synchronize()
    events[0].record()
    for k, size in enumerate(sizes):
        for _ in range(size):
            call()
        events[k + 1].record()
    events[-1].synchronize()
    return [events[k].elapsed_time(events[k + 1]) * 1000.0 / size for k, size in enumerate(sizes)]


def bare_times(
    sizes: list[int], iters: int, warmup: int, cuda_graph: bool, in_place: bool, work: Path
) -> dict[int, float]:
    """Median microseconds per iteration per size of ``dist.all_reduce`` in a loop, timed as collbench times."""
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    store = dist.FileStore(str(work / f"store-{in_place}"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda", 0))
    out: dict[int, float] = {}
    try:
        for size in sizes:
            inp = torch.ones(size // 4, device="cuda")
            dst = inp if in_place else torch.empty_like(inp)

            def call(inp: torch.Tensor = inp, dst: torch.Tensor = dst) -> None:
                if dst.data_ptr() != inp.data_ptr():
                    dst.copy_(inp)  # collbench's native out-of-place all-reduce: a copy, then in place
                dist.all_reduce(dst)

            for _ in range(warmup):
                call()
            out[size] = statistics.median(_rounds_us(call, iters, cuda_graph))
    finally:
        dist.destroy_process_group()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,1K,64K,1M,16M,256M", help="K/M/G = powers of 1024; multiples of 4")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--cuda-graph", action="store_true", help="both sides time CUDA-graph launches")
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available() or not dist.is_nccl_available():
        print(
            f"bench_gpu_nccl_overhead needs a CUDA GPU and torch with NCCL; torch {torch.__version__} "
            f"has CUDA {torch.version.cuda}, GPU available: {torch.cuda.is_available()}",
            file=sys.stderr,
        )
        return 2
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    modes = list(MODES) if args.mode == "both" else [args.mode]
    timing = "CUDA-graph launches" if args.cuda_graph else "eager, rounds of events"
    print(f"# {torch.cuda.get_device_name()}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, {timing}")
    print("# one rank: NCCL runs no algorithm (ncclLaunchOneRank); in place nothing reaches the GPU")
    rows: list[dict[str, Any]] = []
    for mode in modes:
        in_place = MODES[mode]
        with tempfile.TemporaryDirectory(prefix="collbench-bench-") as tmp:
            work = Path(tmp)
            ours = collbench_times(sizes, args.iters, args.warmup, args.cuda_graph, in_place, work)
            bare = bare_times(sizes, args.iters, args.warmup, args.cuda_graph, in_place, work)
        what = "torch's dispatch of an empty call (host only)" if in_place else "a device-to-device copy"
        print(f"## {mode}: the GPU runs {what}")
        print("size_bytes  collbench_us  bare_loop_us  ratio")
        for size in sizes:
            if size not in ours:
                print(f"{size:>10}  (no collbench row)")
                continue
            ratio = ours[size] / bare[size]
            rows.append(
                {"mode": mode, "size_bytes": size, "collbench_us": ours[size], "bare_us": bare[size], "ratio": ratio}
            )
            print(f"{size:>10}  {ours[size]:>12.2f}  {bare[size]:>12.2f}  {ratio:>5.3f}")
    if rows:
        worst = max(abs(r["ratio"] - 1.0) for r in rows)
        print(f"# largest difference: {worst * 100:.1f}% (target within 5%)")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

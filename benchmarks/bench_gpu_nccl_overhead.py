"""What collbench's measurement adds to NCCL: all-reduce on one GPU, collbench sweep vs a bare loop.

Both time the same in-place NCCL all-reduce with CUDA events per iteration and take the median; the
bare loop is torch's ``dist.all_reduce`` in a plain Python loop in this process, collbench is
``run_sweep`` (its own rank process, barrier, timer, gathering). Target: within 5% at every size.
Needs a CUDA GPU with NCCL.

    python benchmarks/bench_gpu_nccl_overhead.py [--sizes 8,1K,64K,1M,16M,256M] [--iters 200] [--cuda-graph]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    text = text.strip().upper()
    if text and text[-1] in UNITS:
        return int(text[:-1]) * UNITS[text[-1]]
    return int(text)


def collbench_times(sizes: list[int], iters: int, warmup: int, cuda_graph: bool, work: Path) -> dict[int, float]:
    """Median microseconds per size from ``run_sweep`` with one NCCL rank, plain ``native``."""
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
            in_place=(True,),
            cuda_graph=cuda_graph,
            stream=work / f"rows-{size}.jsonl",
        )
        rows = run_sweep(config)
        for row in rows:
            out[row.size_bytes] = row.time_us
    return out


def bare_times(sizes: list[int], iters: int, warmup: int, work: Path) -> dict[int, float]:
    """Median microseconds per size of ``dist.all_reduce`` in a loop, CUDA events around each call."""
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    store = dist.FileStore(str(work / "store"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda", 0))
    out: dict[int, float] = {}
    try:
        for size in sizes:
            x = torch.ones(size // 4, device="cuda")
            for _ in range(warmup):
                dist.all_reduce(x)
            torch.cuda.synchronize()
            events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
            events[0].record()
            for i in range(iters):
                dist.all_reduce(x)
                events[i + 1].record()
            events[-1].synchronize()
            out[size] = statistics.median(events[i].elapsed_time(events[i + 1]) * 1000.0 for i in range(iters))
    finally:
        dist.destroy_process_group()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,1K,64K,1M,16M,256M", help="K/M/G = powers of 1024; multiples of 4")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--cuda-graph", action="store_true", help="collbench times CUDA-graph launches")
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
    with tempfile.TemporaryDirectory(prefix="collbench-bench-") as tmp:
        work = Path(tmp)
        ours = collbench_times(sizes, args.iters, args.warmup, args.cuda_graph, work)
        bare = bare_times(sizes, args.iters, args.warmup, work)
    print(f"# {torch.cuda.get_device_name()}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}")
    print("size_bytes  collbench_us  bare_loop_us  ratio")
    rows: list[dict[str, Any]] = []
    for size in sizes:
        if size not in ours:
            print(f"{size:>10}  (no collbench row)")
            continue
        ratio = ours[size] / bare[size]
        rows.append({"size_bytes": size, "collbench_us": ours[size], "bare_us": bare[size], "ratio": ratio})
        print(f"{size:>10}  {ours[size]:>12.2f}  {bare[size]:>12.2f}  {ratio:>5.3f}")
    if rows:
        worst = max(abs(r["ratio"] - 1.0) for r in rows)
        print(f"# largest difference: {worst * 100:.1f}% (target within 5%)")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

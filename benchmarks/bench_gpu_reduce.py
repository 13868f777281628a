"""collbench's CUDA reduction kernels against the memory's speed and against torch, in one run.

Two comparisons, per dtype and buffer size (needs a CUDA GPU):

* bandwidth: bytes read + written per second of ``reduce_many_cuda`` (k inputs, one output) against a
  device-to-device ``copy_`` (one read, one write) measured beside it; target >= 90% for large buffers.
* speed-up: one fused kernel reducing k-1 buffers into dst (``dst = dst + s1 + ... + s(k-1)``) against
  torch's chained ``dst.add_(s)`` doing the same; target >= 1.5x at k = 4.

    python benchmarks/bench_gpu_reduce.py [--dtype float32,bfloat16] [--sizes 1M,16M,256M] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_SIZES = "1M,16M,64M,256M"
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    text = text.strip().upper()
    if text and text[-1] in UNITS:
        return int(text[:-1]) * UNITS[text[-1]]
    return int(text)


def time_us(fn: Callable[[], object], reps: int, warmup: int = 3) -> float:
    """Median microseconds of ``fn`` over ``reps`` runs, from CUDA events around each."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    events[0].record()
    for i in range(reps):
        fn()
        events[i + 1].record()
    events[-1].synchronize()
    return statistics.median(events[i].elapsed_time(events[i + 1]) * 1000.0 for i in range(reps))


def bench(dtype_name: str, size_bytes: int, ks: list[int], reps: int) -> list[dict[str, Any]]:
    import torch

    from collbench.runtime.cuda import kernels as cuda_kernels

    dtype = getattr(torch, dtype_name)
    count = size_bytes // torch.tensor([], dtype=dtype).element_size()
    src = torch.rand(count, device="cuda").to(dtype) * 1e-3
    copy_dst = torch.empty_like(src)
    copy_us = time_us(lambda: copy_dst.copy_(src), reps)
    copy_gbps = 2 * size_bytes / copy_us / 1e3
    rows = []
    for k in ks:
        inputs = [torch.rand(count, device="cuda").to(dtype) * 1e-3 for _ in range(k)]
        dst, sources = inputs[0], inputs[1:]
        if not cuda_kernels.reduce_many_cuda(dst, sources, "sum"):
            raise SystemExit("the CUDA kernels are not available here (see the warning above)")
        ours_us = time_us(lambda dst=dst, sources=sources: cuda_kernels.reduce_many_cuda(dst, sources, "sum"), reps)

        def chained(dst: Any = dst, sources: list[Any] = sources) -> None:
            for s in sources:
                dst.add_(s)

        torch_us = time_us(chained, reps)
        moved = (k + 1) * size_bytes  # k inputs read (dst among them), dst written
        ours_gbps = moved / ours_us / 1e3
        rows.append(
            {
                "dtype": dtype_name,
                "size_bytes": size_bytes,
                "k": k,
                "kernel_us": round(ours_us, 2),
                "kernel_gbps": round(ours_gbps, 1),
                "copy_gbps": round(copy_gbps, 1),
                "vs_copy": round(ours_gbps / copy_gbps, 3),
                "torch_add_us": round(torch_us, 2),
                "speedup_vs_torch": round(torch_us / ours_us, 2),
            }
        )
        del inputs, dst, sources
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32,bfloat16,float16")
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="buffer sizes, K/M/G = powers of 1024")
    parser.add_argument("--k", default="2,3,4,8", help="inputs per reduction (dst's own content among them)")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print(
            f"bench_gpu_reduce needs a CUDA GPU; torch {torch.__version__} sees none "
            f"({'CPU-only build' if torch.version.cuda is None else 'no usable GPU'})",
            file=sys.stderr,
        )
        return 2
    ks = [int(k) for k in args.k.split(",")]
    rows: list[dict[str, Any]] = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    header = "dtype     size_bytes   k  kernel_us  kernel_GB/s  copy_GB/s  vs_copy  torch_add_us  speedup"
    print(header)
    for dtype_name in args.dtype.split(","):
        for size in (parse_size(s) for s in args.sizes.split(",")):
            for r in bench(dtype_name.strip(), size, ks, args.reps):
                rows.append(r)
                print(
                    f"{r['dtype']:<9} {r['size_bytes']:>10} {r['k']:>3} {r['kernel_us']:>10} {r['kernel_gbps']:>12} "
                    f"{r['copy_gbps']:>10} {r['vs_copy']:>8} {r['torch_add_us']:>13} {r['speedup_vs_torch']:>8}"
                )
    largest = max(r["size_bytes"] for r in rows)
    big = [r for r in rows if r["size_bytes"] == largest]
    worst_copy = min(r["vs_copy"] for r in big)
    k4 = [r["speedup_vs_torch"] for r in big if r["k"] == 4]
    print(f"# largest buffers: kernel bandwidth / copy bandwidth >= {worst_copy} (target 0.90)")
    if k4:
        print(f"# k=4 speed-up over chained add_: {min(k4)}x or more (target 1.5x)")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

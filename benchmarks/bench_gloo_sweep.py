"""collbench on gloo, side by side with its references, in one run; prints ratios.

1. ``ring`` all-reduce against gloo's own all-reduce (``native``) at 2 and 4 ranks, 64 KiB..64 MiB:
   busbw ratio per size (target >= 1.0 from 1 MiB up).
2. Harness cost: ``native`` 8-byte all-reduce as timed by ``collbench sweep`` against a bare loop of
   ``torch.distributed.all_reduce`` timed the same way (per iteration, slowest rank, median); the two
   alternate several times and the medians are compared (target <= 1.05).
3. The best all-reduce algorithm's busbw at 64 MiB (2 ranks) against a plain TCP stream on loopback
   measured in the same run.
4. ``pairwise`` all-to-all (collbench's schedule, out of place: input then output buffer, the own
   block a local copy) against gloo's own ``all_to_all_single`` (``native``) at 2 ranks, 64 KiB..64 MiB:
   busbw ratio per size (target >= 1.0 from 1 MiB up, as for all-reduce).
5. Small messages (``--only small-p2p``): why collbench's schedules on gloo take longer at 16-64 KiB
   than at 128-256 KiB. At 2 ranks, 16 KiB..512 KiB: a bare loop of one ``batch_isend_irecv``
   exchange (what a one-shot or ring step posts, with no reduction and nothing of collbench's), the
   same bytes one direction at a time (``send`` then ``recv``), and gloo's ``all_reduce``, each timed per
   iteration (slowest rank; p10, p25, p50), beside ``collbench sweep``'s one-shot, ring and native rows.

Run: ``python benchmarks/bench_gloo_sweep.py [--quick] [--json FILE]`` on a machine as quiet as you can
make it; figures from a loaded machine say more about its scheduler than about collbench.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from collbench.runtime.executor.timing import CpuTimer, slowest_rank
from collbench.runtime.launch.ranks import RankContext, launch
from collbench.runtime.sweep.plan import SweepConfig
from collbench.runtime.sweep.run import run_sweep

MiB = 1 << 20


def _sweep(
    tmp: Path, world_size: int, algos: tuple[str, ...], lo: int, hi: int, op: str = "all-reduce", **extra: Any
) -> list[Any]:
    extra.setdefault("in_place", (True,))
    extra.setdefault("step_factor", 4)
    config = SweepConfig(
        world_size=world_size,
        backend="gloo",
        ops=(op,),
        algos=algos,
        min_bytes=lo,
        max_bytes=hi,
        check=False,
        timeout_s=300,
        stream=tmp / f"bench-{op}-{world_size}-{'-'.join(algos)}-{lo}.jsonl",
        **extra,
    )
    return run_sweep(config)


def ring_vs_native(tmp: Path, quick: bool) -> list[dict[str, Any]]:
    out = []
    hi = 16 * MiB if quick else 64 * MiB
    for n in (2, 4):
        rows = _sweep(tmp, n, ("ring", "native"), 64 * 1024, hi, point_budget_s=1.0 if quick else 2.0, warmup=2)
        by = {(r.algo, r.size_bytes): r for r in rows}
        for size in sorted({r.size_bytes for r in rows}):
            ring, native = by[("ring", size)], by[("native", size)]
            out.append(
                {
                    "ranks": n,
                    "size_bytes": size,
                    "ring_busbw_gbps": ring.busbw_gbps,
                    "native_busbw_gbps": native.busbw_gbps,
                    "ratio": ring.busbw_gbps / native.busbw_gbps,
                }
            )
    return out


def pairwise_vs_native_alltoall(tmp: Path, quick: bool) -> list[dict[str, Any]]:
    """collbench's pairwise all-to-all against gloo's all_to_all_single, 2 ranks, out of place (all-to-all
    has no in-place form here), busbw per size from 64 KiB."""
    hi = 16 * MiB if quick else 64 * MiB
    rows = _sweep(
        tmp,
        2,
        ("pairwise", "native"),
        64 * 1024,
        hi,
        op="all-to-all",
        in_place=(False,),
        point_budget_s=1.0 if quick else 2.0,
        warmup=2,
    )
    by = {(r.algo, r.size_bytes): r for r in rows}
    out = []
    for size in sorted({r.size_bytes for r in rows}):
        pairwise, native = by[("pairwise", size)], by[("native", size)]
        out.append(
            {
                "ranks": 2,
                "size_bytes": size,
                "pairwise_busbw_gbps": pairwise.busbw_gbps,
                "native_busbw_gbps": native.busbw_gbps,
                "ratio": pairwise.busbw_gbps / native.busbw_gbps,
            }
        )
    return out


def _bare_loop(ctx: RankContext, iters: int) -> float:
    t = torch.zeros(2, dtype=torch.float32)
    for _ in range(20):
        dist.all_reduce(t)
    dist.barrier()
    mine = torch.tensor(CpuTimer().time_iterations(lambda: dist.all_reduce(t), iters), dtype=torch.float64)
    gathered = [torch.empty_like(mine) for _ in range(ctx.world_size)]
    dist.all_gather(gathered, mine)
    return statistics.median(slowest_rank([g.tolist() for g in gathered]))


SMALL_SIZES = tuple(16 * 1024 << k for k in range(6))
"""16 KiB..512 KiB: where one-shot and ring on gloo ran faster at 128-256 KiB than at 64 KiB."""


def _quartiles(times: list[float]) -> list[float]:
    xs = sorted(times)
    return [xs[int(q * (len(xs) - 1))] for q in (0.1, 0.25, 0.5)]


def _loops_at(ctx: RankContext, size: int, iters: int) -> dict[str, list[float]]:
    """Per loop at ``size`` bytes: p10, p25 and p50 (us) of the slowest rank's iterations. 2 ranks."""
    peer = 1 - ctx.rank
    buf = torch.ones(size // 4)
    scratch = torch.empty_like(buf)

    def exchange() -> None:
        ops = [dist.P2POp(dist.irecv, scratch, peer), dist.P2POp(dist.isend, buf, peer)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    def one_way() -> None:
        if ctx.rank == 0:
            dist.send(buf, peer)
            dist.recv(scratch, peer)
        else:
            dist.recv(scratch, peer)
            dist.send(buf, peer)

    def all_reduce() -> None:
        dist.all_reduce(buf)

    out = {}
    for name, fn in (("exchange", exchange), ("one_way", one_way), ("all_reduce", all_reduce)):
        for _ in range(20):
            fn()
        dist.barrier()
        mine = torch.tensor(CpuTimer().time_iterations(fn, iters), dtype=torch.float64)
        gathered = [torch.empty_like(mine) for _ in range(ctx.world_size)]
        dist.all_gather(gathered, mine)
        out[name] = _quartiles(slowest_rank([g.tolist() for g in gathered]))
    return out


def _p2p_loops(ctx: RankContext, iters: int) -> dict[str, dict[str, list[float]]]:
    """Per loop and size (bytes, as text): p10, p25 and p50 (us) of the slowest rank's iterations."""
    out: dict[str, dict[str, list[float]]] = {}
    for size in SMALL_SIZES:
        for name, figures in _loops_at(ctx, size, iters).items():
            out.setdefault(name, {})[str(size)] = figures
    return out


def small_p2p(tmp: Path, quick: bool) -> dict[str, Any]:
    """The bare loops at 2 ranks, then collbench's sweep of one-shot, ring and native at the same sizes."""
    loops = launch(2, _p2p_loops, 300 if quick else 1000, backend="gloo", timeout_s=300)[0]
    rows = _sweep(tmp, 2, ("one-shot", "ring", "native"), SMALL_SIZES[0], SMALL_SIZES[-1], step_factor=2)
    sweep = {
        f"{r.algo} {r.size_bytes}": {"p25_us": r.time_us_p25, "p50_us": r.time_us, "min_us": r.time_us_min}
        for r in rows
    }
    return {"loops": loops, "sweep": sweep}


def harness_cost(tmp: Path, quick: bool) -> dict[str, Any]:
    iters = 1000 if quick else 3000
    collbench_us, bare_us = [], []
    for _ in range(2 if quick else 3):
        rows = _sweep(tmp, 2, ("native",), 8, 8, iters=iters, warmup=20)
        collbench_us.append(rows[0].time_us)
        bare_us.append(launch(2, _bare_loop, iters, backend="gloo", timeout_s=120)[0])
    c, b = statistics.median(collbench_us), statistics.median(bare_us)
    return {"collbench_us": collbench_us, "bare_us": bare_us, "ratio": c / b}


def _tcp_sink(port_queue: Any, total: int) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port_queue.put(server.getsockname()[1])
    conn, _ = server.accept()
    view = memoryview(bytearray(4 * MiB))
    got = 0
    while got < total:
        n = conn.recv_into(view)
        if n == 0:
            break
        got += n
    conn.sendall(b"k")
    conn.close()


def tcp_stream_gbps(total: int = 512 * MiB) -> float:
    """GB/s of one TCP stream on 127.0.0.1 between two processes (4 MiB writes)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    sink = ctx.Process(target=_tcp_sink, args=(queue, total))
    sink.start()
    port = queue.get(timeout=60)
    sock = socket.create_connection(("127.0.0.1", port))
    chunk = bytes(4 * MiB)
    t0 = time.perf_counter()
    sent = 0
    while sent < total:
        sock.sendall(chunk)
        sent += len(chunk)
    sock.recv(1)
    elapsed = time.perf_counter() - t0
    sock.close()
    sink.join()
    return total / elapsed / 1e9


def best_at_64m(tmp: Path, quick: bool) -> dict[str, Any]:
    size = 16 * MiB if quick else 64 * MiB
    algos = ("ring", "two-tree", "recursive-doubling", "rabenseifner", "direct", "one-shot", "native")
    rows = _sweep(tmp, 2, algos, size, size, iters=3, warmup=1)
    tcp = tcp_stream_gbps()
    best = max(rows, key=lambda r: r.busbw_gbps)
    return {
        "size_bytes": size,
        "busbw_gbps": {r.algo: r.busbw_gbps for r in rows},
        "best": best.algo,
        "tcp_stream_gbps": tcp,
        "ratio": best.busbw_gbps / tcp,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and budgets")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--only", choices=("all", "all-to-all", "small-p2p"), default="all", help="run one section only"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.only == "small-p2p":
            small = small_p2p(tmp, args.quick)
            _print_small(small)
            if args.json:
                args.json.write_text(json.dumps(small, indent=2))
            return
        if args.only == "all-to-all":
            figures = {"alltoall_pairwise_vs_native": pairwise_vs_native_alltoall(tmp, args.quick)}
            _print_alltoall(figures["alltoall_pairwise_vs_native"])
            if args.json:
                args.json.write_text(json.dumps(figures, indent=2))
            return
        figures = {
            "ring_vs_native": ring_vs_native(tmp, args.quick),
            "harness_cost": harness_cost(tmp, args.quick),
            "best_vs_tcp": best_at_64m(tmp, args.quick),
            "alltoall_pairwise_vs_native": pairwise_vs_native_alltoall(tmp, args.quick),
        }
    print("ring vs native all-reduce (busbw, GB/s)")
    print(f"{'ranks':>5} {'size':>10} {'ring':>8} {'native':>8} {'ratio':>6}")
    for f in figures["ring_vs_native"]:
        print(
            f"{f['ranks']:>5} {f['size_bytes']:>10} {f['ring_busbw_gbps']:8.3f} {f['native_busbw_gbps']:8.3f}"
            f" {f['ratio']:6.2f}"
        )
    h = figures["harness_cost"]
    print(
        f"harness: collbench native 8 B {statistics.median(h['collbench_us']):.1f} us vs bare loop "
        f"{statistics.median(h['bare_us']):.1f} us: ratio {h['ratio']:.3f}"
    )
    b = figures["best_vs_tcp"]
    per_algo = ", ".join(f"{k} {v:.3f}" for k, v in b["busbw_gbps"].items())
    print(f"busbw at {b['size_bytes'] // MiB} MiB, 2 ranks: {per_algo}")
    print(f"best {b['best']} vs TCP stream on loopback {b['tcp_stream_gbps']:.3f} GB/s: ratio {b['ratio']:.3f}")
    _print_alltoall(figures["alltoall_pairwise_vs_native"])
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


def _print_small(figures: dict[str, Any]) -> None:
    print("2 ranks, us: bare loops p10/p25/p50 (slowest rank); collbench sweep p25 (min)")
    print(
        f"{'size':>7} {'exchange':>17} {'one way':>17} {'all_reduce':>17} {'one-shot':>13} {'ring':>13} {'native':>13}"
    )
    loops, sweep = figures["loops"], figures["sweep"]
    for size in SMALL_SIZES:
        cells = ["/".join(f"{x:.0f}" for x in loops[name][str(size)]) for name in ("exchange", "one_way", "all_reduce")]
        rows = [sweep[f"{algo} {size}"] for algo in ("one-shot", "ring", "native")]
        swept = [f"{r['p25_us']:.0f} ({r['min_us']:.0f})" for r in rows]
        print(f"{size // 1024:>5}Ki " + " ".join(f"{c:>17}" for c in cells) + " " + " ".join(f"{c:>13}" for c in swept))


def _print_alltoall(figures: list[dict[str, Any]]) -> None:
    print("pairwise vs native all-to-all, out of place (busbw, GB/s)")
    print(f"{'ranks':>5} {'size':>10} {'pairwise':>8} {'native':>8} {'ratio':>6}")
    for f in figures:
        print(
            f"{f['ranks']:>5} {f['size_bytes']:>10} {f['pairwise_busbw_gbps']:8.3f} {f['native_busbw_gbps']:8.3f}"
            f" {f['ratio']:6.2f}"
        )


if __name__ == "__main__":
    main()

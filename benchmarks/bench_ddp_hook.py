"""A training job with collbench's profile against plain DDP: the whole user flow, through the CLI.

Cluster mode (default; needs root, ``ip`` and ``tc``): four network namespaces, one rank each, every
directed pair shaped with htb (benchmarks/netns.py): the pairs ``--slow-pairs`` (default 1-2,3-0) at
``--slow`` Mbit/s, the others at ``--fast``. As a user would, each step a torchrun-style job over the namespaces:

1. ``collbench discover --probe -O measured.yaml``
2. ``collbench tune --topology measured.yaml --backend gloo -b B -e E -O profile.yaml``: the sizes
   DDP's buckets have for this model (its first bucket is capped at 1 MiB, the others at
   ``bucket_cap_mb``)
3. a DDP training loop (an MLP of 2.63 M parameters, gloo), plain DDP and DDP with
   ``collbench.torch.ddp_comm_hook(profile)`` stepping in turn (which one goes first alternates),
   with DDP's default buckets (25 MiB) and with 1 MiB buckets.

Local mode (``--local``): 2 ranks on this machine, no shaping: ``collbench tune --ranks 2`` with the
same sizes, then the same training loop.

Both models start from the same weights and see the same data; their parameters must match at the
end (checked: relative difference at most 1e-4, as summation order differs). Prints the per-step time
of each and their ratio (paired steps: median and quartiles of plain/hook), the first step's time of
each (slowest rank: DDP's first backward, and the hook's rules and schedules made), which rule each
bucket size took, and the hook's per-call overhead at the profile's smallest native size: the hook on a
bucket against torch's own ``allreduce_hook`` (what DDP's default hook runs) and against a bare
``dist.all_reduce``, interleaved.

Targets: >= 3x per step on the cluster with slow pairs 1-2,3-0, >= 0.98x with 0-2,1-3 (where the
tune picks native: the hook must cost nothing); on the uniform machine never slower than plain DDP
beyond noise; per-call overhead under 5% of native's time.

    python benchmarks/bench_ddp_hook.py [--local] [--slow-pairs 0-2,1-3] [--steps 20] [--profile P.yaml]

``--profile`` skips probe and tune and trains with that profile (to repeat a training run).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parents[1]
SLOW_PAIRS = "1-2,3-0"
BUCKET_CAPS_MB = (25.0, 1.0)
SIZES = ("512K", "16M")
"""tune's -b/-e: the model's buckets are 0.5-8.4 MiB under both caps (printed by the job)."""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "collbench.cli.app", *args]


# ---------------------------------------------------------------- the training job (one per rank)


def _model() -> Any:
    import torch

    torch.manual_seed(0)
    # 2,629,130 parameters: 10.5 MB of float32 gradients per step.
    return torch.nn.Sequential(
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10),
    )  # fmt: skip


class _Bucket:
    """What a comm hook reads of dist.GradBucket: the flat buffer (for the per-call timing)."""

    def __init__(self, buffer: Any) -> None:
        self._buffer = buffer

    def buffer(self) -> Any:
        return self._buffer


def _max_over_ranks(values: list[float]) -> list[float]:
    import torch
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [float(v) for v in t]


def _train(profile: Any, cap_mb: float, steps: int) -> dict[str, Any]:
    """Plain DDP against DDP set up by collbench.torch.register_comm_hook, steps interleaved. Where
    that registers nothing (the profile is native at every size this model's buckets can have), a
    third model with ddp_comm_hook forced on shows what the hook itself costs."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import collbench.torch as ctorch
    from collbench.schedules.ops import Op

    rank, world = dist.get_rank(), dist.get_world_size()
    models = {"plain": DDP(_model(), bucket_cap_mb=cap_mb), "hook": DDP(_model(), bucket_cap_mb=cap_mb)}
    sizes: dict[int, int] = {}

    def recording(inner: Any) -> Any:
        def hook(group: Any, bucket: Any) -> Any:
            nbytes = bucket.buffer().numel() * bucket.buffer().element_size()
            sizes[nbytes] = sizes.get(nbytes, 0) + 1
            return inner(group, bucket)

        hook.__annotations__ = inner.__annotations__
        return hook

    registered = ctorch.register_comm_hook(models["hook"], profile) is not None
    if registered:
        # Register again through the recorder, on a fresh model, so bucket sizes can be shown.
        models["hook"] = DDP(_model(), bucket_cap_mb=cap_mb)
        models["hook"].register_comm_hook(None, recording(ctorch.ddp_comm_hook(profile)))
    else:
        models["forced hook"] = DDP(_model(), bucket_cap_mb=cap_mb)
        models["forced hook"].register_comm_hook(None, recording(ctorch.ddp_comm_hook(profile)))
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.01) for k, m in models.items()}
    gen = torch.Generator().manual_seed(1000 + rank)
    names = list(models)
    times: dict[str, list[float]] = {k: [] for k in names}
    first: dict[str, float] = {}
    warmup = 2  # DDP rebuilds its buckets after the first step; the hook compiles on its first calls
    for step in range(warmup + steps):
        x, y = torch.randn(64, 1024, generator=gen), torch.randint(0, 10, (64,), generator=gen)
        for name in names[step % len(names) :] + names[: step % len(names)]:  # each goes first in turn
            dist.barrier()
            t0 = time.perf_counter()
            opts[name].zero_grad()
            torch.nn.functional.cross_entropy(models[name](x), y).backward()
            opts[name].step()
            if step >= warmup:
                times[name].append(time.perf_counter() - t0)
            elif step == 0:
                first[name] = time.perf_counter() - t0  # the hook's plans and schedules are made here
    worst = {k: _max_over_ranks(v) for k, v in times.items()}  # a step lasts as long as its slowest rank
    first_worst = dict(zip(names, _max_over_ranks([first[k] for k in names]), strict=True))
    rel = {
        name: max(
            float(((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item())
            for a, b in zip(models[name].parameters(), models["plain"].parameters(), strict=True)
        )
        for name in names[1:]
    }
    rule_set = profile.rule_set(world)
    rules = {str(n): rule_set.select(Op.ALL_REDUCE, n).algo for n in sorted(sizes)}
    return {
        "times_s": worst, "first_step_s": first_worst,
        "max_rel_diff": rel, "bucket_bytes": sorted(sizes), "rules": rules, "registered": registered,
    }  # fmt: skip


def _per_call(hook: Any, nbytes: int, reps: int) -> dict[str, Any]:
    """Seconds per call (slowest rank) of the hook, torch's allreduce_hook and a bare all_reduce, the
    three back to back in each repetition (which goes first rotates), every repetition kept."""
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    buf = torch.ones(nbytes // 4, dtype=torch.float32)

    def run(kind: str) -> None:
        if kind == "hook":
            hook(None, _Bucket(buf)).wait()
        elif kind == "torch_hook":
            allreduce_hook(None, _Bucket(buf)).wait()  # type: ignore[arg-type]
        else:
            dist.all_reduce(buf)

    kinds = ("hook", "torch_hook", "all_reduce")
    for kind in kinds:  # warm-up: connections, the hook's plan
        run(kind)
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for rep in range(reps):
        for kind in kinds[rep % 3 :] + kinds[: rep % 3]:
            dist.barrier()
            t0 = time.perf_counter()
            run(kind)
            times[kind].append(time.perf_counter() - t0)
    return {k: _max_over_ranks(v) for k, v in times.items()}


def _median_ci(values: list[float]) -> tuple[float, float, float]:
    """The median and a 95% confidence interval for it (order statistics: binomial, normal approx.)."""
    ordered = sorted(values)
    n = len(ordered)
    half = 1.96 * (n**0.5) / 2
    lo, hi = max(int(n / 2 - half), 0), min(int(n / 2 + half), n - 1)
    return ordered[lo], statistics.median(ordered), ordered[hi]


def job(profile_path: str, out: str, steps: int, overhead_reps: int) -> None:
    import torch
    import torch.distributed as dist

    import collbench.torch as ctorch
    from collbench.profile.document import Profile
    from collbench.schedules.ops import Op

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    try:
        profile = Profile.load(profile_path)
        results: dict[str, Any] = {"world_size": dist.get_world_size(), "runs": {}}
        for cap in BUCKET_CAPS_MB:
            results["runs"][str(cap)] = _train(profile, cap, steps)
        rules = profile.rule_set(dist.get_world_size()).rules_for(Op.ALL_REDUCE)
        native = [r for r in rules if r.algo == "native"]
        if native:
            # The smallest size the tune measured native winning at: its rule's lower bound, or the
            # tune's smallest size where that rule starts at 0.
            nbytes = max(native[0].min_bytes, _parse_size(SIZES[0]))
            results["overhead"] = {"bytes": nbytes, **_per_call(ctorch.ddp_comm_hook(profile), nbytes, overhead_reps)}
        if dist.get_rank() == 0:
            Path(out).write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


# ---------------------------------------------------------------- the driver


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], statistics.median(values), q[2]


def _report(doc: dict[str, Any], label: str) -> dict[str, Any]:
    print(f"{label}: {doc['world_size']} ranks")
    summary: dict[str, Any] = {}
    for cap, run in doc["runs"].items():
        buckets = ", ".join(f"{int(n) / 2**20:.2f} MiB: {run['rules'][str(n)]}" for n in run["bucket_bytes"])
        how = "hook registered" if run["registered"] else "no hook registered (native at every bucket size)"
        print(f"  buckets {cap} MiB: {how}; bucket sizes and rules: {buckets}")
        plain = run["times_s"]["plain"]
        firsts = ", ".join(f"{name} {t * 1e3:.0f} ms" for name, t in run.get("first_step_s", {}).items())
        print(f"    first step (DDP's first backward; the hook's rules and schedules made): {firsts}")
        for name, times in run["times_s"].items():
            if name == "plain":
                continue
            ratios = [p / h for p, h in zip(plain, times, strict=True)]
            lo, mid, hi = _quartiles(ratios)
            diff = run["max_rel_diff"][name]
            print(
                f"    {name}: step plain {statistics.median(plain) * 1e3:.0f} ms, {name} "
                f"{statistics.median(times) * 1e3:.0f} ms: plain/{name} {mid:.2f}x (quartiles {lo:.2f}-{hi:.2f}, "
                f"{len(ratios)} paired steps); parameters equal within {diff:.1e} relative"
            )
            summary[f"{cap} {name}"] = {"ratio": mid, "q1": lo, "q3": hi, "max_rel_diff": diff}
            if diff > 1e-4:
                raise SystemExit(f"parameters differ: {diff:.2e} relative ({name}, bucket cap {cap} MiB)")
    over = doc.get("overhead")
    if over:
        # Overhead: the hook against torch's own Python hook, paired within each repetition; as a
        # share of a bare all_reduce's median time.
        native = statistics.median(over["all_reduce"])
        extra = [h - t for h, t in zip(over["hook"], over["torch_hook"], strict=True)]
        lo, mid, hi = (100 * v / native for v in _median_ci(extra))
        print(
            f"  per call at {over['bytes'] / 2**20:.2f} MiB (native rule), medians of {len(extra)}: hook "
            f"{statistics.median(over['hook']) * 1e6:.0f} us, torch's allreduce_hook "
            f"{statistics.median(over['torch_hook']) * 1e6:.0f} us, all_reduce {native * 1e6:.0f} us; "
            f"hook - allreduce_hook {mid:+.1f}% of native (95% CI {lo:+.1f} to {hi:+.1f})"
        )
        summary["overhead_pct"] = {"median": mid, "ci95": [lo, hi]}
    else:
        print("  the profile has no native rule: no per-call overhead to measure")
    return summary


def _run(argv: list[str], cwd: Path, timeout_s: float, env: dict[str, str] | None = None) -> str:
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, env=env)
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv[2:])} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    print(f"  ({' '.join(argv[3:6])}... took {time.perf_counter() - t0:.0f} s)")
    return done.stdout


def _job_argv(profile: Path, out: Path, args: argparse.Namespace) -> list[str]:
    return [sys.executable, __file__, "--job", str(profile), str(out), str(args.steps), str(args.overhead_reps)]


def _cluster(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from netns import NamespaceCluster, netns_unavailable

    why = netns_unavailable()
    if why is not None:
        raise SystemExit(f"skipped: {why}")
    n = 4
    slow = _pairs(args.slow_pairs, n)
    rates = [[args.slow if frozenset((i, j)) in slow else args.fast for j in range(n)] for i in range(n)]
    env = {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    with NamespaceCluster(rates) as cluster:
        print(f"cluster: 4 namespaces, pairs {args.slow_pairs} at {args.slow} Mbit/s, the others at {args.fast}")
        profile = Path(args.profile) if args.profile else tmp / "profile.yaml"
        if not args.profile:
            t0 = time.perf_counter()
            cluster.run_job(
                _cli("discover", "--probe", "-O", "measured.yaml", "--timeout", "120"),
                cwd=tmp, timeout_s=600, env=env, launcher=args.launcher,
            )  # fmt: skip
            print(f"  discover --probe: {time.perf_counter() - t0:.0f} s")
            t0 = time.perf_counter()
            tune = ["tune", "--topology", "measured.yaml", "--backend", "gloo", "-b", SIZES[0], "-e", SIZES[1]]
            outs = cluster.run_job(
                _cli(*tune, *args.tune_args, "--timeout", "300", "-O", str(profile)),
                cwd=tmp, timeout_s=args.tune_timeout, env=env, launcher=args.launcher,
            )  # fmt: skip
            print(f"  tune: {time.perf_counter() - t0:.0f} s")
            print("\n".join("    " + line for line in outs[0].strip().splitlines()[-25:]))
        out = tmp / "train.json"
        t0 = time.perf_counter()
        cluster.run_job(_job_argv(profile, out, args), cwd=tmp, timeout_s=3600, env=env, launcher="torchrun")
        print(f"  training: {time.perf_counter() - t0:.0f} s")
        return json.loads(out.read_text())


def _pairs(text: str, n: int) -> set[frozenset[int]]:
    """``"1-2,3-0"`` as the set of unordered rank pairs it names (ranks below ``n``)."""
    pairs = set()
    for item in text.split(","):
        a, _, b = item.partition("-")
        if not (a.strip().isdigit() and b.strip().isdigit()) or int(a) == int(b) or max(int(a), int(b)) >= n:
            raise SystemExit(f"error: --slow-pairs wants pairs of distinct ranks below {n} like 1-2,3-0, got {item!r}")
        pairs.add(frozenset((int(a), int(b))))
    return pairs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _local(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    n = 2
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "SLURM_", "PMI_", "MASTER_"))}
    base.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    print("local: 2 ranks on this machine, no shaping")
    profile = Path(args.profile) if args.profile else tmp / "profile.yaml"
    if not args.profile:
        tune = ["tune", "--ranks", str(n), "--backend", "gloo", "-b", SIZES[0], "-e", SIZES[1], *args.tune_args]
        out = _run(_cli(*tune, "-O", str(profile)), tmp, args.tune_timeout, base)
        print("\n".join("    " + line for line in out.strip().splitlines()[-25:]))
    out_path, port = tmp / "train.json", str(_free_port())
    procs = []
    for rank in range(n):
        env = dict(base, RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(n))
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen(_job_argv(profile, out_path, args), cwd=tmp, env=env, text=True))
    if any(p.wait(timeout=3600) != 0 for p in procs):
        raise SystemExit("the training job failed")
    return json.loads(out_path.read_text())


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        job(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--local", action="store_true", help="2 ranks on this machine, no namespaces")
    ap.add_argument("--fast", type=float, default=300.0, help="Mbit/s of the fast pairs")
    ap.add_argument("--slow", type=float, default=40.0, help="Mbit/s of the slow pairs")
    ap.add_argument("--slow-pairs", default=SLOW_PAIRS, help="the slow rank pairs, e.g. 1-2,3-0 or 0-2,1-3")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per model and bucket size")
    ap.add_argument("--overhead-reps", type=int, default=200, help="calls per kind for the per-call overhead")
    ap.add_argument("--launcher", default="torchrun", help="launcher environment for probe and tune")
    ap.add_argument("--profile", help="train with this profile (skip probe and tune)")
    ap.add_argument("--keep", help="copy the profile and its results to this folder")
    ap.add_argument("--tune-timeout", type=float, default=3600.0)
    ap.add_argument("--tune-args", nargs="*", default=[], help="more tune options (e.g. --quick)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        t0 = time.perf_counter()
        doc = _local(args, tmp) if args.local else _cluster(args, tmp)
        summary = _report(doc, "local" if args.local else "cluster")
        print(f"total {time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.1f}")
        if args.keep:
            keep = Path(args.keep)
            keep.mkdir(parents=True, exist_ok=True)
            for f in tmp.iterdir():
                if f.suffix in (".yaml", ".jsonl", ".json"):
                    (keep / f.name).write_bytes(f.read_bytes())
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "raw": doc}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

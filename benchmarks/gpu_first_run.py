"""collbench's first run on a GPU machine lent briefly: most telling first, within one budget, six files.

    python3 benchmarks/gpu_first_run.py --out DIR [--minutes 8] [--dry-run]

On a bare machine (nothing installable), from a checkout: ``PYTHONPATH=$PWD`` (and the wheels of
scripts/gpu-wheels.sh, installed with ``--no-index``, first on it; docs/development.md). The steps, in order,
each in its own process and time limit, the cheapest and most telling first so that a run cut short
has learnt them:

1. ``environment``: the GPU, driver, torch, NCCL, nvcc, ``TORCH_CUDA_ARCH_LIST``, ``Python.h``, ninja,
   nvidia-ml-py, jsonschema or not.
2. ``nvml-record``: ``collbench discover --record`` (the NVML recording CPU tests replay later).
3. ``discover-vs-smi``: ``nvidia-smi topo -m`` against collbench's NVML discovery, pair by pair.
4. ``kernel-build``: the CUDA reduction kernels built once, into a cache every later step shares
   (``COLLBENCH_CACHE_DIR`` and ``TORCH_EXTENSIONS_DIR``): the summary says whether a later step
   rebuilt them. A failed build's whole compiler output is kept (``collbench-build-failure.log``).
5. ``nccl-plugin``: collbench's NCCL tuner plugin built and loaded by the real NCCL at one rank:
   NCCL's line saying it uses the plugin and the plugin's ``rules from`` line.
6. ``device-check-1G``: a 1 GiB all-reduce and reduce (ring, native) checked on the device.
7. ``bench-reduce``: the reduce kernel against a device-to-device copy (benchmarks/bench_gpu_reduce.py).
8. ``pytest-gpu``: ``pytest tests/gpu``.
9. ``tune``: the README's ``collbench tune --quick``, trimmed to 1 MiB.

The budget (``--minutes``, 8 by default: the lent machine takes 10 minutes a command) is shared: a
step's limit is its own or what is left, whichever is less, and a step that overruns is interrupted
(SIGINT, then SIGKILL ``GRACE_S`` later), recorded, and the next one starts. At most six files are
written, directly under ``--out`` (a new or empty folder; one holding files is never written into:
``DIR-2``... is taken instead): ``summary.md``, ``nvml-recording.json``, ``logs.tar.gz`` (every
step's whole log and what the steps wrote, rewritten after each step), ``pytest-tail.txt``,
``sweep-rows.jsonl`` (the device check's and the tune's rows) and ``bench-figures.json``. The summary
is printed last, so the end of the output alone tells what happened. ``--dry-run`` lists the steps,
their limits and what would skip them here, and writes nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Run from a checkout: collbench from this repository, the checks from beside this file.
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]
from first_run_checks import (  # noqa: E402  (beside this file; benchmarks/ is no package)
    Machine,
    compare_discover,
    environment_body,
    kernel_build_body,
    nccl_plugin_body,
    probe_machine,
)

BUDGET_MINUTES = 8.0
GRACE_S = 5.0
"""Seconds between the interrupt and the kill of an overrunning step."""
WRAP_UP_S = 10.0
"""Kept back from the budget for the summary and the archive."""
MIN_STEP_S = 5.0
"""A step is not started with less than this left."""
TAIL_LINES = 200
OUT_FILES = (
    "summary.md",
    "nvml-recording.json",
    "logs.tar.gz",
    "pytest-tail.txt",
    "sweep-rows.jsonl",
    "bench-figures.json",
)
"""Every file a run may write under --out, and nothing else."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    name: str
    what: str
    """What it checks and what to expect, one line."""
    command: tuple[str, ...]
    limit_s: float
    needs_gpu: bool = True
    needs_smi: bool = False

    def skip_reason(self, machine: Machine, smi: str | None) -> str | None:
        if self.needs_gpu and machine.no_gpu_reason is not None:
            return machine.no_gpu_reason
        if self.needs_smi and smi is None:
            return "nvidia-smi is not on PATH"
        return None

    def shown(self) -> str:
        return " ".join("python3" if p == sys.executable else p.replace(str(REPO) + os.sep, "") for p in self.command)


def steps(gpus: int, out: Path, work: Path) -> list[Step]:
    """The steps in the order they run, for a machine of ``gpus`` GPUs."""
    n = str(max(gpus, 1))
    py, this = sys.executable, str(Path(__file__).resolve())
    cli = (py, "-m", "collbench.cli.app")
    return [
        Step(
            name="environment",
            what="GPU, driver, torch, NCCL, nvcc, Python.h",
            command=(py, this, "--body", "environment"),
            limit_s=60,
            needs_gpu=False,
        ),
        Step(
            name="nvml-record",
            what="collbench discover --record: NVML's raw answers, replayable on CPU",
            command=(*cli, "discover", "--record", str(out / "nvml-recording.json")),
            limit_s=60,
            needs_gpu=False,
        ),
        Step(
            name="discover-vs-smi",
            what="nvidia-smi topo -m against collbench's NVML discovery: same GPUs and links",
            command=(py, this, "--body", "discover-vs-smi"),
            limit_s=60,
            needs_gpu=False,
            needs_smi=True,
        ),
        Step(
            name="kernel-build",
            what="the CUDA reduction kernels build once into the shared cache",
            command=(py, this, "--body", "kernel-build"),
            limit_s=180,
        ),
        Step(
            name="nccl-plugin",
            what="NCCL loads collbench's tuner plugin at one rank: 'Using ...', 'rules from'",
            command=(py, this, "--body", "nccl-plugin", "--work", str(work)),
            limit_s=120,
        ),
        Step(
            name="device-check-1G",
            what="a 1 GiB all-reduce and reduce (ring, native) checked on the device: #wrong 0",
            command=(
                *cli,
                *f"sweep --backend nccl --ranks {n} --op all-reduce,reduce --algo ring,native".split(),
                # --timeout inside the step's limit: a hung collective ends with the sweep's own line naming
                # the rank (within the timeout plus a few seconds, docs/clusters.md), not the step's SIGINT.
                *["-b", "1G", "-e", "1G", "-n", "3", "--timeout", "90", "--output"],
                str(work / "device-check.jsonl"),
            ),
            limit_s=120,
        ),
        Step(
            name="bench-reduce",
            what="the reduce kernel against a device-to-device copy (>= 0.90 at 256 MiB)",
            command=(
                py,
                str(REPO / "benchmarks" / "bench_gpu_reduce.py"),
                "--sizes",
                "1M,64M,256M",
                "--reps",
                "20",
                "--json",
                str(out / "bench-figures.json"),
            ),
            limit_s=120,
        ),
        Step(
            name="pytest-gpu",
            what="pytest tests/gpu: every test passes, or skips saying why",
            command=(py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(REPO / "tests" / "gpu")),
            limit_s=240,
        ),
        Step(
            name="tune",
            what="the README's collbench tune --quick, trimmed to 1 MiB: a profile",
            command=(
                *cli,
                "tune",
                "--quick",
                "-e",
                "1M",
                "-O",
                str(work / "tune" / "profile.yaml"),
                "--results",
                str(work / "tune" / "results.jsonl"),
            ),
            limit_s=180,
        ),
    ]


@dataclass(slots=True)
class Outcome:
    step: Step
    status: str
    """passed, failed, timed out, skipped, or not run (the budget was spent)."""
    seconds: float = 0.0
    limit_s: float = 0.0
    exit_code: int | None = None
    output: str = ""
    note: str = ""
    kernels: dict[str, int] = field(default_factory=dict)
    """The built kernel libraries after the step (path: modification time, ns)."""


def run_step(step: Step, log: Path, env: dict[str, str], limit_s: float) -> Outcome:
    """Run ``step`` in its own process group into ``log``; interrupt it past ``limit_s``, kill it GRACE_S later."""
    started = time.monotonic()
    with log.open("wb") as sink:
        try:
            proc = subprocess.Popen(
                step.command, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as exc:
            return Outcome(step, "failed", 0.0, limit_s, None, f"could not start: {exc}")
        timed_out = False
        try:
            proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _signal_group(proc, signal.SIGINT)  # torch's build lock is released in its finally
            try:
                proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
    output = log.read_text(errors="replace")
    seconds = time.monotonic() - started
    if timed_out:
        return Outcome(step, "timed out", seconds, limit_s, proc.returncode, output, f"stopped at its {limit_s:.0f} s")
    return Outcome(step, "passed" if proc.returncode == 0 else "failed", seconds, limit_s, proc.returncode, output)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def built_kernels(cache: Path) -> dict[str, int]:
    """The reduction kernels' built libraries under ``cache`` and their modification times (ns)."""
    return {str(p.relative_to(cache)): p.stat().st_mtime_ns for p in sorted(cache.rglob("collbench_reduce_ext*.so"))}


def kernel_reuse(outcomes: Sequence[Outcome]) -> str:
    """One line: where the kernels were built, and whether a later step built them again."""
    before: dict[str, int] = {}
    built_by: list[str] = []
    for o in outcomes:
        if o.status in ("skipped", "not run"):
            continue
        if any(before.get(path) != mtime for path, mtime in o.kernels.items()):
            built_by.append(o.step.name)
        before = o.kernels or before
    if not built_by:
        return "kernels: no step built them"
    later = [o.step.name for o in outcomes if o.status not in ("skipped", "not run")]
    after = later[later.index(built_by[0]) + 1 :]
    if len(built_by) == 1:
        return f"kernels: built once, by {built_by[0]}; {len(after)} later step(s) used that build unchanged"
    return f"kernels: built by {built_by[0]}, then built again by {', '.join(built_by[1:])}"


def finding(o: Outcome) -> str:
    """What a step found, in one line of at most 90 characters: its last line of output, or its note."""
    if o.status in ("skipped", "not run"):
        return o.note
    lines = [line.strip() for line in o.output.splitlines() if line.strip()]
    text = lines[-1] if lines else "(no output)"
    if o.note:
        text = f"{o.note}; {text}"
    return text if len(text) <= 90 else text[:87] + "..."


def summary(machine: Machine, outcomes: Sequence[Outcome], budget_s: float, spent_s: float, out: Path) -> str:
    """The Markdown summary: the machine, one row per step, the failed steps' last lines, the files."""
    counts = {s: sum(o.status == s for o in outcomes) for s in ("passed", "failed", "timed out", "skipped", "not run")}
    parts = [
        "# collbench: GPU first run",
        "",
        f"- machine: {machine.describe()}",
        f"- {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {spent_s:.0f} s of the {budget_s:.0f} s budget; "
        + ", ".join(f"{v} {k}" for k, v in counts.items() if v),
        f"- {kernel_reuse(outcomes)}",
        "",
        "| # | step | result | s | limit s | found |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for i, o in enumerate(outcomes, 1):
        found = finding(o).replace("|", "/")
        parts.append(f"| {i} | {o.step.name} | {o.status} | {o.seconds:.0f} | {o.limit_s:.0f} | {found} |")
    for i, o in enumerate(outcomes, 1):
        if o.status not in ("failed", "timed out"):
            continue
        tail = o.output.rstrip().splitlines()[-15:]
        parts += ["", f"## {i}. {o.step.name}: {o.status} (exit {o.exit_code})", "", "```text", *tail, "```"]
    written = [name for name in OUT_FILES if (out / name).exists() or name == "summary.md"]
    parts += ["", f"Files in {out}: {', '.join(written)}; every log whole in logs.tar.gz."]
    return "\n".join(parts) + "\n"


def archive(work: Path, out: Path) -> None:
    """Every log and what the steps wrote, as one archive (built libraries and objects left out)."""
    partial = out / "logs.tar.gz.partial"
    with tarfile.open(partial, "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            if path.is_file() and path.suffix not in (".so", ".o") and not path.name.endswith((".cuda.o", ".lock")):
                tar.add(path, arcname=str(path.relative_to(work)))
    partial.replace(out / "logs.tar.gz")


def collect(outcome: Outcome, work: Path, out: Path) -> None:
    """The step's files among the six: the pytest log's tail, the rows of the sweeps."""
    if outcome.step.name == "pytest-gpu" and outcome.status != "skipped":
        tail = outcome.output.rstrip().splitlines()[-TAIL_LINES:]
        (out / "pytest-tail.txt").write_text("\n".join(tail) + "\n", encoding="utf-8")
    if outcome.step.name in ("device-check-1G", "tune"):
        rows = [work / "device-check.jsonl", work / "tune" / "results.jsonl"]
        text = "".join(p.read_text(encoding="utf-8", errors="replace") for p in rows if p.is_file())
        if text:
            (out / "sweep-rows.jsonl").write_text(text, encoding="utf-8")


def free_out(wanted: Path) -> Path:
    """``wanted`` if it is new or an empty folder, else the first of ``wanted-2``, ``wanted-3``... that is."""
    candidate, number = wanted, 1
    while candidate.exists() and not (candidate.is_dir() and not any(candidate.iterdir())):
        number += 1
        candidate = wanted.with_name(f"{wanted.name}-{number}")
    return candidate


def _refuse(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _body(name: str, work: Path | None) -> int:
    if name == "environment":
        return environment_body()
    if name == "discover-vs-smi":
        return compare_discover()
    if name == "kernel-build":
        return kernel_build_body()
    assert work is not None, "--body nccl-plugin needs --work"
    return nccl_plugin_body(work)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu-first-run"), help="folder of the six files")
    parser.add_argument("--minutes", type=float, default=BUDGET_MINUTES, help="the whole run's budget (8)")
    parser.add_argument("--dry-run", action="store_true", help="list the steps, their limits, what skips them here")
    # A step that is this script's own code, run by the step in a process of its own.
    parser.add_argument(
        "--body", choices=("environment", "discover-vs-smi", "kernel-build", "nccl-plugin"), help=argparse.SUPPRESS
    )
    parser.add_argument("--work", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.body is not None:
        return _body(args.body, args.work)
    if not (math.isfinite(args.minutes) and args.minutes > 0):
        return _refuse(f"--minutes {args.minutes}: give a number of minutes above 0")
    if args.out.exists() and not args.out.is_dir():
        return _refuse(f"--out {args.out}: is a file; give a folder (new or empty)")
    started = time.monotonic()
    budget_s = args.minutes * 60
    deadline = started + budget_s
    machine = probe_machine()
    smi = shutil.which("nvidia-smi")
    if args.dry_run:
        planned = steps(machine.gpus, args.out, Path("$WORK"))  # a temporary folder when it runs
        print(f"machine: {machine.describe()}; budget {budget_s:.0f} s")
        left = budget_s - WRAP_UP_S
        for i, step in enumerate(planned, 1):
            why = step.skip_reason(machine, smi)
            limit = min(step.limit_s, left - GRACE_S)
            if why is not None:
                state = f"skipped here: {why}"
            elif limit < MIN_STEP_S:
                state = "not reached if every step before it takes its whole limit"
            else:
                state = f"at most {limit:.0f} s of its {step.limit_s:.0f}"
                left -= limit + GRACE_S
            print(f"{i}. {step.name}: {state}")
            print(f"   {step.shown()}")
        return 0
    out = free_out(args.out)
    if out != args.out:
        print(f"note: {args.out} holds files; this run writes to {out}", file=sys.stderr)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _refuse(f"--out {out}: cannot make it ({exc.strerror or exc})")
    work = Path(tempfile.mkdtemp(prefix="collbench-first-run-"))
    (work / "logs").mkdir()
    (work / "tune").mkdir()
    cache = work / "cache"
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "COLLBENCH_CACHE_DIR": str(cache),
        "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"),
        "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(REPO)) if p),
    }
    outcomes: list[Outcome] = []
    for index, step in enumerate(steps(machine.gpus, out, work), 1):
        why = step.skip_reason(machine, smi)
        left = deadline - time.monotonic() - WRAP_UP_S
        if why is not None:
            outcomes.append(Outcome(step, "skipped", note=why))
        elif left - GRACE_S < MIN_STEP_S:
            outcomes.append(Outcome(step, "not run", note=f"the {budget_s:.0f} s budget was spent"))
        else:
            limit = min(step.limit_s, left - GRACE_S)
            print(f"== {index}. {step.name} (at most {limit:.0f} s)", flush=True)
            outcome = run_step(step, work / "logs" / f"{index}-{step.name}.log", env, limit)
            outcome.kernels = built_kernels(cache) if cache.is_dir() else {}
            print(f"   {outcome.status}, {outcome.seconds:.1f} s: {finding(outcome)}", flush=True)
            outcomes.append(outcome)
            collect(outcome, work, out)
        (out / "summary.md").write_text(summary(machine, outcomes, budget_s, time.monotonic() - started, out))
        archive(work, out)
    text = summary(machine, outcomes, budget_s, time.monotonic() - started, out)
    (out / "summary.md").write_text(text, encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    print(text, end="")
    return 0 if all(o.status in ("passed", "skipped") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())

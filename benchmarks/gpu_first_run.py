"""Every GPU check of a first run, in order, each in its own process and time limit; one markdown report.

    python benchmarks/gpu_first_run.py [-O gpu-first-run.md] [--minutes 15] [--only NAME,...] [--dry-run]

On a machine with N GPUs (``torch.cuda.device_count()``) it runs, one after the other:

1. ``kernel-build``: collbench's CUDA reduction kernels built into a fresh cache (the first build's
   two lines: starting, and how long it took); every later check loads them from that cache.
2. ``kernel-fallback``: the same build with ``CUDA_HOME`` at a folder without a toolkit: one line
   naming what is missing and the fallback taken (torch's ops).
3. ``pytest-gpu``: ``pytest tests/gpu`` (each test passes or skips saying why).
4. ``bench-gpu-reduce``: benchmarks/bench_gpu_reduce.py, the reduce kernels against a D2D copy.
5. ``device-check-256M`` and ``device-check-1G``: a 256 MiB and a 1 GiB all-reduce and reduce (ring,
   native) checked on the device, ``#wrong`` 0, at world size N.
6. ``sweep-nccl``: ``collbench sweep --backend nccl --ranks N`` over 8 B-64 MiB.
7. ``tune-quick-nccl``: ``collbench tune --quick --backend nccl --ranks N`` (needs N >= 2: a tune
   needs two ranks and NCCL runs one rank per GPU); ``tune-quick-default``: the README's first
   command as it is (on one GPU: CPU ranks over gloo, saying why in one line).
8. ``nvidia-smi-topo`` and ``discover-vs-nvidia-smi``: ``nvidia-smi topo -m`` and collbench's NVML
   ``discover`` of the same machine, compared GPU by GPU and pair by pair.

The kernel build comes first so that the one build the run makes is the one it reports; pytest
and the rest load it. Each check runs in a process group of its own with its own time limit, never
past what is left of the run's (``--minutes``, 15 by default, 5 more per GPU beyond the first); a
check that overruns is interrupted (SIGINT, so that torch's build lock is released in its
``finally``), killed 15 s later if still there, recorded as timed out, and the next check starts.
The report (``-O``, default gpu-first-run.md) holds the machine, a summary table, and per check its
command, exit code, duration and output (all of it up to 200 lines, else its last 200; every log is
kept whole beside the report, in ``<report>-files/``). An earlier run's report and files are never
overwritten: when either exists the run writes ``<report>-2.md`` (or -3, ...) and says so.
``--dry-run`` lists every check, its command and time limit, and why it would be skipped on this
machine, and runs nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from collbench.errors import InputFileError
from collbench.fileio import check_writable
from collbench.topology.model import Device, Link, LinkKind, Topology, format_cpu_list

REPO = Path(__file__).resolve().parents[1]
OUTPUT_LINES = 200
"""Lines of a check's output the report shows (the last ones when there are more)."""
GRACE_S = 15.0
"""Seconds between the interrupt and the kill of an overrunning check."""
BASE_MINUTES = 15.0
PER_EXTRA_GPU_MINUTES = 5.0

_MACHINE_PROBE = """
import json, torch
gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
names = [torch.cuda.get_device_name(i) for i in range(gpus)]
v = torch.cuda.nccl.version() if gpus else ""
nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
print(json.dumps({"gpus": gpus, "names": names, "torch": torch.__version__, "cuda": torch.version.cuda, "nccl": nccl}))
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Machine:
    """What this machine offers the checks, as a fresh collbench process sees it."""

    gpus: int
    names: tuple[str, ...] = ()
    torch_version: str = ""
    torch_cuda: str | None = None
    nccl_version: str = ""
    nvidia_smi: str | None = None
    problem: str = ""
    """Why torch could not be asked (it failed or hung); empty when it answered."""

    @property
    def no_gpu_reason(self) -> str | None:
        """Why there is no GPU to run on, or None when there is one."""
        if self.problem:
            return self.problem
        if self.gpus:
            return None
        if self.torch_cuda is None:
            return f"no CUDA GPU: torch {self.torch_version} is a CPU-only build"
        return f"no CUDA GPU: torch {self.torch_version} (CUDA {self.torch_cuda}) sees none"

    def describe(self) -> str:
        if self.problem:
            return self.problem
        gpus = ", ".join(sorted(set(self.names))) or "no GPU"
        cuda = f"CUDA {self.torch_cuda}" if self.torch_cuda else "CPU-only build"
        nccl = f", NCCL {self.nccl_version}" if self.nccl_version else ""
        return f"{self.gpus} x {gpus}; torch {self.torch_version} ({cuda}{nccl})"


def probe_machine(timeout_s: float = 180.0) -> Machine:
    """Ask torch in a child process (this one keeps no CUDA context while the checks run)."""
    smi = shutil.which("nvidia-smi")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _MACHINE_PROBE], capture_output=True, text=True, timeout=timeout_s, cwd=REPO
        )
    except subprocess.TimeoutExpired:
        return Machine(gpus=0, nvidia_smi=smi, problem=f"asking torch for the GPUs took over {timeout_s:.0f} s")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return Machine(gpus=0, nvidia_smi=smi, problem=f"torch could not be asked for the GPUs: {last}")
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    return Machine(
        gpus=int(facts["gpus"]),
        names=tuple(facts["names"]),
        torch_version=str(facts["torch"]),
        torch_cuda=facts["cuda"],
        nccl_version=str(facts["nccl"]),
        nvidia_smi=smi,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    name: str
    what: str
    """What it checks and what to expect, one line."""
    command: tuple[str, ...]
    timeout_s: float
    min_gpus: int = 1
    min_gpus_why: str = ""
    needs_nvidia_smi: bool = False
    env: tuple[tuple[str, str], ...] = ()

    def skip_reason(self, machine: Machine) -> str | None:
        """Why this check cannot run on ``machine``; None when it can."""
        if machine.no_gpu_reason is not None:
            return machine.no_gpu_reason
        if machine.gpus < self.min_gpus:
            return f"needs {self.min_gpus}+ GPUs ({self.min_gpus_why}); this machine has {machine.gpus}"
        if self.needs_nvidia_smi and machine.nvidia_smi is None:
            return "nvidia-smi is not on PATH"
        return None

    def shown(self) -> str:
        env = " ".join(f"{k}={shlex.quote(_short(v))}" for k, v in self.env)
        return (env + " " if env else "") + shlex.join(_short(part) for part in self.command)


def _short(part: str) -> str:
    """A command's word as a person would type it: ``python`` for this interpreter, paths from the repository."""
    return "python" if part == sys.executable else part.replace(str(REPO) + os.sep, "")


def checks(gpus: int, files: Path) -> list[Check]:
    """The checks in the order they run, for a machine of ``gpus`` GPUs (at least 1 in the commands)."""
    n = str(max(gpus, 1))
    py = sys.executable
    this = str(Path(__file__).resolve())
    cli = (py, "-m", "collbench.cli.app")
    cache = ("COLLBENCH_CACHE_DIR", str(files / "kernel-cache"))
    no_toolkit = files / "no-cuda-toolkit"

    def device_check(size: str, timeout_s: float) -> Check:
        return Check(
            name=f"device-check-{size}",
            what=f"a {size}iB all-reduce and reduce (ring, native) checked on the device: #wrong 0, no rank timeout",
            command=(
                *cli,
                *f"sweep --backend nccl --ranks {n} --op all-reduce,reduce --algo ring,native".split(),
                *f"-b {size} -e {size} -n 3 --timeout 300 --output".split(),
                str(files / f"check-{size}.jsonl"),
            ),
            timeout_s=timeout_s,
            env=(cache,),
        )

    return [
        Check(
            name="kernel-build",
            what="the CUDA reduction kernels build into a fresh cache: 'building ...', then 'built ... in N s'",
            command=(py, this, "--body", "kernel-build"),
            timeout_s=420,
            env=(cache,),
        ),
        Check(
            name="kernel-fallback",
            what="CUDA_HOME without a toolkit: one line naming the missing nvcc and the fallback to torch's ops",
            command=(py, this, "--body", "kernel-fallback"),
            timeout_s=120,
            env=(("COLLBENCH_CACHE_DIR", str(files / "fallback-cache")), ("CUDA_HOME", str(no_toolkit))),
        ),
        Check(
            name="pytest-gpu",
            what="pytest tests/gpu: every test passes, or skips saying why",
            command=(py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/gpu"),
            timeout_s=600,
            env=(cache,),
        ),
        Check(
            name="bench-gpu-reduce",
            what="reduce kernels vs a D2D copy (target >= 0.90 of copy bandwidth at the largest size) and vs "
            "torch's chained add_ (target >= 1.5x at k=4)",
            command=(py, "benchmarks/bench_gpu_reduce.py", "--json", str(files / "bench_gpu_reduce.json")),
            timeout_s=300,
            env=(cache,),
        ),
        device_check("256M", 300),
        device_check("1G", 420),
        Check(
            name="sweep-nccl",
            what=f"collbench sweep over NCCL at world size {n}, 8 B-64 MiB, every algorithm: #wrong 0",
            command=(
                *cli,
                *f"sweep --backend nccl --ranks {n} -b 8 -e 64M -f 4 --timeout 300 --output".split(),
                str(files / "sweep-nccl.jsonl"),
            ),
            timeout_s=420,
            env=(cache,),
        ),
        Check(
            name="tune-quick-nccl",
            what=f"collbench tune --quick over NCCL at world size {n}: a profile, a report",
            command=(*cli, *f"tune --quick --backend nccl --ranks {n} -O".split(), str(files / "tune-nccl.yaml")),
            timeout_s=600,
            min_gpus=2,
            min_gpus_why="a tune needs 2 ranks and NCCL runs one rank per GPU",
            env=(cache,),
        ),
        Check(
            name="tune-quick-default",
            what="the README's first command, collbench tune --quick: on one GPU CPU ranks over gloo, saying why",
            command=(*cli, "tune", "--quick", "-O", str(files / "tune-default.yaml")),
            timeout_s=420,
            env=(cache,),
        ),
        Check(
            name="nvidia-smi-topo",
            what="nvidia-smi topo -m, as it is, for the comparison below",
            command=("nvidia-smi", "topo", "-m"),
            timeout_s=60,
            needs_nvidia_smi=True,
        ),
        Check(
            name="discover-vs-nvidia-smi",
            what="collbench discover (NVML) against nvidia-smi topo -m: same GPUs, affinities and links",
            command=(py, this, "--body", "discover-vs-nvidia-smi"),
            timeout_s=120,
            needs_nvidia_smi=True,
        ),
    ]


@dataclass(slots=True)
class Outcome:
    check: Check
    status: str
    """passed, failed, timed out, skipped, or not run (the run's time was used up)."""
    exit_code: int | None = None
    seconds: float = 0.0
    output: str = ""
    log: Path | None = None
    note: str = ""


def run_check(check: Check, files: Path, limit_s: float) -> Outcome:
    """Run ``check`` in its own process group; interrupt it past ``limit_s``, kill it GRACE_S later."""
    log = files / f"{check.name}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **dict(check.env)}
    for name, value in check.env:
        if name == "CUDA_HOME":
            Path(value).mkdir(parents=True, exist_ok=True)  # a folder without a toolkit
    started = time.monotonic()
    timed_out = False
    with log.open("wb") as sink:
        try:
            proc = subprocess.Popen(
                check.command, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as exc:
            return Outcome(check, "failed", None, 0.0, f"could not start: {exc}", log)
        try:
            proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _signal_group(proc, signal.SIGINT)
            try:
                proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
    seconds = time.monotonic() - started
    output = log.read_text(errors="replace")
    if timed_out:
        note = f"stopped after {limit_s:.0f} s (its limit, or what was left of the run's)"
        return Outcome(check, "timed out", proc.returncode, seconds, output, log, note)
    return Outcome(check, "passed" if proc.returncode == 0 else "failed", proc.returncode, seconds, output, log)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def shown_output(output: str) -> tuple[str, int]:
    """The output the report shows (the last OUTPUT_LINES lines) and how many lines were left out."""
    lines = output.rstrip("\n").splitlines()
    if len(lines) <= OUTPUT_LINES:
        return "\n".join(lines), 0
    return "\n".join(lines[-OUTPUT_LINES:]), len(lines) - OUTPUT_LINES


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


def report(machine: Machine, outcomes: Sequence[Outcome], minutes: float, files: Path) -> str:
    """The markdown report: the machine, a summary table, then every check with its output."""
    counts = {s: sum(o.status == s for o in outcomes) for s in ("passed", "failed", "timed out", "skipped", "not run")}
    total_s = sum(o.seconds for o in outcomes)
    parts = [
        "# collbench: GPU first run",
        "",
        f"- machine: {machine.describe()}; host {os.uname().nodename}",
        f"- collbench commit {_commit()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"load average {_load()} (1, 5, 15 min)",
        f"- {', '.join(f'{v} {k}' for k, v in counts.items() if v)}; {total_s / 60:.1f} min of the run's {minutes:.0f}",
        f"- every log, whole, and the rows and profiles the checks wrote: {files}",
        "",
        "| # | check | result | exit code | seconds |",
        "| --- | --- | --- | --- | --- |",
    ]
    for i, o in enumerate(outcomes, 1):
        code = "" if o.exit_code is None else str(o.exit_code)
        parts.append(f"| {i} | {o.check.name} | {o.status} | {code} | {o.seconds:.1f} |")
    for i, o in enumerate(outcomes, 1):
        parts += ["", f"## {i}. {o.check.name}: {o.status}", "", o.check.what, "", "```", o.check.shown(), "```", ""]
        if o.status in ("skipped", "not run"):
            parts.append(f"Not run: {o.note}")
            continue
        code = "none" if o.exit_code is None else str(o.exit_code)
        parts.append(f"exit code {code}, {o.seconds:.1f} s" + (f"; {o.note}" if o.note else ""))
        text, left_out = shown_output(o.output)
        if left_out:
            parts += ["", f"(the first {left_out} lines are in {o.log})"]
        parts += ["", "```text", text or "(no output)", "```"]
    return "\n".join(parts) + "\n"


def _nvml_index(gpu: Device) -> int:
    """NVML's number of a GPU (nvidia-smi's), which a topology in CUDA's order keeps as ``nvml_index``."""
    kept = gpu.get("nvml_index")
    return int(kept) if kept is not None else gpu.index


def topology_differences(smi: Topology, nvml: Topology) -> list[str]:
    """Where ``nvidia-smi topo -m`` (``smi``) and collbench's NVML discovery (``nvml``) disagree, one line each.

    GPUs are matched by NVML's number (nvidia-smi's index); CPU and NUMA affinities are compared where
    both give one; links by kind (NVLink and NVSwitch alike: the matrix shows NV# for both) and,
    for NVLink, by link count.
    """
    out: list[str] = []
    if len(smi.gpus) != len(nvml.gpus):
        out.append(f"GPUs: nvidia-smi shows {len(smi.gpus)}, NVML {len(nvml.gpus)}")
    by_index = {_nvml_index(g): g for g in nvml.gpus}
    pairs: list[tuple[Device, Device]] = []
    for shown in smi.gpus:
        found = by_index.get(shown.index)
        if found is None:
            out.append(f"GPU{shown.index}: not in NVML's topology")
            continue
        pairs.append((shown, found))
        if shown.cpus is not None and found.cpus is not None and set(shown.cpus) != set(found.cpus):
            out.append(f"GPU{shown.index} CPU affinity: nvidia-smi {_cpus(shown.cpus)}, NVML {_cpus(found.cpus)}")
        if shown.numa_node is not None and found.numa_node is not None and shown.numa_node != found.numa_node:
            out.append(f"GPU{shown.index} NUMA node: nvidia-smi {shown.numa_node}, NVML {found.numa_node}")
    nvlinks = {LinkKind.NVLINK, LinkKind.NVSWITCH}
    for i, (a_smi, a_nvml) in enumerate(pairs):
        for b_smi, b_nvml in pairs[i + 1 :]:
            want, got = smi.link(a_smi.id, b_smi.id), nvml.link(a_nvml.id, b_nvml.id)
            where = f"GPU{a_smi.index}-GPU{b_smi.index}"
            if want is None or got is None:
                if want is not got:
                    out.append(f"{where}: nvidia-smi {_link(want)}, NVML {_link(got)}")
                continue
            same_kind = want.kind == got.kind or {want.kind, got.kind} <= nvlinks
            if not same_kind or (want.kind in nvlinks and want.count != got.count):
                out.append(f"{where}: nvidia-smi {_link(want)}, NVML {_link(got)}")
    return out


def _cpus(cpus: Sequence[int]) -> str:
    return format_cpu_list(tuple(sorted(cpus)))


def _link(link: Link | None) -> str:
    if link is None:
        return "no link"
    return f"{link.kind.value} x{link.count}" if link.kind in (LinkKind.NVLINK, LinkKind.NVSWITCH) else link.kind.value


def kernel_build_body(expect_fallback: bool) -> int:
    """Build the kernels as a sweep does, print what it says; 0 when it did what was expected.

    Expected: the kernels (``kernel-build``), or, with no toolkit (``kernel-fallback``), none and one
    line naming the cause and the fallback to torch's ops.
    """
    from collbench.runtime.cuda import kernels

    lines: list[str] = []
    result = kernels.build_extension(lines.append)
    for line in lines:
        print(line)
    if not expect_fallback:
        print(
            f"kernels {'loaded' if result.module is not None else 'not used'}; {result.seconds:.1f} s in torch's loader"
        )
        return 0 if result.module is not None else 1
    ok = result.module is None and len(lines) == 1 and "are not used" in lines[0] and "torch's ops" in lines[0]
    print("one fallback line, naming the cause and torch's ops" if ok else "expected one fallback line and no kernels")
    return 0 if ok else 1


def compare_discover() -> int:
    """``nvidia-smi topo -m`` against collbench's NVML discovery of this machine; 1 when they differ."""
    from collbench.topology.nvidia_smi import parse_nvidia_smi_topo
    from collbench.topology.sources import discover_topology

    smi_text = subprocess.run(
        ["nvidia-smi", "topo", "-m"], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    smi = parse_nvidia_smi_topo(smi_text, "nvidia-smi topo -m")
    nvml = discover_topology()
    print(f"nvidia-smi: {len(smi.gpus)} GPU(s); NVML: {len(nvml.gpus)} GPU(s) ({nvml.note})")
    differences = topology_differences(smi, nvml)
    for line in differences:
        print(f"differs: {line}")
    print(f"{len(differences)} difference(s)" if differences else "the same GPUs, affinities and links")
    return 1 if differences else 0


def files_of(report_path: Path) -> Path:
    """The folder of a report's logs and outputs: ``<report>-files`` beside it."""
    return report_path.with_name(report_path.stem + "-files")


def free_report_name(wanted: Path) -> Path:
    """``wanted``, or when it or its files folder exists (an earlier run's report and logs, which a run
    never overwrites), the first of ``<stem>-2<suffix>``, ``<stem>-3<suffix>``, ... free of both.
    """
    candidate = wanted
    number = 1
    while candidate.exists() or candidate.is_symlink() or files_of(candidate).exists():
        number += 1
        candidate = wanted.with_name(f"{wanted.stem}-{number}{wanted.suffix}")
    return candidate


def _refuse(message: str) -> int:
    """Say what was wrong in one line; the exit code of a usage error."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-O", "--output", type=Path, default=Path("gpu-first-run.md"), help="the markdown report")
    parser.add_argument("--minutes", type=float, default=None, help="the whole run's limit (15, +5 per extra GPU)")
    parser.add_argument("--only", default=None, help="run only these checks (names, commas)")
    parser.add_argument("--dry-run", action="store_true", help="list the checks and why each is skipped here")
    # The body of a check that is this script's own code, run by the check in a process of its own.
    parser.add_argument(
        "--body", choices=("kernel-build", "kernel-fallback", "discover-vs-nvidia-smi"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.body == "discover-vs-nvidia-smi":
        return compare_discover()
    if args.body is not None:
        return kernel_build_body(expect_fallback=args.body == "kernel-fallback")
    if args.minutes is not None and not (math.isfinite(args.minutes) and args.minutes > 0):
        return _refuse(f"--minutes {args.minutes}: give a number of minutes above 0")
    wanted = None if args.only is None else {name.strip() for name in args.only.split(",") if name.strip()}
    if wanted is not None and not wanted:
        return _refuse(f"--only {args.only!r} names no check; give check names separated by commas")
    try:
        check_writable(args.output)  # a device, a FIFO or an unwritable place: refused, not renamed around
        output = free_report_name(args.output)
        check_writable(output)
    except InputFileError as exc:
        return _refuse(str(exc))
    if output != args.output:
        print(f"note: {args.output} or its files exist; this run's report goes to {output}", file=sys.stderr)
    machine = probe_machine()
    minutes = args.minutes or BASE_MINUTES + PER_EXTRA_GPU_MINUTES * max(machine.gpus - 1, 0)
    files = files_of(output).resolve()
    planned = checks(machine.gpus, files)
    if wanted is not None:
        unknown = sorted(wanted - {c.name for c in planned})
        if unknown:
            return _refuse(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(c.name for c in planned)}")
        planned = [c for c in planned if c.name in wanted]
    if args.dry_run:
        print(f"machine: {machine.describe()}; the run's limit {minutes:.0f} min")
        for i, check in enumerate(planned, 1):
            why = check.skip_reason(machine)
            state = f"skipped here: {why}" if why else "would run"
            print(f"{i:2}. {check.name} ({check.timeout_s:.0f} s max) {state}")
            print(f"    {check.shown()}")
        return 0
    files.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + minutes * 60
    outcomes: list[Outcome] = []
    for check in planned:
        why = check.skip_reason(machine)
        left = deadline - time.monotonic()
        if why is not None:
            outcomes.append(Outcome(check, "skipped", note=why))
        elif left < 5:
            outcomes.append(Outcome(check, "not run", note=f"the run's {minutes:.0f} min were used up"))
        else:
            print(f"== {check.name} (at most {min(check.timeout_s, left):.0f} s)", flush=True)
            outcome = run_check(check, files, min(check.timeout_s, left))
            print(f"   {outcome.status}, {outcome.seconds:.1f} s", flush=True)
            outcomes.append(outcome)
        output.write_text(report(machine, outcomes, minutes, files))  # kept up to date as it goes
    print(f"report: {output}")
    return 0 if all(o.status in ("passed", "skipped") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The steps of benchmarks/gpu_first_run.py that are Python of their own: the machine, the environment,
discover against nvidia-smi, the kernel build, NCCL loading collbench's tuner plugin.

Each ``*_body`` runs in a process of its own (``gpu_first_run.py --body NAME``), prints what it found
with its verdict last, and returns the exit code: 0 when it found what it should.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from collbench.topology.cpu_list import format_cpu_list
from collbench.topology.model import Device, Link, LinkKind, Topology

REPO = Path(__file__).resolve().parents[1]
PLUGIN_PROFILE = REPO / "tests" / "fixtures" / "profiles" / "cpu-2core-gloo-4ranks.yaml"
"""The profile the plugin step exports: one that gives NCCL lines (tree below 90 KiB, ring from 5.7
MiB), so that the plugin has rules to read and says so. The step checks loading, not choices; a
profile whose every winner has no NCCL equivalent (as profiles/cpu-2core-gloo-2ranks.yaml became,
recursive doubling winning its sizes) gives a file of comments, and the plugin's line says only that."""

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


def _run(command: Sequence[str], timeout_s: float = 60, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Exit code and output (stdout then stderr) of ``command``; 127 and the reason when it cannot start."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, str(exc)
    return done.returncode, done.stdout + done.stderr


def environment_body() -> int:
    """What this machine gives collbench: GPU, driver, torch, NCCL, nvcc, Python.h, ninja, nvidia-ml-py, jsonschema."""
    missing: list[str] = []
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        query = "--query-gpu=index,name,driver_version,memory.total,pci.bus_id"
        print("nvidia-smi:", _run([smi, query, "--format=csv,noheader"])[1].strip())
    else:
        missing.append("nvidia-smi")
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    print(f"python {sys.version.split()[0]} at {sys.executable}")
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {gpus} GPU(s)")
    for i in range(gpus):
        major, minor = torch.cuda.get_device_capability(i)
        print(f"  cuda:{i} {torch.cuda.get_device_name(i)}, compute capability {major}.{minor}")
    if gpus:
        version = torch.cuda.nccl.version()
        print("NCCL", ".".join(map(str, version)) if isinstance(version, tuple) else version)
    else:
        missing.append("a CUDA GPU")
    from torch.utils import cpp_extension

    cuda_home = cpp_extension.CUDA_HOME
    nvcc = Path(cuda_home) / "bin" / "nvcc" if cuda_home else None
    if nvcc is not None and nvcc.is_file():
        release = [line for line in _run([str(nvcc), "--version"])[1].splitlines() if "release" in line]
        print(f"nvcc {nvcc}: {release[0].strip() if release else 'version unknown'}")
    else:
        print(f"nvcc: not found (CUDA_HOME {cuda_home})")
        missing.append("nvcc")
    # Unset, torch's loader builds for the visible GPUs' arch with PTX (_get_cuda_arch_flags); an image
    # that sets it builds every arch listed, each one the kernels' whole compile.
    arch_list = os.environ.get("TORCH_CUDA_ARCH_LIST")
    print(f"TORCH_CUDA_ARCH_LIST: {arch_list!r}" if arch_list else "TORCH_CUDA_ARCH_LIST: unset (the GPUs' own arch)")
    python_h = Path(sysconfig.get_path("include", scheme="posix_prefix")) / "Python.h"
    print(f"Python.h: {python_h} {'present' if python_h.is_file() else 'MISSING'}")
    if not python_h.is_file():
        missing.append("Python.h")
    ninja = shutil.which("ninja") or (
        str(Path(sys.executable).parent / "ninja")
        if os.access(Path(sys.executable).parent / "ninja", os.X_OK)
        else None
    )
    print(f"ninja: {ninja or 'MISSING'}")
    if ninja is None:
        missing.append("ninja")
    from importlib.metadata import version as dist_version

    try:
        # discover's NVML calls are checked against this package's API (tests/unit/test_nvml_contract.py).
        print(f"nvidia-ml-py {dist_version('nvidia-ml-py')}")
    except Exception:  # PackageNotFoundError, or a broken install
        print("nvidia-ml-py: absent (discover falls back to the host)")
        missing.append("nvidia-ml-py")
    try:
        print(f"jsonschema {dist_version('jsonschema')}: profiles checked with the library")
    except Exception:  # PackageNotFoundError, or a broken install: either way not the library
        print("jsonschema: absent; profiles checked with collbench's own schema check")
    print(f"missing: {', '.join(missing)}" if missing else "everything collbench's GPU path needs is here")
    return 1 if missing else 0


def kernel_build_body() -> int:
    """Build (or load from the shared cache) the kernels as a sweep does; 0 when they load."""
    from collbench.runtime.cuda import kernels

    cache = kernels.cache_dir()
    existed = (cache / f"{kernels.EXTENSION_NAME}.so").exists()
    print(f"cache {cache} ({'holds a build' if existed else 'empty'})")
    lines: list[str] = []
    result = kernels.build_extension(lines.append)
    for line in lines:
        print(line)
    if result.module is None:
        print(f"kernels not used: {result.reason}")
        return 1
    print(f"kernels {'loaded from the cache' if existed else 'built'}; {result.seconds:.1f} s in torch's loader")
    return 0


_ONE_RANK = """
import torch, torch.distributed as dist
torch.cuda.set_device(0)
dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=torch.device("cuda", 0))
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print("one-rank all-reduce done:", float(x[0]))
dist.destroy_process_group()
"""


def nccl_plugin_body(work: Path) -> int:
    """Build collbench's tuner plugin, run one NCCL rank with it, and find NCCL's and the plugin's lines.

    NCCL names the tuner it loads in its INFO log (src/plugin/tuner.cc: ``TUNER/Plugin: Using %s
    (v%d)``, or ``Could not find`` / ``Using internal tuner plugin`` when it does not); collbench's
    plugin says ``N rules from FILE ...`` when NCCL initialises it (csrc/nccl_tuner_rules.c). One rank
    on one node is not the profile's shape, so the line says none of its rules is for it: NCCL runs
    a collective of one rank without asking the tuner (ncclLaunchOneRank, src/enqueue.cc line 3039
    at v2.30.7-1), and the plugin's choices are checked on CPU (tests/unit/test_nccl_plugin_contract.py).
    """
    plugin_dir = work / "plugin"
    code, text = _run(
        [
            sys.executable,
            "-m",
            "collbench.cli.app",
            "export",
            "nccl-plugin",
            str(PLUGIN_PROFILE),
            "--from-other-backend",
            "-O",
            str(plugin_dir),
        ],
        timeout_s=120,
    )
    print(text.rstrip())
    settings = dict(line.split("=", 1) for line in text.splitlines() if line.startswith("NCCL_TUNER_"))
    if code != 0 or {"NCCL_TUNER_PLUGIN", "NCCL_TUNER_CONFIG_FILE"} - set(settings):
        print(f"the plugin was not built (exit {code})")
        return 1
    logs = work / "logs"
    env = {
        **os.environ,
        **settings,
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING",
        "NCCL_DEBUG_FILE": str(logs / "nccl-plugin.%p.log"),
    }
    code, text = _run([sys.executable, "-c", _ONE_RANK], timeout_s=90, env=env)
    print(text.rstrip())
    nccl_log = "".join(p.read_text(errors="replace") for p in sorted(logs.glob("nccl-plugin.*.log")))
    tuner = [line.strip() for line in nccl_log.splitlines() if "TUNER/Plugin" in line or "tuner plugin" in line]
    rules = [line.strip() for line in nccl_log.splitlines() if re.search(r" rules? from ", line)]
    for line in tuner + rules:
        print(line)
    loaded = any(("Using" in line or "loaded" in line) and "internal" not in line for line in tuner)
    if code == 0 and loaded and rules:
        print("NCCL loaded collbench's tuner plugin and the plugin read its rules")
        return 0
    seen = [what for what, ok in (("NCCL's 'Using' line", loaded), ("the plugin's 'rules from' line", rules)) if not ok]
    print(f"not seen: {', '.join(seen) or 'a clean exit'} (exit {code}; NCCL's log kept in logs.tar.gz)")
    return 1

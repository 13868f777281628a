"""NCCL's own algorithms as variants of ``native``: naming, forcing, observing, and the run's versions.

Facts taken from NCCL's source (NVIDIA/nccl, checked against tags v2.12 to v2.30):

* Forcing. ``NCCL_ALGO`` (Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT; compared
  case-insensitively) and ``NCCL_PROTO`` (LL, LL128, Simple) are read in ``ncclTopoTuneModel``
  (src/graph/tuning.cc) through ``getenv``/``ncclGetEnv``, which that function calls again for every
  communicator it sets up (``ncclCommInitRank*`` and ``ncclCommSplit`` alike). So the values count per
  *communicator*, not per process: a communicator created while the environment holds a variant's
  values runs that variant. :func:`variant_group` does that inside one process; a launcher that starts
  fresh rank processes per variant may instead put :func:`variant_env` into their environment. An
  algorithm name this NCCL does not know makes communicator creation fail (``ncclInvalidUsage``), so
  :func:`check_variant_supported` refuses it first, with one line.
* Algorithms per version: Tree, Ring always; CollNetDirect and CollNetChain from 2.14; NVLS from 2.17;
  NVLSTree from 2.18; PAT from 2.23.
* Observing. ``NCCL_DEBUG``, ``NCCL_DEBUG_SUBSYS`` and ``NCCL_DEBUG_FILE`` are read once per process
  (``ncclDebugInit``, on the first NCCL call): :func:`tuning_log_env` must be in a rank's environment
  before it first touches NCCL. Only rank 0 of a communicator writes the TUNING lines; NCCL's log
  file is line-buffered, so finished lines can be read while the process runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.errors import BackendUnavailableError, ConfigError, UnknownNameError
from collbench.nccl.support import ALGORITHM_SINCE, canonical_algo, canonical_proto
from collbench.nccl.support import ALGORITHMS as ALGORITHMS
from collbench.nccl.support import PROTOCOLS as PROTOCOLS
from collbench.nccl.support import algorithms_for as algorithms_for

log = logging.getLogger(__name__)

# NCCL's numbering of algorithms and protocols, used by the numeric TUNING lines of 2.20-2.23
# (NCCL_ALGO_TREE 0, NCCL_ALGO_RING 1, ...; NCCL_PROTO_LL 0, NCCL_PROTO_LL128 1, NCCL_PROTO_SIMPLE 2).
_ALGO_BY_NUMBER: tuple[str, ...] = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
_PROTO_BY_NUMBER: tuple[str, ...] = ("LL", "LL128", "Simple")


@dataclass(frozen=True, slots=True)
class NativeVariant:
    """NCCL's own collective, optionally forced to one algorithm and/or protocol (None: NCCL's choice)."""

    algo: str | None = None
    """One of :data:`ALGORITHMS`, as NCCL spells it."""
    proto: str | None = None
    """One of :data:`PROTOCOLS`, as NCCL spells it."""

    def __post_init__(self) -> None:
        if self.algo is not None and self.algo not in ALGORITHMS:
            raise UnknownNameError("NCCL algorithm", self.algo, ALGORITHMS)
        if self.proto is not None and self.proto not in PROTOCOLS:
            raise UnknownNameError("NCCL protocol", self.proto, PROTOCOLS)

    @property
    def name(self) -> str:
        """The canonical ``--algo`` spelling: ``native``, ``native:ring``, ``native:tree/ll128``, ``native:*/ll``."""
        if self.algo is None and self.proto is None:
            return "native"
        algo = self.algo.lower() if self.algo else "*"
        return f"native:{algo}" + (f"/{self.proto.lower()}" if self.proto else "")

    @property
    def forced(self) -> bool:
        """Whether anything is forced (plain ``native`` leaves the choice to NCCL)."""
        return self.algo is not None or self.proto is not None


def is_native(name: str) -> bool:
    """Whether an ``--algo`` name is ``native`` or one of its NCCL variants."""
    key = name.strip().lower()
    return key == "native" or key.startswith("native:")


def parse_native_variant(name: str) -> NativeVariant:
    """Parse ``native``, ``native:ring``, ``native:tree/ll128``, ``native:*/ll128`` (any case).

    Algorithm names also accept dashes or underscores (``native:collnet-direct``, ``native:nvls_tree``).
    ``*`` or an empty algorithm leaves the algorithm to NCCL. Raises UnknownNameError listing the known
    algorithms or protocols.
    """
    text = name.strip()
    head, sep, rest = text.partition(":")
    if head.lower() != "native":
        raise UnknownNameError("native variant", name, ["native", *(f"native:{a.lower()}" for a in ALGORITHMS)])
    if not sep:
        return NativeVariant()
    algo_text, slash, proto_text = rest.partition("/")
    algo: str | None = None
    if algo_text.strip() not in ("", "*"):
        algo = canonical_algo(algo_text)
        if algo is None:
            raise UnknownNameError("NCCL algorithm", algo_text.strip(), [a.lower() for a in ALGORITHMS])
    proto: str | None = None
    if slash:
        proto = canonical_proto(proto_text)
        if proto is None:
            raise UnknownNameError("NCCL protocol", proto_text.strip(), [p.lower() for p in PROTOCOLS])
    if algo is None and proto is None:
        raise ConfigError(f"{name!r} forces nothing; write 'native', 'native:<algorithm>' or 'native:*/<protocol>'")
    return NativeVariant(algo, proto)


def all_variants() -> list[NativeVariant]:
    """``native`` and every forced algorithm (protocol left to NCCL), in :data:`ALGORITHMS` order."""
    return [NativeVariant(), *(NativeVariant(a) for a in ALGORITHMS)]


def variant_env(variant: NativeVariant) -> dict[str, str]:
    """The environment that forces ``variant``: ``NCCL_ALGO`` and/or ``NCCL_PROTO`` (empty for ``native``).

    The values apply to every collective of a communicator created under them (the form without a
    ``allreduce:`` prefix, which every NCCL version reads). NCCL versions before 2.24 keep Ring for the
    collectives that cannot run the forced algorithm; later ones fail the call instead.
    """
    env: dict[str, str] = {}
    if variant.algo is not None:
        env["NCCL_ALGO"] = variant.algo
    if variant.proto is not None:
        env["NCCL_PROTO"] = variant.proto
    return env


def parse_version(text: str) -> tuple[int, int, int]:
    """``"2.21.5"`` -> ``(2, 21, 5)``; missing parts are 0. Raises ValueError on other text."""
    parts = [int(p) for p in text.strip().split(".") if p != ""]
    if not parts or len(parts) > 3:
        raise ValueError(f"not a version: {text!r}")
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


def check_variant_supported(variant: NativeVariant, nccl_version: tuple[int, int, int]) -> None:
    """Raise UnknownNameError when NCCL ``nccl_version`` would reject ``variant``'s NCCL_ALGO.

    (NCCL itself fails communicator creation with "Unrecognized element token" on an unknown name.)
    """
    if variant.algo is None:
        return
    known = algorithms_for(nccl_version)
    if variant.algo not in known:
        version = ".".join(str(v) for v in nccl_version)
        first = ".".join(str(v) for v in ALGORITHM_SINCE[variant.algo][:2])
        raise UnknownNameError(
            f"NCCL algorithm for NCCL {version} (it arrived in {first})",
            variant.algo.lower(),
            [a.lower() for a in known],
        )


@contextlib.contextmanager
def applied_env(env: dict[str, str]) -> Iterator[None]:
    """Set ``env`` in ``os.environ`` for the ``with`` block and restore what was there before."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def variant_group(variant: NativeVariant, ranks: list[int] | None = None) -> Iterator[Any]:
    """A new NCCL process group whose communicator runs ``variant``; destroyed on exit.

    Every rank of the default group must enter this together (``new_group`` is collective). The
    communicator is created inside the variant's environment (NCCL reads NCCL_ALGO/NCCL_PROTO when it
    creates a communicator) by one small all-reduce, so torch's lazy creation cannot happen later,
    outside it. For plain ``native`` any inherited NCCL_ALGO/NCCL_PROTO stays in force, as the user set it.
    """
    import torch
    import torch.distributed as dist

    with applied_env(variant_env(variant)):
        group = dist.new_group(ranks=ranks, backend="nccl")
        probe = torch.zeros(1, device=torch.device("cuda", torch.cuda.current_device()))
        dist.all_reduce(probe, group=group)
        torch.cuda.synchronize()
    try:
        yield group
    finally:
        dist.destroy_process_group(group)


_REFUSALS = ("invalid usage", "ncclinvalidusage", "invalid argument", "ncclinvalidargument")


def nccl_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is NCCL refusing a call or communicator (not a peer or system failure).

    torch raises ``DistBackendError`` for every NCCL error (C10D_NCCL_CHECK in
    torch/csrc/distributed/c10d/NCCLUtils.hpp: ``"NCCL error in: FILE:LINE, " +
    ncclGetErrorWithVersion(result)``), where NCCL's ``ncclGetErrorString`` (src/init.cc) names
    ncclInvalidUsage ``"invalid usage (run with NCCL_DEBUG=WARN for details)"`` and
    ncclInvalidArgument ``"invalid argument ..."``: what NCCL returns for an algorithm it cannot run
    ("no algorithm/protocol available") or an NCCL_ALGO it rejects. A dead peer reads
    ``unhandled system error`` or ``remote process exited`` instead.
    """
    text = str(exc).lower()
    return any(r in text for r in _REFUSALS)


def check_nccl_usable(world_size: int, *, local_world_size: int | None = None) -> None:
    """Raise BackendUnavailableError (one line) unless NCCL can run ``world_size`` ranks here.

    ``local_world_size`` is the number of ranks on this machine (LOCAL_WORLD_SIZE under torchrun);
    it defaults to ``world_size`` (all ranks local), each rank needing a GPU of its own.
    Raises ConfigError for a world size below 1.
    """
    if world_size < 1:
        raise ConfigError(f"world size must be >= 1, got {world_size}")
    import torch
    import torch.distributed as dist

    local = world_size if local_world_size is None else local_world_size
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        raise BackendUnavailableError(
            f"--backend nccl needs CUDA, but this torch ({torch.__version__}) is a CPU-only build; "
            "install a CUDA build of torch or use --backend gloo"
        )
    if not torch.cuda.is_available():
        raise BackendUnavailableError(
            "--backend nccl needs a CUDA GPU and none is usable here (no GPU, no driver, or "
            "CUDA_VISIBLE_DEVICES hides them); use --backend gloo"
        )
    if not dist.is_available() or not dist.is_nccl_available():
        raise BackendUnavailableError(
            f"--backend nccl: this torch ({torch.__version__}) was built without NCCL; use --backend gloo"
        )
    gpus = torch.cuda.device_count()
    if local > gpus:
        raise BackendUnavailableError(
            f"--backend nccl runs one rank per GPU: {local} ranks on this machine need {local} GPUs, "
            f"it has {gpus}; use --ranks {gpus} or fewer"
        )


# NCCL INFO lines: "[timestamp ]host:pid:tid [dev] NCCL INFO <message>" (src/debug.cc).
_INFO_RE = re.compile(r"(?:(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) )?\[(?P<dev>\d+)\] NCCL INFO (?P<msg>.*)$")
_NUM = r"(?P<bytes>\d+) Bytes -> "
_MESSAGE_RES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "named",
        re.compile(
            r"^(?P<func>\w+): " + _NUM + r"Algo (?P<algo>[A-Za-z]\w*) proto (?P<proto>\w+) "
            r"channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\}"
        ),
    ),
    (
        "numbered",
        re.compile(
            r"^(?:(?P<func>\w+): )?" + _NUM + r"Algo (?P<algo>\d+) proto (?P<proto>\d+) "
            r"time (?P<time>[-+0-9.eE]+|nan|inf)"
        ),
    ),
    (
        "symmetric",
        re.compile(
            r"^(?P<func>\w+) \[Symmetric\]: " + _NUM + r"Kernel (?P<kernel>\S+) "
            r"nchannels (?P<nch>\d+) nthreads \d+"
        ),
    ),
    ("ce", re.compile(r"^(?P<func>\w+) \[Copy Engine\]: " + _NUM + r"cudaMemcpy")),
    ("hce", re.compile(r"^(?P<func>\w+) \[Hierarchical CE\]: " + _NUM + r"RMA proxy")),
)


@dataclass(frozen=True, slots=True)
class TuningChoice:
    """What NCCL chose for one collective call, from one TUNING line of its rank 0."""

    func: str
    """NCCL's name of the collective (``AllReduce``); empty where the line does not say (2.20-2.22)."""
    size_bytes: int
    """NCCL's byte count for the call: count x element size of the call's count argument."""
    algo: str
    """``Ring``, ``Tree``, ...; ``Symmetric``, ``CopyEngine``, ``HierarchicalCE`` for NCCL's other paths."""
    proto: str
    """``LL``, ``LL128``, ``Simple``; empty where the path has no protocol."""
    channel_lo: int | None = None
    channel_hi: int | None = None
    predicted_time_us: float | None = None
    """NCCL's own cost-model time (2.20-2.23 lines)."""
    kernel: str = ""
    """The symmetric kernel's name (``[Symmetric]`` lines)."""
    device: int | None = None
    pid: int | None = None

    @property
    def channels(self) -> int | None:
        """Channels used (``Hi - Lo + 1``) where the line says, or ``nchannels`` of symmetric kernels."""
        if self.channel_lo is None or self.channel_hi is None:
            return None
        return self.channel_hi - self.channel_lo + 1


def _number_name(table: tuple[str, ...], text: str) -> str:
    index = int(text)
    return table[index] if 0 <= index < len(table) else f"#{index}"


def parse_tuning_line(line: str) -> TuningChoice | None:
    """One NCCL log line -> its TuningChoice, or None when it is not a per-call TUNING line.

    Supported message formats (the part after ``NCCL INFO``; a line without the NCCL prefix is also read):

    * 2.24 and later, ``src/enqueue.cc``:
      ``%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}``
      e.g. ``AllReduce: 1048576 Bytes -> Algo Ring proto Simple channel{Lo..Hi}={0..15}``
    * 2.23: ``%s: %ld Bytes -> Algo %d proto %d time %f`` (numbers in NCCL's enum order)
    * 2.20 to 2.22: ``%ld Bytes -> Algo %d proto %d time %f`` (no collective name)
    * 2.27 and later, symmetric kernels:
      ``%s [Symmetric]: %ld Bytes -> Kernel %s nchannels %d nthreads %d[ nWorks %d]``
    * 2.29 and later, copy engine: ``%s [Copy Engine]: %ld Bytes -> cudaMemcpy...`` and
      ``%s [Hierarchical CE]: %ld Bytes -> RMA proxy + CE``

    NCCL 2.19 and earlier write no per-call line (theirs is commented out in the source).
    """
    text = line.rstrip("\r\n")
    device: int | None = None
    pid: int | None = None
    m = _INFO_RE.search(text)
    if m is not None:
        msg = m.group("msg")
        device = int(m.group("dev"))
        pid = int(m.group("pid")) if m.group("pid") else None
    else:
        msg = text.strip()
    for kind, pattern in _MESSAGE_RES:
        mm = pattern.match(msg)
        if mm is None:
            continue
        func = mm.group("func") or ""
        size = int(mm.group("bytes"))
        if kind == "named":
            # 2.24+ print ncclAlgoToString's RING, NVLS_TREE, SIMPLE: keep ncclAlgoStr's spelling.
            algo_text, proto_text = mm.group("algo"), mm.group("proto")
            return TuningChoice(
                func,
                size,
                canonical_algo(algo_text) or algo_text,
                canonical_proto(proto_text) or proto_text,
                int(mm.group("lo")),
                int(mm.group("hi")),
                device=device,
                pid=pid,
            )
        if kind == "numbered":
            return TuningChoice(
                func,
                size,
                _number_name(_ALGO_BY_NUMBER, mm.group("algo")),
                _number_name(_PROTO_BY_NUMBER, mm.group("proto")),
                predicted_time_us=float(mm.group("time")),
                device=device,
                pid=pid,
            )
        if kind == "symmetric":
            nch = int(mm.group("nch"))
            return TuningChoice(
                func, size, "Symmetric", "", 0, nch - 1, kernel=mm.group("kernel"), device=device, pid=pid
            )
        algo = "CopyEngine" if kind == "ce" else "HierarchicalCE"
        return TuningChoice(func, size, algo, "", device=device, pid=pid)
    return None


def parse_tuning_log(text: str) -> list[TuningChoice]:
    """Every per-call TUNING line of an NCCL log (``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING``), in order.

    Other lines (NCCL's tuning tables, INIT lines, program output) are skipped; see
    :func:`parse_tuning_line` for the formats read.
    """
    choices: list[TuningChoice] = []
    for line in text.splitlines():
        if "Bytes ->" not in line:
            continue
        choice = parse_tuning_line(line)
        if choice is not None:
            choices.append(choice)
    return choices


def tuning_log_env(log_dir: Path) -> dict[str, str]:
    """Environment that makes NCCL log its per-call choices into ``log_dir`` (one file per process).

    Must be in a rank's environment before its first NCCL call (NCCL reads it once per process).
    NCCL's warnings then go to the same file, not to stderr: show the file when a rank fails.
    """
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "TUNING",
        # NCCL expands %h to the host name and %p to the process id.
        "NCCL_DEBUG_FILE": str(log_dir / "nccl.%h.%p.log"),
    }


def read_tuning_logs(log_dir: Path) -> list[TuningChoice]:
    """The TUNING choices in every ``nccl.*.log`` file under ``log_dir`` (missing directory: none)."""
    if not log_dir.is_dir():
        return []
    choices: list[TuningChoice] = []
    for path in sorted(log_dir.glob("nccl.*.log")):
        choices.extend(parse_tuning_log(path.read_text(encoding="utf-8", errors="replace")))
    return choices


class TuningLogReader:
    """Reads the TUNING lines NCCL appended to ``log_dir``'s files since the previous call.

    A sweep asks after each point, so that each point's choice comes from that point's calls only
    (the same size recurs for every variant). A torn last line is left for the next call.
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._offsets: dict[Path, int] = {}

    def new_choices(self) -> list[TuningChoice]:
        """The choices logged since the last call (all of them on the first call)."""
        if not self.log_dir.is_dir():
            return []
        choices: list[TuningChoice] = []
        for path in sorted(self.log_dir.glob("nccl.*.log")):
            start = self._offsets.get(path, 0)
            with path.open("rb") as f:
                f.seek(start)
                data = f.read()
            end = data.rfind(b"\n") + 1
            self._offsets[path] = start + end
            choices.extend(parse_tuning_log(data[:end].decode("utf-8", errors="replace")))
        return choices


def choice_for(
    choices: Iterable[TuningChoice], nccl_name: str, size_bytes: int, world_size: int
) -> tuple[str, str] | None:
    """The (algo, proto) NCCL chose most often for collective ``nccl_name`` (``allreduce``) at ``size_bytes``.

    ``size_bytes`` counts as nccl-tests does; NCCL's line counts the call's count argument, which for
    all-gather and reduce-scatter is one rank's share, so both sizes match. Lines without a collective
    name (2.20-2.22) match any. None when no line matches.
    """
    wanted = nccl_name.lower()
    # ncclAllGather/ncclReduceScatter log their per-rank count (sendcount, recvcount); the others
    # the whole buffer. Matching only the op's own size keeps a 32 MiB all-reduce from taking the
    # line of a 256 MiB one on 8 ranks.
    sizes = {size_bytes}
    if wanted in ("allgather", "reducescatter") and world_size > 0 and size_bytes % world_size == 0:
        sizes = {size_bytes // world_size}
    votes: Counter[tuple[str, str]] = Counter()
    for c in choices:
        if c.size_bytes in sizes and (not c.func or c.func.lower() == wanted):
            votes[(c.algo, c.proto)] += 1
    if not votes:
        return None
    return votes.most_common(1)[0][0]


def nccl_versions() -> dict[str, str]:
    """Versions and GPU names for result rows, keyed as ResultRow's fields; "" for what is unknown.

    Keys: ``torch_version``, ``backend_version`` (NCCL, ``2.21.5``), ``cuda_version`` (torch's CUDA),
    ``driver_version`` (through NVML when pynvml and a driver are present), ``device_name`` (the
    distinct GPU names, joined by ", "). Never raises.
    """
    import torch

    out = {
        "torch_version": str(torch.__version__),
        "backend_version": "",
        "cuda_version": str(torch.version.cuda or ""),
        "driver_version": "",
        "device_name": "",
    }
    if not torch.cuda.is_available():
        return out
    try:
        version = torch.cuda.nccl.version()
        out["backend_version"] = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
    except (AttributeError, RuntimeError):
        log.debug("torch reports no NCCL version", exc_info=True)
    names: list[str] = []
    for i in range(torch.cuda.device_count()):
        name = torch.cuda.get_device_name(i)
        if name not in names:
            names.append(name)
    out["device_name"] = ", ".join(names)
    out["driver_version"] = _driver_version()
    return out


def _driver_version() -> str:
    from collbench.topology.nvml import Nvml, NvmlUnavailableError, PynvmlBackend

    try:
        nvml = Nvml(PynvmlBackend())
    except ImportError:
        return ""
    try:
        value = nvml.call("nvmlSystemGetDriverVersion")
    except NvmlUnavailableError:
        return ""
    except Exception:  # pynvml's own error family; a missing driver version is not worth failing a run
        log.debug("NVML gave no driver version", exc_info=True)
        return ""
    finally:
        nvml.shutdown()
    return str(value or "")

"""Running NCCL's own collectives: forcing a variant per communicator, the usability check, the log files.

What NCCL is (its algorithms, protocols, variants, support and log format) is :mod:`collbench.nccl`'s;
this module acts on a running library. Facts from NCCL's source (NVIDIA/nccl, v2.12 to v2.30):

* Forcing. ``NCCL_ALGO`` and ``NCCL_PROTO`` are read in ``ncclTopoTuneModel`` (src/graph/tuning.cc)
  through ``getenv``/``ncclGetEnv``, which that function calls again for every communicator it sets up
  (``ncclCommInitRank*`` and ``ncclCommSplit`` alike). So the values count per *communicator*, not per
  process: a communicator created while the environment holds a variant's values runs that variant.
  :func:`variant_group` does that inside one process; a launcher that starts fresh rank processes per
  variant may instead put :func:`collbench.nccl.variants.variant_env` into their environment. An
  algorithm name this NCCL does not know makes communicator creation fail (``ncclInvalidUsage``), so
  the sweep refuses it first (:func:`collbench.nccl.variants.check_variant_supported`), in one line.
* Observing. ``NCCL_DEBUG``, ``NCCL_DEBUG_SUBSYS`` and ``NCCL_DEBUG_FILE`` are read once per process
  (``ncclDebugInit``, on the first NCCL call): :func:`tuning_log_env` must be in a rank's environment
  before it first touches NCCL. Only rank 0 of a communicator writes the TUNING lines; NCCL's log
  file is line-buffered, so finished lines can be read while the process runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collbench.backends.nccl import NCCL
from collbench.errors import BackendUnavailableError, ConfigError
from collbench.nccl.tuning_log import TuningChoice, parse_tuning_log
from collbench.nccl.variants import NativeVariant, channel_bounds, variant_env

log = logging.getLogger(__name__)


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
    A channel count goes in the communicator's own ``ncclConfig_t`` (``min_ctas``/``max_ctas``):
    NCCL_MIN/MAX_NCHANNELS are read once per process (:mod:`collbench.nccl.variants`).
    """
    import torch
    import torch.distributed as dist

    options = None
    bounds = channel_bounds(variant)
    if bounds is not None:
        options = dist.ProcessGroupNCCL.Options()
        options.config.min_ctas, options.config.max_ctas = bounds
    with applied_env(variant_env(variant)):
        group = dist.new_group(ranks=ranks, backend=NCCL.torch_backend, pg_options=options)
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
    from collbench.topology.nvml_source import driver_version

    out["driver_version"] = driver_version()
    return out

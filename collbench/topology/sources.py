"""Where a topology comes from: live NVML (the default), a replayed recording, or the host itself.

``discover_topology`` never fails for "no GPU": without the NVML library, without a driver, or with no
GPU, it describes the host and its CPU ranks, with a note saying why.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from pathlib import Path

from collbench.errors import BackendUnavailableError, ConfigError, HardwareError, InputFileError
from collbench.topology.device_order import in_cuda_order
from collbench.topology.host import host_topology
from collbench.topology.model import Topology
from collbench.topology.nvml import (
    FakeNvmlBackend,
    Nvml,
    NvmlBackend,
    NvmlUnavailableError,
    PynvmlBackend,
    Recording,
    RecordingBackend,
    error_name,
    nvml_error_type,
)
from collbench.topology.nvml_source import topology_from_nvml

log = logging.getLogger(__name__)

HOST_SUFFIX = "describing the host and its CPU ranks"


def _from_backend(backend: NvmlBackend, host: str, ranks: int | None) -> Topology:
    nvml = Nvml(backend)
    try:
        topo = topology_from_nvml(nvml, host)
    except NvmlUnavailableError as exc:
        return _host(ranks, exc.reason)
    except nvml_error_type() as exc:
        raise HardwareError(f"NVML failed while describing the GPUs ({error_name(exc).lower()}): {exc}") from exc
    finally:
        nvml.shutdown()
    if not topo.gpus:
        return _host(ranks, "NVML found no GPU")
    # Rank i runs on cuda:i: keep and order the GPUs as CUDA shows them, not as NVML numbers them.
    topo, order_note = in_cuda_order(topo, os.environ)
    if order_note:
        topo = dataclasses.replace(topo, note=f"{topo.note}; {order_note}" if topo.note else order_note)
    if ranks is not None:
        try:
            topo = topo.subset(ranks)
        except ValueError as exc:
            raise ConfigError(f"--ranks {ranks}: {exc}") from None
    return topo


def _host(ranks: int | None, reason: str) -> Topology:
    try:
        return host_topology(ranks, f"{reason}: {HOST_SUFFIX}")
    except ValueError as exc:
        raise ConfigError(f"--ranks: {exc}") from None


def discover_topology(*, nvml_replay: Path | None = None, ranks: int | None = None) -> Topology:
    """This machine's topology from live NVML, or from a recording when ``nvml_replay`` is given.

    Without NVML or GPUs, the host with ``ranks`` CPU ranks (default: its core count, at least 2).
    With GPUs, they are the GPUs ``CUDA_VISIBLE_DEVICES`` shows, in CUDA's order (``CUDA_DEVICE_ORDER``;
    see ``device_order``), and ``ranks`` keeps the first ``ranks`` of them. Raises InputFileError for a bad recording,
    ConfigError for an impossible ``ranks``, HardwareError when the driver fails unexpectedly.
    """
    if nvml_replay is not None:
        recording = Recording.load(nvml_replay)
        try:
            return _from_backend(FakeNvmlBackend(recording), recording.host, ranks)
        except HardwareError as exc:
            raise InputFileError(str(nvml_replay), str(exc)) from exc
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError) as exc:
            # A recording is a file anyone may have edited: an answer of a kind NVML never gives (a
            # GPU count of "x", a name that is an object) fails where it is used. Live NVML is not
            # caught here: there such an exception is collbench's bug and keeps its traceback.
            raise InputFileError(
                str(nvml_replay), f"an answer is not of the kind NVML gives ({type(exc).__name__}: {exc})"
            ) from exc
    try:
        backend = PynvmlBackend()
    except ImportError:
        return _host(ranks, "pynvml (nvidia-ml-py) is not installed")
    return _from_backend(backend, socket.gethostname(), ranks)


def record_nvml(path: Path, *, description: str = "") -> Topology:
    """Describe this machine through NVML and save every raw NVML answer to ``path`` (JSON).

    Returns the topology built while recording. Raises BackendUnavailableError when NVML cannot be
    used here (there is nothing to record), HardwareError when the driver fails unexpectedly.
    """
    host = socket.gethostname()
    try:
        inner = PynvmlBackend()
    except ImportError:
        raise BackendUnavailableError("--record needs pynvml (nvidia-ml-py); install it") from None
    backend = RecordingBackend(inner, host)
    nvml = Nvml(backend)
    try:
        topo = topology_from_nvml(nvml, host)
    except NvmlUnavailableError as exc:
        raise BackendUnavailableError(f"--record needs NVML: {exc.reason}; nothing to record here") from None
    except nvml_error_type() as exc:
        raise HardwareError(f"NVML failed while recording ({error_name(exc).lower()}): {exc}") from exc
    finally:
        nvml.shutdown()
    backend.recording.description = description or f"recorded by collbench discover --record on {host}"
    backend.recording.save(path)
    return topo

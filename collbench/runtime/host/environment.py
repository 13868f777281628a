"""The run's identity that every result row carries: host, device, versions of torch and the backend."""

from __future__ import annotations

import socket
from dataclasses import dataclass

import torch

from collbench.results.row import CPU_DEVICE_NAME


@dataclass(frozen=True, slots=True)
class RunEnvironment:
    host: str
    torch_version: str
    backend_version: str
    """NCCL's version for nccl runs; empty for gloo, which has no version of its own (it ships in torch)."""
    cuda_version: str
    driver_version: str
    device_name: str


def host_name() -> str:
    """This machine's host name."""
    return socket.gethostname()


def nccl_version() -> str:
    """NCCL's version as torch was built with it (``2.21.5``), or empty without CUDA."""
    if not torch.cuda.is_available():
        return ""
    try:
        version = torch.cuda.nccl.version()
    except (RuntimeError, AttributeError):
        return ""
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    return str(version)


def driver_version() -> str:
    """The NVIDIA driver's version through NVML, or empty where there is none."""
    if not torch.cuda.is_available():
        return ""
    from collbench.topology.nvml_source import driver_version as nvml_driver_version

    return nvml_driver_version()


def run_environment(backend_version: str, device: torch.device | str) -> RunEnvironment:
    """Describe this process's host, device and versions for result rows (``backend_version``: the
    backend's own, ``Backend.version``)."""
    dev = torch.device(device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else CPU_DEVICE_NAME
    return RunEnvironment(
        host=host_name(),
        torch_version=str(torch.__version__),
        backend_version=backend_version,
        cuda_version=str(torch.version.cuda or ""),
        driver_version=driver_version() if dev.type == "cuda" else "",
        device_name=name,
    )
